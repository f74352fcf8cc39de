"""RunTime: training and evaluation seconds, nested periodic evaluation, resume."""

import math
from types import SimpleNamespace

import pytest

from moram_avalanche.strategies.plugins import timing
from moram_avalanche.strategies.plugins.timing import RunTime


@pytest.fixture
def clock(monkeypatch):
    """A fake perf_counter that returns the times of ``clock.ticks`` in order."""
    state = SimpleNamespace(ticks=[])
    monkeypatch.setattr(timing.time, "perf_counter", lambda: state.ticks.pop(0))
    return state


def test_evaluation_inside_training_counts_as_evaluation(clock):
    strategy = SimpleNamespace(device="cpu")
    runtime = RunTime()
    # train 0..10 with a periodic evaluation 1..3 inside, then a plain evaluation 10..11.5
    clock.ticks = [0.0, 1.0, 3.0, 10.0, 10.0, 11.5]
    runtime.before_training(strategy)
    runtime.before_eval(strategy)
    runtime.after_eval(strategy)
    runtime.after_training(strategy)
    runtime.before_eval(strategy)
    runtime.after_eval(strategy)
    assert runtime.train_seconds == pytest.approx(8.0)
    assert runtime.eval_seconds == pytest.approx(3.5)
    # a second experience without nested evaluation: 20..24
    clock.ticks = [20.0, 24.0]
    runtime.before_training(strategy)
    runtime.after_training(strategy)
    assert runtime.report() == pytest.approx(
        {"train_seconds": 12.0, "eval_seconds": 3.5, "train_seconds_per_experience": 6.0})


def test_totals_survive_a_checkpoint():
    runtime = RunTime()
    assert math.isnan(runtime.report()["train_seconds_per_experience"])
    runtime.train_seconds, runtime.eval_seconds, runtime.experiences = 7.0, 2.0, 2
    resumed = RunTime()
    resumed.load_state_dict(runtime.state_dict())
    assert resumed.report() == runtime.report()
