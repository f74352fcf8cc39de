"""TaskCosine: the learning rate of a text task decays along a half cosine over that task's steps."""

from __future__ import annotations

from avalanche.core import SupervisedPlugin

from ....algorithms.schedules import cosine_lr_factor
from .accumulation import AccumulatedSteps

#: the text loop's learning-rate schedules: ``constant`` (O-LoRA's ``lr_scheduler_type constant``; the
#: release's TRACE runs) and ``cosine`` (the paper's CodeAlpaca fine-tuning: "cosine from 5e-4")
LR_SCHEDULES = ("constant", "cosine")


class TaskCosine(SupervisedPlugin, supports_distributed=True):
    """Multiply each task's learning rate by ``0.5 (1 + cos(pi s / S))`` at minibatch ``s`` of the
    task's ``S`` (:func:`~moram_avalanche.algorithms.schedules.cosine_lr_factor`, no warm-up),
    restarted every task.

    ``S`` is counted when the task starts, from what the loop will run: ``iterations`` x
    ``accumulation_steps`` minibatches when the budget is in optimizer steps, else the task's epochs
    x the minibatches of its data loader. The factor moves every minibatch, so with gradient
    accumulation an optimizer step takes the rate of its last minibatch.
    """

    def __init__(self) -> None:
        super().__init__()
        #: the parameter groups of the current task's optimizer and their base rates (None: not training)
        self.groups = None
        #: the minibatches of the current task, and those done
        self.total = self.step = 0

    def before_training_exp(self, strategy, **kwargs):
        self.groups = None
        if strategy.optimizer is None:
            return
        accumulation = getattr(strategy, "accumulation_steps", 1)
        if getattr(strategy, "iterations", None) is not None:
            self.total = strategy.iterations * accumulation
        else:
            self.total = strategy.train_epochs * len(strategy.dataloader)
        optimizer = strategy.optimizer
        if isinstance(optimizer, AccumulatedSteps):
            optimizer = optimizer.optimizer
        self.groups = [(group, group.setdefault("initial_lr", group["lr"])) for group in optimizer.param_groups]
        self.step = 0
        self._set()

    def after_training_iteration(self, strategy, **kwargs):
        if self.groups is not None:
            self.step += 1
            self._set()

    def _set(self) -> None:
        factor = cosine_lr_factor(self.step, warmup=0, total=max(self.total, 1))
        for group, base in self.groups:
            group["lr"] = base * factor


def schedule_plugins(name: str) -> list:
    """The plugins of learning-rate schedule ``name`` (:data:`LR_SCHEDULES`)."""
    if name not in LR_SCHEDULES:
        raise ValueError(f"lr_schedule must be one of {', '.join(LR_SCHEDULES)}, got {name!r} (cosine: the paper's "
                         "CodeAlpaca fine-tuning)")
    return [TaskCosine()] if name == "cosine" else []


__all__ = ["LR_SCHEDULES", "TaskCosine", "schedule_plugins"]
