"""StopOnDivergence and the progress bar: every loss checked, read on the host only where and when it must."""

import io
import types

import pytest
import torch
from torch import nn

from moram_avalanche.strategies.plugins.divergence import StopOnDivergence, TrainingDiverged
from moram_avalanche.utils.dispatch import OpCounter


def fake_strategy():
    model = nn.Linear(3, 2)
    return types.SimpleNamespace(
        model=model, loss=None, clock=types.SimpleNamespace(train_exp_iterations=0),
        experience=types.SimpleNamespace(current_experience=0, domain="alpha"),
        optimizer=types.SimpleNamespace(param_groups=[{"lr": 0.5}]))


def step(plugin, strategy, iteration, value):
    strategy.clock.train_exp_iterations = iteration
    strategy.loss = torch.tensor(value)
    with OpCounter() as ops:
        plugin.before_backward(strategy)
    return ops.host_syncs()


def test_deferred_check_reads_once_per_check_every_and_names_the_first_bad_iteration():
    plugin, strategy = StopOnDivergence(check_every=10, deferred=True), fake_strategy()
    plugin.before_training_exp(strategy)
    losses = [1.0, 0.9, 0.8, 0.7, float("nan"), float("inf"), 0.5, 0.5, 0.5]
    syncs = [step(plugin, strategy, i, loss) for i, loss in enumerate(losses)]
    assert syncs == [[]] * 9  # nothing read yet: a GPU never waits
    with pytest.raises(TrainingDiverged, match=r"the loss is nan at iteration 4 of experience 1 \(alpha\) "
                                               r"with learning rate 0.5"):
        step(plugin, strategy, 9, 0.5)  # the 10th step reads the check


def test_deferred_check_is_read_at_the_end_of_the_experience():
    plugin, strategy = StopOnDivergence(check_every=50, deferred=True), fake_strategy()
    plugin.before_training_exp(strategy)
    for i, loss in enumerate([1.0, float("inf"), 1.0]):
        step(plugin, strategy, i, loss)
    with pytest.raises(TrainingDiverged, match="the loss is inf at iteration 1 "):
        plugin.after_training_exp(strategy)
    plugin.before_training_exp(strategy)  # a new experience starts clean
    step(plugin, strategy, 0, 1.0)
    plugin.after_training_exp(strategy)


def test_on_the_cpu_every_loss_is_read_at_once():
    plugin, strategy = StopOnDivergence(), fake_strategy()
    plugin.before_training_exp(strategy)
    assert step(plugin, strategy, 0, 1.0) == ["aten::_local_scalar_dense"]
    with pytest.raises(TrainingDiverged, match="the loss is nan at iteration 1 "):
        step(plugin, strategy, 1, float("nan"))


def test_non_finite_weights_are_named_after_the_experience():
    plugin, strategy = StopOnDivergence(), fake_strategy()
    plugin.before_training_exp(strategy)
    plugin.after_training_exp(strategy)  # finite: nothing raised
    with torch.no_grad():
        strategy.model.bias[1] = float("nan")
    with pytest.raises(TrainingDiverged, match="the trainable weight bias holds non-finite values"):
        plugin.after_training_exp(strategy)
    strategy.model.bias.requires_grad_(False)  # frozen weights are not the training's doing
    plugin.after_training_exp(strategy)


def test_check_every_must_be_a_positive_int():
    with pytest.raises(ValueError, match="check_every"):
        StopOnDivergence(check_every=0)


def test_a_stateless_04_pickle_restores_a_working_plugin():
    """0.4 pickled this plugin with an empty state; pickle then skips ``__setstate__`` altogether."""
    import pickle

    old = StopOnDivergence()
    old.__dict__.clear()  # what a 0.4 checkpoint holds
    plugin, strategy = pickle.loads(pickle.dumps(old)), fake_strategy()
    assert vars(plugin) == {}
    plugin.before_training_exp(strategy)
    assert step(plugin, strategy, 0, 1.0) == ["aten::_local_scalar_dense"]
    with pytest.raises(TrainingDiverged, match="the loss is inf at iteration 1 "):
        step(plugin, strategy, 1, float("inf"))


def test_the_progress_bar_reads_the_loss_only_when_shown_and_once_a_second(monkeypatch):
    from moram_avalanche.strategies.plugins import progress

    strategy = fake_strategy()
    strategy.dataloader, strategy.progress = range(5), False
    strategy.loss = torch.tensor(0.5)
    bar = progress.TrainingProgress()
    bar.before_training_epoch(strategy)
    with OpCounter() as hidden:
        for _ in range(5):
            bar.after_training_iteration(strategy)
    assert hidden.host_syncs() == []
    bar.after_training_epoch(strategy)
    clock = iter([0.0, 0.2, 0.4, 1.5, 1.6, 1.7, 1.8])
    monkeypatch.setattr(progress.time, "monotonic", lambda: next(clock))
    shown_bar = progress.tqdm
    monkeypatch.setattr(progress, "tqdm", lambda **kw: shown_bar(**{**kw, "disable": False, "file": io.StringIO()}))
    bar.before_training_epoch(strategy)  # as on a terminal
    with OpCounter() as shown:
        for _ in range(5):
            bar.after_training_iteration(strategy)
    # read at the first step, once more after a second, and at the last step
    assert shown.host_syncs() == ["aten::_local_scalar_dense"] * 3
    bar.after_training_epoch(strategy)
