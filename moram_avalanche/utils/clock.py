"""The one clock of the package: the device synchronised, then ``time.perf_counter``.

Every time the package or its benchmark scripts report reads this clock: the run records
(:class:`~moram_avalanche.strategies.plugins.timing.RunTime`, ``time.json``), ``moram-avalanche
cost`` and ``scripts/bench_*.py``. GPU kernels run asynchronously, so a plain clock read would
count the time to queue work, not to do it; :func:`now` first waits for the device.

:class:`Stopwatch` times spans of one kind (training calls, training iterations, ...): each span
is started and stopped by hand, the first ``warmup`` spans are left out (kernels compiled,
caches filled), the others kept with an optional size (images in the batch).

Framework-free: torch is imported when a device is synchronised, not when this module is.
"""

from __future__ import annotations

from time import perf_counter
from typing import List, Optional


def synchronize(device=None) -> None:
    """Wait for the work queued on ``device``, so that a clock read after it counts that work.

    Only CUDA queues work; any other device returns at once. ``device=None`` means the current
    CUDA device, if this process has initialised CUDA (a process that never did has nothing
    queued, and is not made to initialise it).
    """
    import torch

    if device is None:
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            torch.cuda.synchronize()
    elif torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def now(device=None) -> float:
    """Seconds of ``time.perf_counter`` once ``device``'s queued work is done (:func:`synchronize`)."""
    synchronize(device)
    return perf_counter()


class Stopwatch:
    """Wall-clock spans of one kind, each read with :func:`now`.

    :meth:`start` then :meth:`stop` time one span. The first ``warmup`` spans after
    construction (or :meth:`reset`) are counted in :attr:`spans` but not kept; every later one
    is appended to :attr:`seconds`, with the size given to :meth:`stop` (e.g. the batch's
    images) in :attr:`sizes`. :attr:`total` is the sum of the kept spans.

    Args:
        warmup: spans left out at the start (>= 0).
    """

    def __init__(self, warmup: int = 0) -> None:
        if int(warmup) < 0:
            raise ValueError(f"warmup must be >= 0 spans, got {warmup}")
        self.warmup = int(warmup)
        self.reset()

    def reset(self) -> None:
        """Forget every span (the warm-up starts again)."""
        self.spans = 0
        self.seconds: List[float] = []
        self.sizes: List[Optional[int]] = []
        self._started: Optional[float] = None

    @property
    def running(self) -> bool:
        """Whether a span was started and not yet stopped."""
        return self._started is not None

    @property
    def total(self) -> float:
        """Seconds of the kept spans, summed in order."""
        return sum(self.seconds, 0.0)

    def start(self, device=None) -> None:
        """Begin a span (``device``: whose queued work is waited for first)."""
        self._started = now(device)

    def stop(self, device=None, *, size: Optional[int] = None, excluding: float = 0.0) -> float:
        """End the running span and return its seconds, less ``excluding`` (time spent inside
        it that belongs elsewhere, e.g. an evaluation run during training). The span is kept
        (with ``size``) once the warm-up is over."""
        if self._started is None:
            raise RuntimeError("Stopwatch.stop() without a running span: call start() first")
        elapsed = now(device) - self._started - excluding
        self._started = None
        self.spans += 1
        if self.spans > self.warmup:
            self.seconds.append(elapsed)
            self.sizes.append(size)
        return elapsed


__all__ = ["Stopwatch", "now", "synchronize"]
