"""Every speed and memory goal of the GPU path in one table, measured in this one process.

What the project's issue "MoRAM fast on the GPU" asks, row by row, each against its goal (ratios
are medians of round-robin timings taken here, the clock waiting for queued CUDA work):

* the ViT-B/16 image tower (batch 64, 10 tasks of 16 atoms on its 72 linears): eval against
  plain CLIP in float32 and under bfloat16 autocast (<= 1.20x), one training step against a
  rank-16 LoRA (<= 1.15x) (``bench_tower``);
* one block's six linears at 160 atoms, 64 x 197 tokens: eval against ``nn.Linear`` (<= 1.35x
  float32, <= 2.0x bfloat16), and the official release's way timed beside ours, eval and train,
  float32 and bfloat16 (ours >= 1.2x faster in every cell) (``bench_block``);
* LLaMA-3.2-1B- and T5-base-sized models (bfloat16, batch 8, 128 + 16 tokens; 15 and 4 tasks):
  the training step against a rank-8 LoRA (<= 1.15x) and greedy generation of 16 tokens against
  the base model (<= 1.20x) (``bench_text``); with ``--compiled``, last, LLaMA's generation
  also with a static KV cache and the decode step compiled into CUDA graphs by ``transformers``;
* LLaMA-1B at the paper's TRACE setting: peak memory of a training step, MoRAM after 8 tasks
  against LoRA, without and with gradient checkpointing (no worse than 1.066x / 1.005x, the
  figures before the GPU path) (``bench_memory_text``);
* host synchronisations in one forward and backward of a MoRAM layer on the library's CUDA path
  (``torch.cuda.set_sync_debug_mode("error")``): none.

A section that fails prints its error in its row and the next section runs; ``--budget`` seconds
bound the whole run (a section that would start after it is listed as not measured). Exit status
1 when a goal is missed or a section failed.

    python scripts/gpu_table.py [--budget 330] [--out gpu_table.json] [--compiled] [--quick]

``--quick`` (a CPU check of the script: tiny sizes, every figure meaningless) runs on the CPU.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from typing import Callable, List, Optional

import torch

ROWS: List[dict] = []


def row(name: str, value: Optional[float], goal: Optional[float] = None, sense: str = "<=", note: str = "") -> None:
    """One line of the table: ``value`` against ``goal`` (``sense``: ``<=``, ``>=``, ``==``)."""
    met = None
    if value is not None and goal is not None:
        met = {"<=": value <= goal, ">=": value >= goal, "==": value == goal}[sense]
    ROWS.append({"row": name, "value": value, "goal": goal, "sense": sense, "met": met, "note": note})
    print(format_row(ROWS[-1]), flush=True)


def format_row(r: dict) -> str:
    value = "-" if r["value"] is None else (f"{r['value']:.3f}x" if isinstance(r["value"], float) else str(r["value"]))
    goal = "" if r["goal"] is None else f"{r['sense']} {r['goal']:g}"
    verdict = {True: "ok", False: "MISSED", None: ""}[r["met"]]
    return f"{r['row'][:100]:100s} {value:>9s} {goal:>9s} {verdict:>6s}  {r['note']}"


def section(name: str, run: Callable[[argparse.Namespace], None], args, started: float) -> None:
    if time.monotonic() - started > args.budget:
        row(f"{name}: not measured", None, note=f"the {args.budget:g} s budget was spent before it started")
        return
    print(f"== {name} ({time.monotonic() - started:.0f} s)", flush=True)
    try:
        run(args)
    except Exception as error:  # report in the table and go on
        traceback.print_exc()
        row(f"{name}: FAILED", None, note=f"{type(error).__name__}: {str(error).splitlines()[0][:160]}")
        ROWS[-1]["met"] = False
    finally:
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


# ---------------------------------------------------------------- sections
def tower(args) -> None:
    import bench_tower
    from bench_timing import time_round_robin

    batch = 2 if args.quick else 64
    towers = {name: model.to(args.device) for name, model in bench_tower.build_towers(10).items()}
    images = torch.randn(batch, 3, 224, 224, device=args.device)
    for dtype_name, dtype in (("float32", None), ("bfloat16", torch.bfloat16)):
        for model in towers.values():
            model.eval()
        t = time_round_robin({name: bench_tower.eval_call(towers[name], images, dtype) for name in ("plain", "moram")},
                             args.repeats)
        row(f"ViT-B/16 tower, batch {batch}, 10 tasks x 16 atoms, eval {dtype_name}: MoRAM / plain CLIP",
            t["moram"] / t["plain"], 1.20, note=f"ms {1e3 * t['plain']:.1f} / {1e3 * t['moram']:.1f}")
        t = time_round_robin({name: bench_tower.train_call(towers[name], images, dtype) for name in ("lora", "moram")},
                             args.repeats)
        row(f"  same, one training step {dtype_name}: MoRAM / rank-16 LoRA", t["moram"] / t["lora"], 1.15,
            note=f"ms {1e3 * t['lora']:.1f} / {1e3 * t['moram']:.1f}")


def block(args) -> None:
    import bench_block

    batch = 1 if args.quick else 64
    totals = bench_block.measure(torch.device(args.device), batch, 160, args.repeats)
    for dtype in ("float32", "bfloat16"):
        cell = totals[("eval", dtype)]
        row(f"one block's 6 linears, 160 atoms, {batch} x 197 tokens, eval {dtype}: MoRAM / nn.Linear",
            cell["moram"] / cell["linear"], bench_block.GOALS[("eval", dtype)],
            note=f"ms {1e3 * cell['linear']:.2f} / {1e3 * cell['moram']:.2f}")
    for mode in ("eval", "train"):
        for dtype in ("float32", "bfloat16"):
            cell = totals[(mode, dtype)]
            error = totals[("error", dtype)]
            row(f"  official release's way / ours, {mode} {dtype}", cell["release"] / cell["moram"],
                bench_block.RELEASE_GOAL, ">=", note=f"ms {1e3 * cell['release']:.2f} / {1e3 * cell['moram']:.2f}; "
                f"rel. err vs fp32: ours {error['moram']:.1e}, release {error['release']:.1e}")


def text(model_name: str, tasks: int, args) -> None:
    import bench_text

    layers = 2 if args.quick else None
    batch, source, target, new = (2, 16, 4, 4) if args.quick else (8, 128, 16, 16)
    dtype = torch.float32 if args.quick else torch.bfloat16
    models = bench_text.build_models(model_name, layers, torch.device(args.device), dtype)
    inputs = bench_text.make_inputs(models["base"].config, batch, source, target, args.device)
    result = bench_text.measure(models, inputs, tasks, new, batch, args.repeats, 1)
    label = f"{model_name}-sized, {str(dtype)[6:]}, batch {batch}, {source} + {target} tokens, {tasks} tasks"
    row(f"{label}: train step MoRAM / rank-8 LoRA", result["train_moram_over_lora"], bench_text.TRAIN_GOAL,
        note=f"ms {1e3 * result['train_s']['lora']:.1f} / {1e3 * result['train_s']['moram']:.1f}")
    row(f"  same, greedy generation of {new} tokens (eager): MoRAM / base", result["generate_moram_over_base"],
        bench_text.GENERATION_GOAL, note=f"LoRA / base {result['generate_lora_over_base']:.3f}x")


def compiled_generation(model_name: str, tasks: int, args) -> None:
    """Generation with a static KV cache, which ``transformers`` compiles into CUDA graphs on a GPU."""
    import bench_text
    from bench_timing import time_round_robin

    layers = 2 if args.quick else None
    batch, source, new = (2, 16, 4) if args.quick else (8, 128, 16)
    dtype = torch.float32 if args.quick else torch.bfloat16
    base = bench_text.build_base(model_name, bench_text.model_config(model_name, layers), torch.device(args.device),
                                 dtype)
    models = {"base": base, "moram": bench_text.with_moram(base)}
    bench_text.grow(models["moram"], tasks)
    prompt = bench_text.make_inputs(base.config, batch, source, 4, args.device)["prompt"]
    pad = base.config.pad_token_id if base.config.pad_token_id is not None else base.config.eos_token_id
    calls = {name: bench_text.generate_call(model, prompt, new, pad, static_cache=True) for name, model in models.items()}
    t = time_round_robin(calls, args.repeats, warmup=2)  # the first calls compile and capture
    row(f"{model_name}-sized, {tasks} tasks, generation of {new} tokens, static cache, decode step compiled "
        "(CUDA graphs): MoRAM / base", t["moram"] / t["base"], bench_text.GENERATION_GOAL,
        note=f"ms {1e3 * t['base']:.1f} / {1e3 * t['moram']:.1f}")


def memory(args) -> None:
    import bench_memory_text

    argv = ["--model", "llama-1b", "--device", args.device]
    if args.quick:
        argv += ["--layers", "1", "--seq-len", "32", "--batch", "1"]
    rows = bench_memory_text.main(argv)
    peak = {(r["variant"], r["gradient_checkpointing"]): r["peak"] for r in rows}
    for checkpointing, before in ((False, 1.066), (True, 1.005)):
        ratio = peak[("moram task 8", checkpointing)] / peak[("lora", checkpointing)]
        row(f"LLaMA-1B, TRACE setting, peak memory MoRAM task 8 / LoRA, "
            f"{'with' if checkpointing else 'no'} checkpointing", ratio, before,
            note=f"MiB {peak[('lora', checkpointing)] / 2**20:.0f} / {peak[('moram task 8', checkpointing)] / 2**20:.0f}")


def syncs(args) -> None:
    from torch import nn

    from moram_avalanche.layers.moram.layer import MoRAMLinear
    from moram_avalanche.layers.moram.paths.choice import path_name

    torch.manual_seed(0)
    layer = MoRAMLinear(nn.Linear(768, 768), atoms_per_task=16, topk=16, temperature=0.01, threshold=0.2)
    for _ in range(10):
        layer.expand()
    layer = layer.to(args.device)
    x = torch.randn(4, 197, 768, device=args.device)
    path = path_name(x, layer.num_atoms, 16, gated=True)
    failures = []
    for training in (False, True):
        for dtype in (None, torch.bfloat16):
            layer.train(training)
            inp = x.clone().requires_grad_(training)
            if args.device == "cuda":
                torch.cuda.synchronize()
                torch.cuda.set_sync_debug_mode("error")
            try:
                with torch.autocast(x.device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
                    out = layer(inp)
                if training:
                    out.float().square().mean().backward()
            except RuntimeError as error:
                failures.append(f"{'train' if training else 'eval'} {dtype}: {str(error).splitlines()[0][:80]}")
            finally:
                if args.device == "cuda":
                    torch.cuda.set_sync_debug_mode(0)
    row(f"host synchronisations in a MoRAM layer's forward + backward (path {path}, eval/train, fp32/bf16)",
        len(failures), 0, "==", note="; ".join(failures) or "torch.cuda.set_sync_debug_mode('error') raised nothing")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=330.0, help="seconds for the whole table (default 330)")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--compiled", action="store_true",
                        help="also time generation with a static cache and a compiled decode step")
    parser.add_argument("--quick", action="store_true", help="tiny sizes on the CPU: checks the script only")
    parser.add_argument("--out", default=None, help="also write the rows to this JSON file")
    args = parser.parse_args(argv)
    args.device = "cpu" if args.quick else "cuda"
    if args.quick:
        args.repeats = 1
    elif not torch.cuda.is_available():
        print("no CUDA device: nothing to measure (--quick checks the script on the CPU)", file=sys.stderr)
        return 2
    started = time.monotonic()
    where = torch.cuda.get_device_name() if args.device == "cuda" else "CPU (--quick: sizes shrunk, not a measurement)"
    print(f"device {where}; torch {torch.__version__}, CUDA {torch.version.cuda}; median of {args.repeats}")
    section("host synchronisations", syncs, args, started)
    section("one block's six linears", block, args, started)
    section("ViT-B/16 image tower", tower, args, started)
    section("memory at the TRACE setting", memory, args, started)
    section("LLaMA-1B-sized", lambda a: text("llama-1b", 15, a), args, started)
    section("T5-base-sized", lambda a: text("t5-base", 4, a), args, started)
    if args.compiled:  # last: compiling takes the longest
        section("LLaMA-1B-sized, compiled generation", lambda a: compiled_generation("llama-1b", 15, a), args, started)
    print(f"\n{'row':100s} {'measured':>9s} {'goal':>9s} {'':>6s}  note")
    for r in ROWS:
        print(format_row(r))
    if args.out:
        from moram_avalanche.utils.files import atomic_write_text

        atomic_write_text(args.out, json.dumps({"device": where, "torch": torch.__version__, "cuda": torch.version.cuda,
                                                "rows": ROWS}, indent=2) + "\n")
    return 1 if any(r["met"] is False for r in ROWS) else 0


if __name__ == "__main__":
    sys.exit(main())
