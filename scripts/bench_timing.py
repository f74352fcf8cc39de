"""What the benchmark scripts share: their timing options and the round-robin clock.

The scripts run as ``python scripts/bench_*.py``, so this folder is on ``sys.path`` and they
``import bench_timing``. Ratios are taken in one process, round-robin, so that the machine's
drift hits every timed function alike (the project's rule for speed figures). Every time is read
with the package's one clock, :func:`moram_avalanche.utils.clock.now` (queued CUDA work waited
for, then ``time.perf_counter``).
"""

from __future__ import annotations

import argparse
import statistics

import torch

from moram_avalanche.utils.clock import now


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


def time_round_robin(fns: dict, repeats: int, warmup: int = 1) -> dict:
    """Median seconds per call of each function, timed round-robin so drift hits all alike.

    Each function is first called ``warmup`` times, untimed (caches filled, kernels chosen).
    """
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    samples = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = now()
            fn()
            samples[name].append(now() - start)
    return {name: statistics.median(values) for name, values in samples.items()}
