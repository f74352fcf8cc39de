"""What the profiling scripts share: one call profiled by ``torch.profiler``, read into the numbers a profile needs.

:func:`profile_steps` runs a function ``steps`` times under ``torch.profiler`` (PyTorch's
profiler recipe: CPU activity, and CUDA activity on a GPU) and reads from its events:

* the top kernels by GPU time (name, launches per step, microseconds per step, share of the busy
  time) -- on the CPU, where there are no kernels, the top operators by self CPU time;
* launches per step: kernel launches the host asked for (``cudaLaunchKernel`` and its driver
  forms) and CUDA-graph launches (``cudaGraphLaunch``, one per replayed graph), and the kernels
  the device ran (a graph's kernels included);
* host time against GPU-busy share: the host's time to queue a step (until the last call
  returns, nothing waited for), the wall time of a step (the device's work done), and the GPU's
  busy time (the sum of its kernels' and copies' durations) as a share of that wall time. A
  share well under 100% with a host time near the wall time is a host-bound step (launch
  overhead); near 100%, the device's own work is what costs.

:func:`dynamo_counters` and :func:`counter_changes` read ``torch._dynamo``'s counters (frames
compiled, graphs, graph breaks with their reasons, inductor's CUDA-graph skips) before and after
calls, so that a compiled step's recompiles and graph breaks are counted, not guessed.
"""

from __future__ import annotations

import copy
import gzip
import os
import shutil
from collections import defaultdict
from typing import Callable, Dict, Optional

import torch

from moram_avalanche.utils.clock import now, synchronize

#: the host's calls that launch work on a CUDA device (runtime and driver forms), and graph replays
KERNEL_LAUNCHES = ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernelEx",
                   "cudaLaunchCooperativeKernel")
GRAPH_LAUNCHES = ("cudaGraphLaunch", "cuGraphLaunch")


def _is_device_event(event) -> bool:
    return str(getattr(event, "device_type", "")).endswith("CUDA")


def _launch_name(name: str) -> bool:
    return name in KERNEL_LAUNCHES or name.startswith(tuple(f"{launch}_" for launch in KERNEL_LAUNCHES))


def summarise(events, steps: int, host_s: float, wall_s: float, top: int = 15) -> Dict[str, object]:
    """The numbers of a profile (module docstring) from ``torch.profiler``'s ``events`` of ``steps`` steps
    that took ``host_s`` seconds to queue and ``wall_s`` seconds to run."""
    kernels = defaultdict(lambda: [0, 0.0])   # name -> [calls, microseconds]
    operators = defaultdict(lambda: [0, 0.0])
    launches = graph_launches = 0
    for event in events:
        if _is_device_event(event):
            entry = kernels[event.name]
            entry[0] += 1
            entry[1] += event.time_range.elapsed_us()
            continue
        launches += _launch_name(event.name)
        graph_launches += event.name in GRAPH_LAUNCHES
        if not event.name.startswith(("cuda", "cu")) and not event.name.startswith("ProfilerStep"):
            entry = operators[event.name]
            entry[0] += 1
            entry[1] += getattr(event, "self_cpu_time_total", 0.0)
    busy_us = sum(us for _, us in kernels.values())
    ranked = kernels if kernels else operators
    by_time = sorted(ranked.items(), key=lambda item: -item[1][1])[:top]
    total = busy_us if kernels else sum(us for _, us in operators.values())
    return {
        "steps": steps,
        "host_ms_per_step": 1e3 * host_s / steps,
        "wall_ms_per_step": 1e3 * wall_s / steps,
        "gpu_busy_ms_per_step": (busy_us / 1e3 / steps) if kernels else None,
        "gpu_busy_share": (busy_us / 1e3 / steps) / (1e3 * wall_s / steps) if kernels and wall_s > 0 else None,
        "kernel_launches_per_step": launches / steps,
        "graph_launches_per_step": graph_launches / steps,
        "kernels_per_step": sum(calls for calls, _ in kernels.values()) / steps,
        "ranked": "kernels by GPU time" if kernels else "operators by self CPU time (no GPU kernels here)",
        "top": [{"name": name, "calls_per_step": calls / steps, "us_per_step": us / steps,
                 "share": us / total if total else 0.0} for name, (calls, us) in by_time],
    }


def format_summary(label: str, numbers: Dict[str, object]) -> str:
    """The lines a profile prints for ``label``: the step's numbers, then its top kernels (or operators)."""
    busy = numbers["gpu_busy_ms_per_step"]
    lines = [f"profile {label}: wall {numbers['wall_ms_per_step']:.2f} ms/step, host {numbers['host_ms_per_step']:.2f} "
             f"ms/step to queue it, GPU busy "
             + (f"{busy:.2f} ms/step ({100 * numbers['gpu_busy_share']:.0f}% of the wall time)" if busy is not None
                else "- (no CUDA device)")
             + f"; launches/step: {numbers['kernel_launches_per_step']:.0f} kernels, "
             f"{numbers['graph_launches_per_step']:.0f} CUDA graphs; kernels run/step {numbers['kernels_per_step']:.0f}",
             f"  top {len(numbers['top'])} {numbers['ranked']}:",
             f"  {'us/step':>10s} {'share':>6s} {'calls/step':>10s}  name"]
    for row in numbers["top"]:
        lines.append(f"  {row['us_per_step']:10.1f} {100 * row['share']:5.1f}% {row['calls_per_step']:10.1f}  "
                     f"{row['name'][:110]}")
    return "\n".join(lines)


def profile_steps(fn: Callable[[], object], device, steps: int = 2, top: int = 15, table_path: Optional[str] = None,
                  trace_path: Optional[str] = None) -> Dict[str, object]:
    """Profile ``steps`` calls of ``fn`` (after one untimed call) on ``device``: :func:`summarise`'s numbers.

    ``table_path``: also write ``torch.profiler``'s own table there (every operator and kernel,
    sorted by device time on a GPU, self CPU time elsewhere); ``trace_path``: a gzipped Chrome
    trace (``.json.gz``; open it in Perfetto or chrome://tracing).
    """
    from torch.profiler import ProfilerActivity, profile

    cuda = torch.device(device).type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    fn()
    synchronize(device)
    with profile(activities=activities) as prof:
        start = now(device)
        for _ in range(steps):
            fn()
        queued = now("cpu")  # the host's clock alone: nothing waited for
        finished = now(device)
    numbers = summarise(prof.events(), steps, queued - start, finished - start, top)
    if table_path:
        sort = "self_device_time_total" if cuda else "self_cpu_time_total"
        with open(table_path, "w") as out:
            out.write(prof.key_averages().table(sort_by=sort, row_limit=60) + "\n")
    if trace_path:
        plain = trace_path[:-3] if trace_path.endswith(".gz") else trace_path
        prof.export_chrome_trace(plain)
        with open(plain, "rb") as source, gzip.open(plain + ".gz", "wb") as target:
            shutil.copyfileobj(source, target)
        os.remove(plain)
    return numbers


def dynamo_counters() -> Dict[str, Dict[str, int]]:
    """A copy of ``torch._dynamo``'s counters now (``{category: {key: count}}``)."""
    from torch._dynamo.utils import counters

    return copy.deepcopy({category: dict(values) for category, values in counters.items()})


def counter_changes(before: Dict[str, Dict[str, int]], after: Dict[str, Dict[str, int]]) -> Dict[str, object]:
    """What ``torch._dynamo`` did between two :func:`dynamo_counters`: frames compiled, graphs made,
    graph breaks (``{reason: count}``), inductor's CUDA-graph skips, and every other counter that moved."""
    moved = {}
    for category, values in after.items():
        for key, count in values.items():
            change = count - before.get(category, {}).get(key, 0)
            if change:
                moved.setdefault(category, {})[key] = change
    return {"frames_compiled": moved.get("frames", {}).get("total", 0),
            "graphs": moved.get("stats", {}).get("unique_graphs", 0),
            "graph_breaks": moved.get("graph_break", {}),
            "cudagraph_skips": {key: count for key, count in moved.get("inductor", {}).items() if "cudagraph" in key},
            "moved": moved}


__all__ = ["GRAPH_LAUNCHES", "KERNEL_LAUNCHES", "counter_changes", "dynamo_counters", "format_summary", "profile_steps",
           "summarise"]
