"""scripts/bench_timing.py: each clock's arithmetic on a fake clock, the round-robin order, and what a CPU cannot time."""

import importlib

import pytest


@pytest.fixture
def timing(scripts):
    return importlib.import_module("bench_timing")


class FakeTime:
    """A clock that moves only when a timed function says so: ``cost`` seconds per call of each function."""

    def __init__(self):
        self.now, self.log = 0.0, []

    def __call__(self):
        return self.now

    def function(self, name, costs):
        costs = iter(costs)

        def run():
            self.log.append(name)
            self.now += next(costs)
        return run


def test_synced_takes_the_median_of_interleaved_single_calls(timing):
    clock = FakeTime()
    fns = {"a": clock.function("a", [9.0, 1.0, 5.0, 2.0]), "b": clock.function("b", [9.0, 3.0, 3.0, 30.0])}
    medians = timing.time_round_robin(fns, repeats=3, warmup=1, clock=clock)
    assert medians == {"a": 2.0, "b": 3.0}  # medians of (1, 5, 2) and (3, 3, 30); the warm-up's 9 left out
    assert clock.log == ["a", "b"] * 4  # one warm-up round, then each sample times every function in turn


def test_back_to_back_divides_a_sample_by_its_calls(timing):
    clock = FakeTime()
    fns = {"a": clock.function("a", [1.0] * 9 + [4.0] * 4), "b": clock.function("b", [2.0] * 13)}
    per_call = timing.time_back_to_back(fns, repeats=3, calls=4, warmup=1, clock=clock)
    # samples of a: (1+1+1+1)/4, (1+1+1+1)/4, (4+4+4+4)/4 -> median 1; b: 2 each
    assert per_call == {"a": 1.0, "b": 2.0}
    assert clock.log == ["a", "b"] + (["a"] * 4 + ["b"] * 4) * 3


def test_the_graph_clock_times_nothing_on_the_cpu_and_says_why(timing):
    calls = []
    times, reasons = timing.time_graph_replay({"f": lambda: calls.append(1)}, repeats=2, device="cpu")
    assert times == {"f": None} and "CUDA" in reasons["f"] and not calls
    every, notes = timing.time_clocks({"f": lambda: None}, repeats=1, device="cpu", calls=2)
    assert list(every) == list(timing.CLOCKS) == ["synced", "back-to-back", "graph"]
    assert every["graph"] == {"f": None} and every["synced"]["f"] >= 0 and "CUDA" in notes["graph f"]
    assert timing.why_not_capturable(lambda: None, "cpu").startswith("CUDA graphs need a CUDA device")


def test_clocks_are_checked_and_ratios_need_both_numbers(timing):
    with pytest.raises(ValueError, match="unknown clocks.*'synced', 'back-to-back', 'graph'"):
        timing.time_clocks({"f": lambda: None}, 1, "cpu", clocks=("wall",))
    assert timing.ratio(3.0, 2.0) == 1.5 and timing.ratio(None, 2.0) is None and timing.ratio(1.0, None) is None
    assert set(timing.STEP_CLOCKS) < set(timing.CLOCKS) and "graph" not in timing.STEP_CLOCKS


def test_host_enqueue_counts_every_call(timing):
    calls = []
    seconds = timing.host_enqueue({"f": lambda: calls.append(1)}, repeats=3, device="cpu", calls=5, warmup=2)
    assert len(calls) == 2 + 3 * 5 and seconds["f"] >= 0
