"""A continual run with transformers.Trainer: two tasks on a tiny random LLaMA, checkpoints and resume."""

import pytest
import torch

from tiny_text import tiny_llama


class Examples(torch.utils.data.Dataset):
    """Eight causal-LM examples of one task (labels = inputs), drawn from the task's seed."""

    def __init__(self, seed):
        generator = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(3, 99, (8, 6), generator=generator)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, index):
        return {"input_ids": self.ids[index], "labels": self.ids[index]}


def arguments(output_dir):
    from transformers import TrainingArguments

    return TrainingArguments(output_dir=str(output_dir), per_device_train_batch_size=2, max_steps=4,
                             learning_rate=0.05, save_strategy="steps", save_steps=2, logging_strategy="no",
                             report_to=[], use_cpu=True, seed=0, disable_tqdm=True, dataloader_num_workers=0)


def moram_llama():
    from peft import get_peft_model

    from moram_avalanche.text import MoRAMConfig

    return get_peft_model(tiny_llama(), MoRAMConfig(task_type="CAUSAL_LM", atoms_per_task=4))


def bank_rows(model):
    """Every bank's keys and values, by layer name (copies)."""
    from moram_avalanche.text import MoRAMTunerLayer

    return {name: (layer.moram_bank["default"].keys.clone(), layer.moram_bank["default"].values.clone())
            for name, layer in model.named_modules() if isinstance(layer, MoRAMTunerLayer)}


def test_two_tasks_keep_the_first_tasks_atoms_and_resume_equals_an_uninterrupted_run(tmp_path):
    from transformers import Trainer

    from moram_avalanche.text import MoRAMTaskCallback, start_task

    model = moram_llama()
    trainer = Trainer(model=model, args=arguments(tmp_path / "task1"), train_dataset=Examples(1),
                      callbacks=[MoRAMTaskCallback()])
    trainer.train()
    first = bank_rows(model)
    assert all(values.abs().sum() > 0 for _, values in first.values())  # task 1 trained
    assert start_task(trainer, Examples(2), output_dir=tmp_path / "task2") == 8
    trainer.train()
    assert trainer.state.global_step == 4 and (tmp_path / "task2" / "checkpoint-2").is_dir()
    second = bank_rows(model)
    for name, (keys, values) in first.items():  # task 2 left every atom of task 1 as it was
        assert torch.equal(second[name][0][:4], keys) and torch.equal(second[name][1][:, :4], values)
    assert all(values[:, 4:].abs().sum() > 0 for _, values in second.values())  # task 2 trained its own

    # a new process: the model rebuilt with task 2's structure, then the Trainer resumes task 2
    resumed = moram_llama()
    resumed.add_task()
    again = Trainer(model=resumed, args=arguments(tmp_path / "task2"), train_dataset=Examples(2),
                    callbacks=[MoRAMTaskCallback()])
    again.train(resume_from_checkpoint=str(tmp_path / "task2" / "checkpoint-2"))
    assert again.state.global_step == 4
    for name, (keys, values) in bank_rows(resumed).items():
        assert torch.equal(keys, second[name][0]) and torch.equal(values, second[name][1]), name


def test_a_task_grown_without_start_task_is_refused_before_training(tmp_path):
    from transformers import Trainer

    from moram_avalanche.text import MoRAMTaskCallback, start_task

    model = moram_llama()
    trainer = Trainer(model=model, args=arguments(tmp_path), train_dataset=Examples(1),
                      callbacks=[MoRAMTaskCallback()])
    trainer.train()
    model.add_task()  # the Trainer keeps its optimizer over task 1's atoms
    with pytest.raises(RuntimeError, match="trainable parameters are in no optimizer group.*start_task"):
        trainer.train()
    with pytest.raises(TypeError, match="not a MoRAM peft model"):
        start_task(Trainer(model=tiny_llama(), args=arguments(tmp_path)))


def test_resuming_from_an_earlier_tasks_checkpoint_is_refused_and_the_bank_kept(tmp_path):
    """Issue 46: after start_task, train(resume_from_checkpoint=<task 1's checkpoint>) loaded task
    1's smaller bank over the grown one (task 2's atoms dropped) and trained 0 steps, silently."""
    from transformers import Trainer

    from moram_avalanche.text import MoRAMTaskCallback, start_task

    model = moram_llama()
    trainer = Trainer(model=model, args=arguments(tmp_path / "task1"), train_dataset=Examples(1),
                      callbacks=[MoRAMTaskCallback()])
    trainer.train()
    assert start_task(trainer, Examples(2), output_dir=tmp_path / "task2") == 8
    grown = bank_rows(model)
    with pytest.raises(ValueError, match=r"this checkpoint holds 4 atoms of .* and adapter 'default' holds 8 now: .*"
                                         r"shrink the bank back.*Resume the current task from its own checkpoint") as error:
        trainer.train(resume_from_checkpoint=str(tmp_path / "task1" / "checkpoint-4"))
    assert "\n" not in str(error.value)
    for name, (keys, values) in bank_rows(model).items():  # nothing was loaded
        assert torch.equal(keys, grown[name][0]) and torch.equal(values, grown[name][1]), name
    trainer.train()  # task 2 trains, from its first step
    assert trainer.state.global_step == 4 and (tmp_path / "task2" / "checkpoint-4").is_dir()
