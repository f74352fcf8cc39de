"""The text loop's cosine learning rate (the paper's CodeAlpaca fine-tuning: "cosine from 5e-4")."""

import math

import pytest
import torch
from avalanche.core import SupervisedPlugin

from tiny_stream import FAMILIES, TASKS, stream_tokenizer


def benchmark():
    from moram_avalanche.benchmarks import synthetic_text

    return synthetic_text(TASKS, train_per_label=2, test_per_label=1)


def build(name, plugins=None, **options):
    from moram_avalanche.strategies.registry import get_strategy

    tokenizer = stream_tokenizer()
    return get_strategy(name, family="text")(model=FAMILIES["t5"](tokenizer, seed=0), tokenizer=tokenizer,
                                             plugins=plugins, **{"train_mb_size": 4, "max_new_tokens": 2, **options}), None


class RecordLR(SupervisedPlugin):
    """The rate each optimizer step uses (read before the step), per task."""

    def __init__(self):
        super().__init__()
        self.rates, self.tasks = [], []

    def before_training_exp(self, strategy, **kwargs):
        self.rates = []
        self.tasks.append(self.rates)

    def before_update(self, strategy, **kwargs):
        optimizer = getattr(strategy.optimizer, "optimizer", strategy.optimizer)
        self.rates.append(optimizer.param_groups[0]["lr"])


def half_cosine(lr, step, total):
    return lr * 0.5 * (1 + math.cos(math.pi * step / total))


@pytest.mark.parametrize("budget", [dict(iterations=4), dict(epochs=2)])
def test_cosine_decays_each_task_from_lr_and_restarts(budget):
    bench = benchmark()
    record = RecordLR()
    strategy, _ = build("seq-lora", plugins=[record], lr=0.01, lr_schedule="cosine", **budget)
    experiences = list(bench.train_stream)[:2]
    for experience in experiences:
        strategy.train(experience)
    for experience, rates in zip(experiences, record.tasks):  # restarted for every task
        steps = 4 if "iterations" in budget else 2 * math.ceil(len(experience.dataset) / 4)
        assert rates == pytest.approx([half_cosine(0.01, s, steps) for s in range(steps)])


def test_constant_is_the_default_and_a_bad_name_is_refused():
    bench = benchmark()
    record = RecordLR()
    strategy, _ = build("seq-lora", plugins=[record], lr=0.01, iterations=3)
    strategy.train(bench.train_stream[0])
    assert record.rates == [0.01] * 3
    with pytest.raises(ValueError, match="lr_schedule must be one of constant, cosine"):
        build("seq-lora", lr_schedule="linear")


def test_cosine_follows_optimizer_steps_under_accumulation():
    bench = benchmark()
    record = RecordLR()
    strategy, _ = build("seq-lora", plugins=[record], lr=0.01, lr_schedule="cosine", iterations=2,
                        train_mb_size=2, accumulation_steps=2)
    strategy.train(bench.train_stream[0])
    # four minibatches, the factor moving every minibatch: the inner optimizer steps after 2 and 4
    assert len(record.rates) == 4
    assert record.rates == pytest.approx([half_cosine(0.01, s, 4) for s in range(4)])
    assert isinstance(strategy.optimizer.optimizer, torch.optim.Optimizer)
