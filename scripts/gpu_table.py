"""Every speed and memory goal of the GPU path in one table, measured in this one process.

What the project's issue "GPU path II" asks, row by row, each measured ratio beside its goal with
its verdict. Ratios are medians of round-robin timings taken here (the house rule), by the clocks
of ``bench_timing``: ``synced`` (one call between two waits for the device), ``back-to-back``
(calls queued as a model queues them) and ``graph`` (replayed from a CUDA graph: the device's time
alone); a row shows each clock it was timed by, and a goal holds only where every clock meets it.

* host synchronisations in one forward and backward of a MoRAM layer on the library's CUDA path
  (``torch.cuda.set_sync_debug_mode("error")``): none;
* one block's six linears at 160 atoms, 64 x 197 tokens, by all three clocks: eval on a frozen
  bank against ``nn.Linear`` (<= 1.35x float32, <= 1.60x bfloat16), and the official release's
  way timed beside ours, eval and train, float32 and bfloat16 (ours >= 1.2x faster in every
  cell) (``bench_block``);
* the ViT-B/16 image tower (batch 64, 10 tasks of 16 atoms on its 72 linears): eval on a frozen
  bank against plain CLIP in float32 (<= 1.35x) and under bfloat16 autocast (<= 1.45x), by all
  three clocks, with the split attention alone against plain CLIP beside it (the floor the atoms
  ride on); one training step against a rank-16 LoRA (<= 1.20x, synced and back-to-back)
  (``bench_tower``);
* LLaMA-1B at the paper's TRACE setting: peak memory of a training step, MoRAM after 8 tasks
  against a LoRA on the same targets, without and with gradient checkpointing (<= 1.07x)
  (``bench_memory_text``);
* LLaMA-3.2-1B- and T5-base-sized models (bfloat16, batch 8, 128 + 16 tokens; 15 and 4 tasks):
  the training step against a rank-8 LoRA with the same dropout (<= 1.10x) and greedy generation
  of 16 tokens on a frozen bank against the base model (<= 1.15x) (``bench_text``);
* with ``--compiled``, last: LLaMA's generation with a static KV cache, the decode step compiled
  by ``transformers`` (``torch.compile``, CUDA graphs) against the base model compiled alike
  (<= 1.15x), and the compiled decode step's profile: kernels and launches per generated token,
  graph breaks and recompiles after warm-up (MoRAM no more than the base model), each model's
  ``torch.profiler`` table written to ``--profile-dir``.

A section that fails prints its error in its row and the next section runs; ``--budget`` seconds
bound the whole run (a section that would start after it is listed as not measured; SIGINT, the
GPU check's time limit, ends the run with the rows measured so far). Exit status 1 when a goal is
missed or a section failed (``--quick``: when a section failed).

    python scripts/gpu_table.py [--budget 330] [--out gpu_table.json] [--compiled] [--profile-dir DIR]
    python scripts/gpu_table.py --quick [--compiled]      (the CPU, tiny sizes: checks the script only)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from typing import Callable, Dict, List, Optional, Union

import torch

ROWS: List[dict] = []
#: what a row's measured values are keyed by: the clocks of ``bench_timing``; a value measured
#: otherwise (bytes, counts, a whole generate call) sits in the first column
COLUMNS = ("synced", "back-to-back", "graph")
SENSES = {"<=": lambda value, goal: value <= goal, ">=": lambda value, goal: value >= goal,
          "==": lambda value, goal: value == goal}


def row(name: str, values: Union[None, float, int, Dict[str, Optional[float]]], goal: Optional[float] = None,
        sense: str = "<=", note: str = "", failed: bool = False) -> dict:
    """One line of the table: each measured value (``{clock: value}``, or one value) against ``goal``.

    ``met`` is per value (None where nothing was measured or there is no goal); the row's verdict
    is False when any value misses the goal (or the row records a ``failed`` section), True when
    every measured one meets it.
    """
    if sense not in SENSES:
        raise ValueError(f"sense must be one of {tuple(SENSES)}, got {sense!r}")
    values = values if isinstance(values, dict) else {COLUMNS[0]: values}
    met = {clock: (None if value is None or goal is None else bool(SENSES[sense](value, goal)))
           for clock, value in values.items()}
    verdicts = [flag for flag in met.values() if flag is not None]
    entry = {"row": name, "values": values, "goal": goal, "sense": sense, "met": met,
             "verdict": False if failed else (all(verdicts) if verdicts else None), "note": note}
    ROWS.append(entry)
    print(format_row(entry), flush=True)
    return entry


def failed_row(name: str, note: str) -> dict:
    """A row that records a section that failed or was not run (its verdict False: the exit status is 1)."""
    return row(name, None, note=note, failed=True)


def format_value(value, met) -> str:
    if value is None:
        return "-"
    text = f"{value:.3f}x" if isinstance(value, float) else str(value)
    return text + {True: " ok", False: " MISSED", None: ""}[met]


def format_row(entry: dict) -> str:
    goal = "" if entry["goal"] is None else f"{entry['sense']} {entry['goal']:g}"
    cells = [format_value(entry["values"].get(clock), entry["met"].get(clock)) for clock in COLUMNS]
    flag = "FAILED" if entry["verdict"] is False and all(v is None for v in entry["values"].values()) else ""
    return (f"{entry['row'][:96]:96s} {goal:>8s} " + " ".join(f"{cell:>15s}" for cell in cells)
            + f" {flag}  {entry['note']}").rstrip()


def header() -> str:
    return f"{'row':96s} {'goal':>8s} " + " ".join(f"{name:>15s}" for name in ("synced|value", *COLUMNS[1:]))


def section(name: str, run: Callable[[argparse.Namespace], None], args, started: float) -> None:
    if time.monotonic() - started > args.budget:
        failed_row(f"{name}: not measured", f"the {args.budget:g} s budget was spent before it started")
        return
    print(f"== {name} ({time.monotonic() - started:.0f} s)", flush=True)
    try:
        run(args)
    except Exception as error:  # report in the table and go on
        traceback.print_exc()
        failed_row(f"{name}: FAILED", f"{type(error).__name__}: {str(error).splitlines()[0][:160]}")
    finally:
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def ratios(times: Dict[str, Dict[str, Optional[float]]], numerator: str, denominator: str) -> Dict[str, Optional[float]]:
    """``{clock: times[clock][numerator] / times[clock][denominator]}`` (None where either is missing)."""
    from bench_timing import ratio

    return {clock: ratio(t.get(numerator), t.get(denominator)) for clock, t in times.items()}


def milliseconds(times: Dict[str, Dict[str, Optional[float]]], *names: str) -> str:
    """``"ms a / b"`` of the first clock that timed every one of ``names``."""
    for clock, t in times.items():
        if all(t.get(name) is not None for name in names):
            return f"{clock} ms " + " / ".join(f"{1e3 * t[name]:.2f}" for name in names)
    return ""


# ---------------------------------------------------------------- sections
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


def block(args) -> None:
    import bench_block

    batch, shapes, tokens, atoms = ((1, bench_block.QUICK_BLOCK, bench_block.QUICK_TOKENS, 32) if args.quick else
                                    (64, bench_block.BLOCK, bench_block.TOKENS_PER_IMAGE, 160))
    totals = bench_block.measure(torch.device(args.device), batch, atoms, args.repeats, calls=args.calls,
                                 shapes=shapes, tokens=tokens)
    for dtype in ("float32", "bfloat16"):
        times = totals[("eval", dtype)]
        row(f"one block's {len(shapes)} linears, {atoms} atoms, {batch} x {tokens} tokens, eval {dtype} (frozen bank): "
            "MoRAM / nn.Linear", ratios(times, "moram", "linear"), bench_block.GOALS[("eval", dtype)],
            note=milliseconds(times, "linear", "moram"))
    for mode in ("eval", "train"):
        for dtype in ("float32", "bfloat16"):
            times, error = totals[(mode, dtype)], totals[("error", dtype)]
            row(f"  official release's way / ours, {mode} {dtype}", ratios(times, "release", "moram"),
                bench_block.RELEASE_GOAL, ">=", note=f"{milliseconds(times, 'release', 'moram')}; rel. err vs fp32: "
                f"ours {error['moram']:.1e}, release {error['release']:.1e}")
    for why, where in totals[("notes",)].items():
        print(f"  not timed ({len(where)} cells, e.g. {where[0]}): {why}")


#: the tower's goals (issue "GPU path II"): eval MoRAM / plain CLIP per dtype; a training step MoRAM / LoRA
TOWER_EVAL_GOALS = {"float32": 1.35, "bfloat16": 1.45}
TOWER_TRAIN_GOAL = 1.20


def tower(args) -> None:
    import bench_tower
    from bench_copies import sharing_copy
    from bench_timing import STEP_CLOCKS, time_clocks

    from moram_avalanche.layers.moram.layer import keep_base_casts

    batch = 2 if args.quick else 64
    model = bench_tower.QUICK_MODEL if args.quick else bench_tower.MODEL
    towers = {name: net.to(args.device) for name, net in bench_tower.build_towers(10, model).items()}
    towers["moram-kept"] = sharing_copy(towers["moram"])  # --keep-base-casts: [W; A], q k v together
    keep_base_casts(towers["moram-kept"])
    images = bench_tower.images_for(towers["plain"], batch, args.device)
    tower_calls = 1 if args.quick else 3
    for dtype_name, dtype in (("float32", None), ("bfloat16", torch.bfloat16)):
        for net in towers.values():
            net.eval()
        times, notes = time_clocks({name: bench_tower.eval_call(towers[name], images, dtype)
                                    for name in ("plain", "split", "moram", "moram-kept")}, args.repeats, args.device,
                                   calls=tower_calls)
        row(f"{model} tower, batch {batch}, 10 tasks x 16 atoms, eval {dtype_name} (frozen bank): MoRAM / plain CLIP",
            ratios(times, "moram", "plain"), TOWER_EVAL_GOALS[dtype_name], note=milliseconds(times, "plain", "moram"))
        row("  same, bases kept (--keep-base-casts: [W; A] one GEMM a layer, q k v one): MoRAM / plain CLIP",
            ratios(times, "moram-kept", "plain"), TOWER_EVAL_GOALS[dtype_name],
            note=milliseconds(times, "plain", "moram-kept"))
        row("  same, split attention alone / plain CLIP (the floor the atoms ride on)", ratios(times, "split", "plain"),
            note="; ".join(sorted(set(notes.values())))[:120])
        times, _ = time_clocks({name: bench_tower.train_call(towers[name], images, dtype)
                                for name in ("lora", "moram-train")}, args.repeats, args.device, STEP_CLOCKS,
                               calls=tower_calls)
        row(f"  same, one training step {dtype_name}: MoRAM / rank-16 LoRA", ratios(times, "moram-train", "lora"),
            TOWER_TRAIN_GOAL, note=milliseconds(times, "lora", "moram-train"))


#: peak memory of a training step, MoRAM after TRACE's 8 tasks / a LoRA on the same targets (issue "GPU path II")
MEMORY_GOAL = 1.07


def memory(args) -> None:
    import bench_memory_text as bench
    import bench_text

    batch, seq_len, layers, overrides = ((1, 32, 1, bench_text.QUICK["llama-1b"]) if args.quick else
                                         (bench.TRACE_BATCH, bench.TRACE_CONTEXT, None, {}))
    answer = max(1, seq_len // 4)  # bench_memory_text's default: a quarter of the tokens carry the loss
    config = bench_text.model_config("llama-1b", layers, **overrides)
    device = torch.device(args.device)
    base = bench_text.build_base("llama-1b", config, device, torch.bfloat16)
    inputs = bench_text.make_inputs(config, batch, seq_len - answer, answer, device)["train"]
    options = bench.PAPER_TRACE_OPTIONS
    rows = bench.measure(base, inputs, device, options["atoms_per_task"], options, bench.PAPER_DROPOUT,
                         bench.TRACE_TASKS, targets=bench.TARGETS["trace"])
    peak = {(r["variant"], r["gradient_checkpointing"]): r["peak"] for r in rows}
    grown = f"moram task {bench.TRACE_TASKS}"
    for checkpointing in (False, True):
        lora, moram = peak[("lora", checkpointing)], peak[(grown, checkpointing)]
        row(f"LLaMA-1B, TRACE setting ({batch} x {seq_len} tokens, q k v o), peak memory MoRAM task "
            f"{bench.TRACE_TASKS} / LoRA, {'with' if checkpointing else 'no'} checkpointing", moram / lora,
            MEMORY_GOAL, note=f"MiB {lora / 2**20:.1f} / {moram / 2**20:.1f}")


def text_sizes(model_name: str, args) -> dict:
    """The sizes of a language-model section: the issue's, or ``--quick``'s tiny ones (``bench_text.QUICK``)."""
    import bench_text

    if args.quick:
        return dict(layers=bench_text.QUICK_LAYERS, overrides=bench_text.QUICK[model_name], batch=2, source=8,
                    target=2, new=2, dtype=torch.float32)
    return dict(layers=None, overrides={}, batch=8, source=128, target=16, new=16, dtype=torch.bfloat16)


def text(model_name: str, tasks: int, args) -> None:
    import bench_text

    size = text_sizes(model_name, args)
    models = bench_text.build_models(model_name, size["layers"], torch.device(args.device), size["dtype"],
                                     **size["overrides"])
    inputs = bench_text.make_inputs(models["base"].config, size["batch"], size["source"], size["target"], args.device)
    result = bench_text.measure(models, inputs, tasks, size["new"], size["batch"], args.repeats, 1)
    label = (f"{model_name}-sized, {str(size['dtype'])[6:]}, batch {size['batch']}, {size['source']} + {size['target']} "
             f"tokens, {tasks} tasks")
    row(f"{label}: train step MoRAM / rank-8 LoRA (dropout {bench_text.PAPER_LLM_OPTIONS['dropout']:g} both)",
        result["train_moram_over_lora"],
        bench_text.TRAIN_GOAL, note=f"ms {1e3 * result['train_s']['lora']:.1f} / {1e3 * result['train_s']['moram']:.1f}")
    row(f"  same, greedy generation of {size['new']} tokens (eager, frozen bank): MoRAM / base",
        result["generate_moram_over_base"], bench_text.GENERATION_GOAL,
        note=f"LoRA / base {result['generate_lora_over_base']:.3f}x")


def compiled_generation(model_name: str, tasks: int, args) -> None:
    """Generation with a static KV cache, which ``transformers`` compiles into CUDA graphs on a GPU, and the
    compiled decode step's profile (module docstring)."""
    import bench_profile
    import bench_text
    from bench_copies import frozen_copy
    from bench_timing import time_round_robin

    from moram_avalanche.layers.moram.layer import keep_base_casts

    size = text_sizes(model_name, args)
    base = bench_text.build_base(model_name, bench_text.model_config(model_name, size["layers"], **size["overrides"]),
                                 torch.device(args.device), size["dtype"])
    trained = bench_text.with_moram(base)
    bench_text.grow(trained, tasks)
    models = {"base": base, "moram": frozen_copy(trained), "moram-kept": frozen_copy(trained)}
    prompt = bench_text.make_inputs(base.config, size["batch"], size["source"], 4, args.device)["prompt"]
    keep_base_casts(models["moram-kept"])  # [W; A] one GEMM, the read-out kernel: two kernels a layer
    with torch.no_grad():  # an eager call keeps the stacked copies (a graph never makes them)
        models["moram-kept"](**prompt)
    pad = base.config.pad_token_id if base.config.pad_token_id is not None else base.config.eos_token_id
    how = bench_text.compile_everywhere() if args.quick else None  # the CPU: dynamo traces, nothing generated
    calls = {name: bench_text.generate_call(model, prompt, size["new"], pad, static_cache=True, compile_config=how)
             for name, model in models.items()}
    if args.quick:  # dynamo traces the GPU's dense path, not the CPU's sparse one, so its counts mean what a GPU's do
        calls = {name: on_path("dense", call) for name, call in calls.items()}
    changes = {}
    for name, call in calls.items():  # the first calls compile and capture; what they did is counted
        before = bench_profile.dynamo_counters()
        call()
        call()
        changes[name] = {"warm-up": bench_profile.counter_changes(before, bench_profile.dynamo_counters())}
    before = bench_profile.dynamo_counters()
    t = time_round_robin(calls, args.repeats, warmup=0)
    while_timed = bench_profile.counter_changes(before, bench_profile.dynamo_counters())  # both models, round-robin
    row(f"{model_name}-sized, {tasks} tasks, generation of {size['new']} tokens, static cache, decode step compiled "
        "(CUDA graphs): MoRAM / base", t["moram"] / t["base"], bench_text.GENERATION_GOAL,
        note=f"ms {1e3 * t['base']:.1f} / {1e3 * t['moram']:.1f}")
    row("  same, bases kept (--keep-base-casts): MoRAM / base", t["moram-kept"] / t["base"], bench_text.GENERATION_GOAL,
        note=f"ms {1e3 * t['base']:.1f} / {1e3 * t['moram-kept']:.1f}")
    profiles = {}
    for name, call in calls.items():
        before = bench_profile.dynamo_counters()
        table = os.path.join(args.profile_dir, f"profile_decode_{name}.txt") if args.profile_dir else None
        profiles[name] = bench_profile.profile_steps(call, args.device, steps=1, table_path=table)
        changes[name]["profiled"] = bench_profile.counter_changes(before, bench_profile.dynamo_counters())
        print(bench_profile.format_summary(f"compiled generate, {name} (one call of {size['new']} tokens)",
                                           profiles[name]))
    per_token = {name: p["kernels_per_step"] / size["new"] for name, p in profiles.items()}
    launches = {name: (p["kernel_launches_per_step"] + p["graph_launches_per_step"]) / size["new"]
                for name, p in profiles.items()}
    row("  same, compiled: kernels run per generated token (prefill's share included), MoRAM / base",
        per_token["moram"] / per_token["base"] if per_token["base"] else None,
        note=f"base {per_token['base']:.0f}, MoRAM {per_token['moram']:.0f}; host launches per token (kernels + graphs) "
             f"base {launches['base']:.0f}, MoRAM {launches['moram']:.0f}")
    row("  same, bases kept: kernels run per generated token, MoRAM / base",
        per_token["moram-kept"] / per_token["base"] if per_token["base"] else None,
        note=f"base {per_token['base']:.0f}, MoRAM kept {per_token['moram-kept']:.0f}; host launches per token "
             f"base {launches['base']:.0f}, MoRAM kept {launches['moram-kept']:.0f}")
    breaks = {name: sum(sum(phase["graph_breaks"].values()) for phase in change.values())
              for name, change in changes.items()}
    recompiles = {name: change["profiled"]["frames_compiled"] for name, change in changes.items()}
    row("  same, compiled: graph breaks + recompiles after warm-up, MoRAM (goal: no more than the base model's)",
        breaks["moram"] + recompiles["moram"], breaks["base"] + recompiles["base"], "<=",
        note=f"graph breaks base {breaks['base']}, MoRAM {breaks['moram']}; frames compiled by the profiled call "
             f"base {recompiles['base']}, MoRAM {recompiles['moram']}; by the timed calls of both "
             f"{while_timed['frames_compiled']}")
    ROWS[-1]["profile"] = {"kernels": profiles, "dynamo": dict(changes, timed=while_timed)}


def on_path(path: str, fn: Callable) -> Callable:
    """``fn`` run with MoRAM's ``path`` forced (``use_path``)."""
    from moram_avalanche.layers.moram.paths import use_path

    def run():
        with use_path(path):
            return fn()
    return run


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=330.0, help="seconds for the whole table (default 330)")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--calls", type=int, default=20, help="calls per back-to-back or graph sample of the block")
    parser.add_argument("--compiled", action="store_true",
                        help="also time generation with a static cache and a compiled decode step, and profile it")
    parser.add_argument("--profile-dir", default=None, help="write the compiled decode step's profile tables here")
    parser.add_argument("--quick", action="store_true", help="tiny sizes on the CPU: checks the script only")
    parser.add_argument("--out", default=None, help="also write the rows to this JSON file")
    args = parser.parse_args(argv)
    args.device = "cpu" if args.quick else "cuda"
    if args.quick:
        args.repeats, args.calls = 1, 2
    elif not torch.cuda.is_available():
        print("no CUDA device: nothing to measure (--quick checks the script on the CPU)", file=sys.stderr)
        return 2
    if args.profile_dir:
        os.makedirs(args.profile_dir, exist_ok=True)
    ROWS.clear()
    started = time.monotonic()
    where = torch.cuda.get_device_name() if args.device == "cuda" else "CPU (--quick: sizes shrunk, not a measurement)"
    print(f"device {where}; torch {torch.__version__}, CUDA {torch.version.cuda}; median of {args.repeats}; "
          f"clocks: synced, back-to-back and graph ({args.calls} calls per sample of the block)")
    sections = [("host synchronisations", syncs), ("one block's six linears", block), ("ViT-B/16 image tower", tower),
                ("memory at the TRACE setting", memory), ("LLaMA-1B-sized", lambda a: text("llama-1b", 15, a)),
                ("T5-base-sized", lambda a: text("t5-base", 4, a))]
    if args.compiled:  # last: compiling takes the longest
        sections.append(("LLaMA-1B-sized, compiled generation", lambda a: compiled_generation("llama-1b", 15, a)))
    try:
        for name, run in sections:
            section(name, run, args, started)
    except KeyboardInterrupt:  # the step's time limit (SIGINT): the rows measured so far are still the table
        failed_row("interrupted (SIGINT: the step's time limit)", f"after {time.monotonic() - started:.0f} s")
    print(f"\n{header()}  note")
    for entry in ROWS:
        print(format_row(entry))
    missed = [entry["row"].strip() for entry in ROWS if entry["verdict"] is False]
    print(f"\n{len(missed)} of {sum(entry['verdict'] is not None for entry in ROWS)} rows with a goal missed or failed"
          + "".join(f"\n  {name[:110]}" for name in missed))
    if args.out:
        from moram_avalanche.utils.files import atomic_write_text

        atomic_write_text(args.out, json.dumps({"device": where, "torch": torch.__version__, "cuda": torch.version.cuda,
                                                "rows": ROWS}, indent=2, default=str) + "\n")
    failed = [entry for entry in ROWS if entry["verdict"] is False and all(v is None for v in entry["values"].values())]
    return 1 if failed or (missed and not args.quick) else 0  # --quick's figures are meaningless: only failures count


__all__ = ["COLUMNS", "MEMORY_GOAL", "ROWS", "SENSES", "TOWER_EVAL_GOALS", "TOWER_TRAIN_GOAL", "block", "compiled_generation",
           "failed_row", "format_row", "format_value", "header", "main", "memory", "milliseconds", "on_path", "ratios", "row",
           "section", "syncs", "text", "text_sizes", "tower"]


if __name__ == "__main__":
    sys.exit(main())
