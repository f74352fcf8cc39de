"""RunTime, the one timer: training and evaluation seconds, nested periodic evaluation,
iterations with their warm-up, resume, the run record's keys."""

import math
import pickle
from types import SimpleNamespace

import pytest
import torch

from moram_avalanche.strategies.plugins.timing import RunTime
from moram_avalanche.utils import clock as the_clock


@pytest.fixture
def clock(monkeypatch):
    """A fake perf_counter (of the package's one clock) that returns the times of
    ``clock.ticks`` in order."""
    state = SimpleNamespace(ticks=[])
    monkeypatch.setattr(the_clock, "perf_counter", lambda: state.ticks.pop(0))
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


def test_the_run_record_keys_are_unchanged():
    runtime = RunTime()
    assert list(runtime.report()) == ["train_seconds", "eval_seconds", "train_seconds_per_experience"]
    assert list(runtime.state_dict()) == ["train_seconds", "eval_seconds", "experiences"]


def test_iterations_are_timed_on_request_with_a_warmup_per_experience(clock):
    strategy = SimpleNamespace(device="cpu", mb_x=torch.zeros(4, 3))
    runtime = RunTime(iterations=("train", "eval"), warmup=1)
    train = runtime.iterations["train"]
    # experience 1: train 0..20 with iterations 1..3 (warm-up), 3..6, 6..10
    clock.ticks = [0.0, 1.0, 3.0, 3.0, 6.0, 6.0, 10.0, 20.0]
    runtime.before_training(strategy)
    runtime.before_training_exp(strategy)
    for _ in range(3):
        runtime.before_training_iteration(strategy)
        runtime.after_training_iteration(strategy)
    runtime.after_training(strategy)
    assert train.seconds == [3.0, 4.0] and train.sizes == [4, 4]
    assert runtime.train_seconds == 20.0
    # experience 2: the warm-up starts again; iterations 30..35 (warm-up), 35..37 of 2 images
    strategy.mb_x = torch.zeros(2, 3)
    clock.ticks = [29.0, 30.0, 35.0, 35.0, 37.0, 40.0]
    runtime.before_training(strategy)
    runtime.before_training_exp(strategy)
    for _ in range(2):
        runtime.before_training_iteration(strategy)
        runtime.after_training_iteration(strategy)
    runtime.after_training(strategy)
    assert train.seconds == [2.0] and train.sizes == [2]
    assert runtime.report()["train_seconds_per_experience"] == pytest.approx(15.5)
    # evaluation 50..60 with iterations 51..52.5, 52.5..55: no warm-up
    clock.ticks = [50.0, 51.0, 52.5, 52.5, 55.0, 60.0]
    runtime.before_eval(strategy)
    for _ in range(2):
        runtime.before_eval_iteration(strategy)
        runtime.after_eval_iteration(strategy)
    runtime.after_eval(strategy)
    assert runtime.iterations["eval"].seconds == [1.5, 2.5] and runtime.eval_seconds == 10.0


def test_iterations_are_not_timed_by_default(clock):
    strategy = SimpleNamespace(device="cpu")  # no mb_x: the iteration hooks must not read it
    runtime = RunTime()
    assert runtime.iterations == {}
    runtime.before_training_exp(strategy)
    runtime.before_training_iteration(strategy)
    runtime.after_training_iteration(strategy)
    runtime.before_eval_iteration(strategy)
    runtime.after_eval_iteration(strategy)
    assert clock.ticks == []  # and no clock read


def test_unknown_phases_are_refused():
    with pytest.raises(ValueError, match=r"unknown phases \['test'\]"):
        RunTime(iterations=("train", "test"))


def test_a_pickle_of_an_earlier_runtime_still_resumes(clock):
    runtime = RunTime()
    runtime.train_seconds, runtime.eval_seconds, runtime.experiences = 7.0, 2.0, 2
    # what an earlier RunTime held (before the stopwatches), as a whole-strategy checkpoint pickles it
    earlier = {k: v for k, v in vars(runtime).items() if k not in ("_training", "_evaluation", "iterations")}
    earlier.update(_train_started=None, _eval_started=None)
    runtime.__dict__ = earlier
    resumed = pickle.loads(pickle.dumps(runtime))
    assert resumed.state_dict() == {"train_seconds": 7.0, "eval_seconds": 2.0, "experiences": 2}
    clock.ticks = [0.0, 4.0]
    strategy = SimpleNamespace(device="cpu")
    resumed.before_training(strategy)
    resumed.after_training(strategy)
    assert resumed.report() == {"train_seconds": 11.0, "eval_seconds": 2.0, "train_seconds_per_experience": 11.0 / 3}
