"""``transformers.Trainer`` across tasks: a continual run is a loop of ``trainer.train()`` calls.

The Trainer builds its optimizer once and keeps it (``Trainer.create_optimizer`` and
``create_scheduler`` build one only while ``trainer.optimizer`` / ``trainer.lr_scheduler`` are
None, ``transformers/trainer.py``), so after ``model.add_task()`` the new atoms would be in no
optimizer and would never train, silently. Two pieces make the loop safe::

    trainer = Trainer(model=peft_model, args=args, train_dataset=task_data[0],
                      callbacks=[MoRAMTaskCallback()])
    trainer.train()                                # task 1: the atoms get_peft_model created
    for data in task_data[1:]:
        start_task(trainer, data, output_dir=...)  # freeze, grow, fresh optimizer and schedule
        trainer.train()

* :func:`start_task` grows the adapter's bank (``add_task``: every atom frozen, ``atoms_per_task``
  new trainable ones per layer, outputs unchanged), drops the Trainer's optimizer and learning-rate
  schedule so the next ``train()`` builds them over the new atoms, and sets the task's data and
  checkpoint folder (each ``train()`` numbers its checkpoints from the first step again, so tasks
  sharing a folder would overwrite each other's ``checkpoint-N``);
* :class:`MoRAMTaskCallback` stops ``train()`` before its first step when the optimizer misses a
  trainable parameter (a forgotten :func:`start_task`, or an optimizer built by hand before
  ``add_task``), saying how to fix it.

Resuming: a Trainer checkpoint holds the adapter (the whole bank: frozen atoms and the task's
trainable ones), the optimizer, the schedule and the random states. Rebuild the model with the
task's structure (``get_peft_model`` then one ``add_task()`` per finished task) and call
``trainer.train(resume_from_checkpoint=...)``: peft's ``load_adapter`` loads the bank, whatever
its size, and training goes on as if never interrupted. A checkpoint of an earlier task (fewer
atoms than the bank holds after :func:`start_task`) is refused before it loads
(:func:`~moram_avalanche.text.peft_method.check_no_shrinking`): it would shrink the bank back and,
its step count being the earlier task's last, train 0 steps of the current task.
"""

from __future__ import annotations

from typing import Optional

from transformers import TrainerCallback


def start_task(trainer, train_dataset=None, *, eval_dataset=None, output_dir=None,
               adapter_name: Optional[str] = None) -> int:
    """Start the next task of ``trainer``'s MoRAM model; returns the atoms per layer.

    Freezes every atom of ``adapter_name`` (default: the active adapter) and appends
    ``atoms_per_task`` new trainable ones per layer, drops ``trainer.optimizer`` and
    ``trainer.lr_scheduler`` (the next ``trainer.train()`` builds them over the new atoms, with the
    schedule restarting from its first step), and sets ``train_dataset`` / ``eval_dataset`` and
    ``trainer.args.output_dir`` (this task's checkpoints) when given.
    """
    model = trainer.model
    if not hasattr(model, "add_task"):
        raise TypeError(f"the Trainer's model is {type(model).__name__}, not a MoRAM peft model: build it "
                        "with peft.get_peft_model(model, MoRAMConfig(...))")
    atoms = model.add_task(adapter_name)
    trainer.optimizer = None
    trainer.lr_scheduler = None
    if train_dataset is not None:
        trainer.train_dataset = train_dataset
    if eval_dataset is not None:
        trainer.eval_dataset = eval_dataset
    if output_dir is not None:
        trainer.args.output_dir = str(output_dir)
    return atoms


class MoRAMTaskCallback(TrainerCallback):
    """Refuses a ``train()`` whose optimizer misses a trainable parameter (module docstring)."""

    def on_train_begin(self, args, state, control, model=None, optimizer=None, **kwargs):
        if model is None or optimizer is None:
            return control
        held = {id(param) for group in optimizer.param_groups for param in group["params"]}
        missing = [name for name, param in model.named_parameters() if param.requires_grad and id(param) not in held]
        if missing:
            raise RuntimeError(
                f"{len(missing)} trainable parameters are in no optimizer group, e.g. {missing[:2]}: the "
                "Trainer's optimizer was built before the model grew (add_task()). Start each task after "
                "the first with moram_avalanche.text.start_task(trainer, data), which grows the bank and "
                "lets the Trainer build a fresh optimizer")
        return control


__all__ = ["MoRAMTaskCallback", "start_task"]
