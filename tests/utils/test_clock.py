"""The one clock: device synchronised before each read, Stopwatch spans, warm-up, exclusions."""

from types import SimpleNamespace

import pytest
import torch

from moram_avalanche.utils import clock
from moram_avalanche.utils.clock import Stopwatch, now, synchronize


@pytest.fixture
def ticks(monkeypatch):
    """A fake perf_counter that returns the times of ``ticks.values`` in order."""
    state = SimpleNamespace(values=[])
    monkeypatch.setattr(clock, "perf_counter", lambda: state.values.pop(0))
    return state


def test_spans_after_the_warmup_are_kept_with_their_sizes(ticks):
    watch = Stopwatch(warmup=2)
    # spans 0..1, 1..3 (warm-up), 3..7, 7..12
    ticks.values = [0.0, 1.0, 1.0, 3.0, 3.0, 7.0, 7.0, 12.0]
    elapsed = []
    for size in (4, 4, 8, 2):
        watch.start("cpu")
        elapsed.append(watch.stop("cpu", size=size))
    assert elapsed == [1.0, 2.0, 4.0, 5.0]  # every span is returned ...
    assert watch.spans == 4
    assert watch.seconds == [4.0, 5.0] and watch.sizes == [8, 2]  # ... the warm-up is not kept
    assert watch.total == 9.0
    watch.reset()  # a new experience: the warm-up starts again
    ticks.values = [20.0, 21.0]
    watch.start()
    watch.stop()
    assert (watch.spans, watch.seconds, watch.total) == (1, [], 0.0)


def test_excluded_time_is_taken_off_the_span(ticks):
    watch = Stopwatch()
    ticks.values = [10.0, 16.5]
    watch.start()
    assert watch.running
    assert watch.stop(excluding=2.5) == 4.0
    assert not watch.running and watch.seconds == [4.0] and watch.sizes == [None]


def test_stop_without_start_and_negative_warmup_are_refused():
    with pytest.raises(RuntimeError, match="call start"):
        Stopwatch().stop()
    with pytest.raises(ValueError, match="warmup must be >= 0"):
        Stopwatch(warmup=-1)


def test_cuda_is_synchronised_before_the_clock_is_read(monkeypatch):
    events = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: events.append(("sync", device)))
    monkeypatch.setattr(clock, "perf_counter", lambda: events.append(("read", None)) or 5.0)
    assert now("cuda:0") == 5.0
    assert events == [("sync", "cuda:0"), ("read", None)]
    events.clear()
    assert now("cpu") == 5.0 and now(torch.device("cpu")) == 5.0
    assert events == [("read", None), ("read", None)]  # a CPU has nothing queued


def test_no_device_synchronises_cuda_only_once_this_process_uses_it(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: calls.append(device))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    synchronize()
    assert calls == []  # never made to initialise CUDA
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    synchronize()
    assert calls == [None]  # the current device
