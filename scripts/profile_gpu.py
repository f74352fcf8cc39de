"""The GPU path's profile: where a bf16 tower's eval time goes, each piece of a layer call, each option's saving.

What the project's issue "GPU path II" (item 6) asks the GPU check to capture, in one process,
each section bounded by ``--budget`` (seconds for the whole run; a section that would start after
it is listed as not run):

1. ``tower``   -- the ViT-B/16 image tower, batch 64, 10 tasks of 16 atoms on its 72 linears, eval
   on a frozen bank under bfloat16 autocast (then float32, if time is left): plain CLIP, the split
   attention alone and MoRAM, each under ``torch.profiler`` (``bench_profile``): the top kernels by
   GPU time, kernel launches per step, the host's time to queue a step against the GPU's busy
   share of its wall time; every table written beside the summary, and MoRAM's bf16 Chrome trace.
2. ``pieces``  -- each piece of a layer call (``bench_pieces``: input and weight casts, the bank's
   rows, base GEMM, ``p = A x``, each router's steps 2-5 and their backward, the read-out, the
   whole layer on each path, a training step), per shape and dtype -- the tower's three linears at
   64 x 197 tokens in bf16 and fp32, LLaMA-1B's q and k projections at one decode step of 8
   sequences in bf16 -- timed by every clock (replayed from a CUDA graph: the GPU's time alone;
   back to back; one synchronised call) and the host's time to queue it, in microseconds.
3. ``options`` -- each option's micro-benchmark and whether this version has it (``bench_options``:
   (a) [W; A] in one GEMM, (b) q, k, v in one GEMM, (c) the read-out folded into the base GEMM,
   (f) a CUDA graph's replay against eager calls, (g) the bank joined once; and every switch the
   layer exposes beyond its four routing numbers), on the tower's shapes in bf16 and fp32.

The compiled decode step's profile (kernels per generated token, graph breaks, recompiles) is
taken where it is compiled anyway, in ``gpu_table.py --compiled --profile-dir``.

Everything printed is also written to ``OUT/profile.txt``, the numbers to ``OUT/profile.json``.

    python scripts/profile_gpu.py --out OUT [--budget 60] [--sections tower pieces options]
    python scripts/profile_gpu.py --quick [--out OUT]      (the CPU, tiny sizes: checks the script only)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
import traceback
from typing import Callable, Dict, List

import torch

LINES: List[str] = []


def say(*parts) -> None:
    line = " ".join(str(part) for part in parts)
    LINES.append(line)
    print(line, flush=True)


def microseconds(value) -> str:
    return "-" if value is None else f"{1e6 * value:.1f}"


def out_path(args, name: str):
    """``OUT/name``, or None without ``--out``."""
    return os.path.join(args.out, name) if args.out else None


# ---------------------------------------------------------------- 1. tower
def tower(args, started: float) -> dict:
    import bench_profile
    import bench_tower

    batch = 2 if args.quick else 64
    model = bench_tower.QUICK_MODEL if args.quick else bench_tower.MODEL
    towers = {name: net.to(args.device).eval() for name, net in bench_tower.build_towers(10, model).items()
              if name in ("plain", "split", "moram")}
    images = bench_tower.images_for(towers["plain"], batch, args.device)
    say(f"\n== 1. {model} tower, batch {batch}, 10 tasks x 16 atoms, eval on the frozen bank, under torch.profiler")
    result = {}
    for dtype_name, dtype in (("bfloat16", torch.bfloat16), ("float32", None)):
        if dtype is None and time.monotonic() - started > args.budget * 0.4:
            say("  float32: not profiled (budget: bf16 first)")
            break
        for name, net in towers.items():
            call = bench_tower.eval_call(net, images, dtype)
            trace = out_path(args, f"trace_tower_{name}_{dtype_name}.json.gz") if (
                name == "moram" and dtype_name == "bfloat16") else None
            numbers = bench_profile.profile_steps(call, args.device, steps=2,
                                                  table_path=out_path(args, f"profile_tower_{name}_{dtype_name}.txt"),
                                                  trace_path=trace)
            result[f"{dtype_name} {name}"] = numbers
            say(bench_profile.format_summary(f"tower eval {dtype_name}, {name}", numbers))
    return result


# ---------------------------------------------------------------- 2. pieces
def cases(args):
    import bench_pieces

    return bench_pieces.QUICK_CASES if args.quick else bench_pieces.TOWER_CASES + bench_pieces.DECODE_CASES


def pieces(args, started: float) -> dict:
    import bench_pieces

    say("\n== 2. each piece of a layer call; us per call: graph = replayed from a CUDA graph (the GPU's time "
        "alone), back-to-back = queued without waiting, synced = one call between waits, host = to queue one")
    result = {}
    for case in cases(args):
        if time.monotonic() - started > args.budget:
            say(f"  {case.label} {case.dtype}: not run (budget)")
            continue
        ctx = bench_pieces.context(case, args.device)
        timed = bench_pieces.time_pieces(ctx, args.repeats, args.calls)
        try:
            agree = f"{bench_pieces.reproduces_the_layer(ctx):.1e}"
        except Exception as error:  # the pieces of a changed library: say so, keep the timings
            agree = f"not checked ({type(error).__name__}: {str(error).splitlines()[0][:60]})"
        say(f"\n  {case.label}, {case.dtype}, {case.tokens} tokens, {case.atoms} atoms, k {case.topk} "
            f"(pieces vs the layer's output: max |diff| {agree})")
        say(f"  {'piece':62s} {'graph':>9s} {'b2b':>9s} {'synced':>9s} {'host':>9s}")
        for name, numbers in timed.items():
            if "synced" not in numbers:
                say(f"  {name[:62]:62s} {numbers['why'][:100]}")
                continue
            say(f"  {name[:62]:62s} {microseconds(numbers['graph']):>9s} {microseconds(numbers['back-to-back']):>9s} "
                f"{microseconds(numbers['synced']):>9s} {microseconds(numbers['host']):>9s}")
        reasons = sorted({numbers["why"] for numbers in timed.values() if "synced" in numbers and "why" in numbers})
        for why in reasons:
            say(f"  (not timed by a clock: {why})")
        result[f"{case.label} {case.dtype}"] = {"case": dataclasses.asdict(case),
                                                "agreement": agree, "pieces": timed}
        del ctx
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    return result


# ---------------------------------------------------------------- 3. options
def options(args, started: float) -> dict:
    import bench_options
    import bench_pieces

    say("\n== 3. each option's micro-benchmark: option / today per clock (below 1: the option saves), and "
        "whether this version has it")
    tower_cases = bench_pieces.QUICK_CASES if args.quick else bench_pieces.TOWER_CASES
    result = {}
    for case in tower_cases:
        if time.monotonic() - started > args.budget:
            say(f"  {case.label} {case.dtype}: not run (budget)")
            continue
        ctx = bench_pieces.context(case, args.device)
        measured = bench_options.measure(ctx, args.repeats, args.calls)
        say(f"\n  {case.label}, {case.dtype}:")
        for key, numbers in measured.items():
            ratios = numbers.get("ratios", {})
            shown = ", ".join(f"{label} {value:.2f}x" if value is not None else f"{label} -"
                              for label, value in ratios.items())
            say(f"  ({key}) {numbers['title'][:64]:64s} {shown}")
            say(f"      {numbers['probe']}" + (f"; {numbers['why']}" if "why" in numbers else ""))
        result[f"{case.label} {case.dtype}"] = measured
    return result


#: the sections, in order (module docstring)
SECTIONS: Dict[str, Callable] = {"tower": tower, "pieces": pieces, "options": options}


def versions() -> str:
    """torch, CUDA, Triton and the device, as one line."""
    try:
        import triton
        triton_version = triton.__version__
    except ImportError:
        triton_version = "not installed"
    where = torch.cuda.get_device_name() if torch.cuda.is_available() else "no CUDA device"
    return f"torch {torch.__version__}, CUDA {torch.version.cuda}, Triton {triton_version}; {where}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="folder for profile.txt, profile.json and the profiler's tables")
    parser.add_argument("--budget", type=float, default=60.0, help="seconds for the whole profile (default 60)")
    parser.add_argument("--sections", nargs="+", default=list(SECTIONS), choices=list(SECTIONS))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--calls", type=int, default=20, help="calls per back-to-back or graph sample (default 20)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes on the CPU: checks the script only")
    args = parser.parse_args(argv)
    args.device = "cpu" if args.quick else "cuda"
    if args.quick:
        args.repeats, args.calls = 1, 2
    elif not torch.cuda.is_available():
        print("no CUDA device: nothing to profile (--quick checks the script on the CPU)", file=sys.stderr)
        return 2
    if args.out:
        os.makedirs(args.out, exist_ok=True)
    LINES.clear()
    started = time.monotonic()
    say(f"{versions()}; sections {', '.join(args.sections)}; budget {args.budget:g} s"
        + ("; --quick: tiny sizes on the CPU, every figure meaningless" if args.quick else ""))
    data, failed = {"versions": versions()}, []
    for name in args.sections:
        if time.monotonic() - started > args.budget:
            say(f"\n== {name}: not run (the {args.budget:g} s budget was spent)")
            continue
        try:
            data[name] = SECTIONS[name](args, started)
        except KeyboardInterrupt:  # the step's time limit (SIGINT): keep what was measured
            failed.append(name)
            say(f"\n== {name}: interrupted (SIGINT: the step's time limit) at {time.monotonic() - started:.0f} s")
            break
        except Exception:  # report and go on with the next section
            failed.append(name)
            say(f"\n== {name}: FAILED\n{traceback.format_exc()[-1500:]}")
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        say(f"   ({name} done at {time.monotonic() - started:.0f} s)")
    if args.out:
        from moram_avalanche.utils.files import atomic_write_text

        atomic_write_text(os.path.join(args.out, "profile.txt"), "\n".join(LINES) + "\n")
        atomic_write_text(os.path.join(args.out, "profile.json"), json.dumps(data, indent=1, default=str) + "\n")
    return 1 if failed else 0


__all__ = ["LINES", "SECTIONS", "cases", "main", "microseconds", "options", "out_path", "pieces", "say", "tower", "versions"]


if __name__ == "__main__":
    sys.exit(main())
