"""What the benchmark scripts share: their timing options and the clocks, each read round-robin.

The scripts run as ``python scripts/bench_*.py``, so this folder is on ``sys.path`` and they
``import bench_timing``. Ratios are taken in one process, round-robin, so that the machine's
drift hits every timed function alike (the project's rule for speed figures): each sample times
every function once, in turn, and a function's figure is the median of its samples. Every time
is read with the package's one clock, :func:`moram_avalanche.utils.clock.now` (queued CUDA work
waited for, then ``time.perf_counter``).

Three clocks (:data:`CLOCKS`), because a GPU call costs the host and the device differently:

* ``synced``       -- one call between two waits for the device (:func:`time_round_robin`): what a
  call costs when nothing overlaps it, the host's time to queue its kernels included;
* ``back-to-back`` -- ``calls`` calls queued without waiting, then one wait
  (:func:`time_back_to_back`): as a model calls its layers, the host running ahead of the device
  (the time per call is the device's, unless the host is the slower);
* ``graph``        -- ``calls`` calls captured once in a CUDA graph and replayed
  (:func:`time_graph_replay`): the device's time alone, what a compiled, graph-replayed step pays
  (PyTorch's "CUDA Graphs" notes, ``torch.cuda.graph``). CUDA only; a function that makes the host
  wait (``torch.cuda.set_sync_debug_mode``) or that fails to capture is reported, not timed.

:func:`host_enqueue` gives the fourth number a profile needs: the host's time to queue one call.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
from typing import Callable, Dict, Optional, Tuple

import torch

from moram_avalanche.utils.clock import now, synchronize


def add_timing_options(parser: argparse.ArgumentParser, repeats: int = 3, device: bool = True) -> None:
    """``--threads N`` (torch's CPU threads; default: torch's), ``--repeats``, and ``--device``."""
    parser.add_argument("--repeats", type=int, default=repeats, help=f"timings per median (default: {repeats})")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (default: torch's)")
    if device:
        parser.add_argument("--device", default="cpu", help="cpu or cuda (default: cpu)")


def apply_threads(args: argparse.Namespace) -> None:
    """Set torch's CPU threads when ``--threads`` was given."""
    if args.threads:
        torch.set_num_threads(args.threads)


def autocast_to(device, dtype=None):
    """What a timed call computes in: autocast to ``dtype`` (a torch dtype or its name) on ``device``'s
    type, or nothing for float32 (or None)."""
    dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    if dtype is None or dtype == torch.float32:
        return contextlib.nullcontext()
    return torch.autocast(torch.device(device).type, dtype=dtype)


def _round_robin(fns: Dict[str, Callable], repeats: int, sample: Callable[[Callable], float]) -> Dict[str, float]:
    """The median of ``repeats`` samples per function, one sample of each in turn per round."""
    samples = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            samples[name].append(sample(fn))
    return {name: statistics.median(values) for name, values in samples.items()}


def _warm(fns: Dict[str, Callable], warmup: int) -> None:
    for _ in range(warmup):
        for fn in fns.values():
            fn()


def time_round_robin(fns: dict, repeats: int, warmup: int = 1, clock: Callable[[], float] = now) -> dict:
    """``synced``: median seconds per call of each function, one call between two waits for the device.

    Each function is first called ``warmup`` times, untimed (caches filled, kernels chosen).
    """
    _warm(fns, warmup)

    def sample(fn):
        start = clock()
        fn()
        return clock() - start
    return _round_robin(fns, repeats, sample)


def time_back_to_back(fns: Dict[str, Callable], repeats: int, calls: int = 10, warmup: int = 1,
                      clock: Callable[[], float] = now) -> Dict[str, float]:
    """``back-to-back``: median seconds per call of each function, ``calls`` calls queued between two waits."""
    _warm(fns, warmup)

    def sample(fn):
        start = clock()
        for _ in range(calls):
            fn()
        return (clock() - start) / calls
    return _round_robin(fns, repeats, sample)


def why_not_capturable(fn: Callable, device) -> Optional[str]:
    """Why ``fn`` cannot be captured in a CUDA graph on ``device`` (it runs on another device, or it
    makes the host wait: one call under ``set_sync_debug_mode("error")``), or None."""
    if torch.device(device).type != "cuda":
        return f"CUDA graphs need a CUDA device, not {torch.device(device).type}"
    synchronize(device)
    torch.cuda.set_sync_debug_mode("error")
    try:
        fn()
    except RuntimeError as error:
        return f"it makes the host wait ({str(error).splitlines()[0][:100]})"
    finally:
        torch.cuda.set_sync_debug_mode(0)
    return None


def capture(fn: Callable, calls: int, warmup: int = 3) -> "torch.cuda.CUDAGraph":
    """A CUDA graph of ``calls`` calls of ``fn``, warmed up on a side stream first (as PyTorch's
    notes on CUDA graphs ask, so that autograd and the allocator settle before the capture)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    return graph


def time_graph_replay(fns: Dict[str, Callable], repeats: int, device, calls: int = 10, warmup: int = 3,
                      clock: Callable[[], float] = now) -> Tuple[Dict[str, Optional[float]], Dict[str, str]]:
    """``graph``: ``({name: median seconds per call, or None}, {name: why it was not timed})``.

    Every function is captured (:func:`capture`) before any is replayed; the replays are then
    round-robin, each sample one replay of ``calls`` calls between two waits.
    """
    graphs, reasons = {}, {}
    for name, fn in fns.items():
        reason = why_not_capturable(fn, device)
        if reason is None:
            try:
                graphs[name] = capture(fn, calls, warmup)
            except Exception as error:  # a capture that fails is reported, and the others go on
                reason = f"capture failed: {type(error).__name__}: {str(error).splitlines()[0][:100]}"
                synchronize(device)
        if reason is not None:
            reasons[name] = reason
    times = {name: None for name in fns}
    replays = {name: graph.replay for name, graph in graphs.items()}
    times.update({name: seconds / calls for name, seconds in time_round_robin(replays, repeats, 1, clock).items()})
    return times, reasons


def _synced(fns, repeats, device, calls, warmup):
    return time_round_robin(fns, repeats, warmup), {}


def _back_to_back(fns, repeats, device, calls, warmup):
    return time_back_to_back(fns, repeats, calls, warmup), {}


def _graph(fns, repeats, device, calls, warmup):
    return time_graph_replay(fns, repeats, device, calls, max(warmup, 1))


#: the clocks (module docstring), in the order tables print them: name -> ``(fns, repeats, device,
#: calls, warmup) -> ({name: seconds per call or None}, {name: why not timed})``
CLOCKS: Dict[str, Callable] = {"synced": _synced, "back-to-back": _back_to_back, "graph": _graph}
#: the clocks of a whole training step with its optimizer: not captured in a graph (AdamW keeps its
#: step counts on the host unless built ``capturable=True``, which the loops do not use)
STEP_CLOCKS = ("synced", "back-to-back")


def time_clocks(fns: Dict[str, Callable], repeats: int, device, clocks=tuple(CLOCKS), calls: int = 10,
                warmup: int = 1) -> Tuple[Dict[str, Dict[str, Optional[float]]], Dict[str, str]]:
    """``({clock: {name: seconds per call or None}}, {"clock name": why not timed})`` for each of ``clocks``."""
    unknown = [clock for clock in clocks if clock not in CLOCKS]
    if unknown:
        raise ValueError(f"unknown clocks {unknown}: expected some of {tuple(CLOCKS)}")
    times, notes = {}, {}
    for clock in clocks:
        times[clock], reasons = CLOCKS[clock](fns, repeats, device, calls, warmup)
        notes.update({f"{clock} {name}": reason for name, reason in reasons.items()})
    return times, notes


def host_enqueue(fns: Dict[str, Callable], repeats: int, device, calls: int = 10, warmup: int = 1
                 ) -> Dict[str, float]:
    """Median seconds the host takes to queue one call of each function (the device waited for
    before each sample and after it, outside the timing)."""
    _warm(fns, warmup)

    def sample(fn):
        start = now(device)
        for _ in range(calls):
            fn()
        queued = now("cpu")  # the host's clock alone: nothing waited for
        synchronize(device)
        return (queued - start) / calls
    return _round_robin(fns, repeats, sample)


def ratio(numerator: Optional[float], denominator: Optional[float]) -> Optional[float]:
    """``numerator / denominator``, or None when either was not measured."""
    if numerator is None or denominator is None or denominator <= 0:
        return None
    return numerator / denominator


__all__ = ["CLOCKS", "STEP_CLOCKS", "add_timing_options", "apply_threads", "autocast_to", "capture", "host_enqueue", "ratio", "time_back_to_back",
           "time_clocks", "time_graph_replay", "time_round_robin", "why_not_capturable"]
