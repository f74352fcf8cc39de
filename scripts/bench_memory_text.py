"""Peak memory of one training step of MoRAM and LoRA on a language model, at the paper's TRACE settings.

What the project's issue asks: "measure peak memory per GPU for a 1B model at the paper's
settings (random init is fine)". The paper's TRACE setting (Sec. 4; reference
``language_models.md``): bf16 weights, batch 4, context 1024 tokens, MoRAM r 16, top-k 16,
tau 0.03, delta 0.2 (:data:`moram_avalanche.text.inject.PAPER_TRACE_OPTIONS`), lr 5e-4, on TRACE's
targets: the release's query, key, value and output projections
(:data:`moram_avalanche.text.targets.RELEASE_TARGET_MODULES`, what ``--benchmark trace`` adapts;
``--targets paper``: the classification streams' query and key).

One training step is measured, the first of a task: the optimizer built as the library's text
loop builds it (:func:`moram_avalanche.algorithms.mixed_precision.training_optimizer`: on a
bf16 model, float32 master copies of the trainable weights, allocated in the step; gradients
clipped to norm 1.0 on their float32 copies; ``--pure-bf16``: AdamW on the bf16 weights
themselves, as the library trained before it kept master weights), forward with the
teacher-forced token loss as the loop computes it (only the answer positions go through the LM
head, :func:`moram_avalanche.models.language_model.causal_answer_logits`; ``--full-logits``:
the model's own ``labels=`` loss over every position, for comparison), backward, and the first
AdamW step (which allocates the optimizer's state), in train mode (MoRAM's dropout on). Rows:

* ``lora``         -- a rank-16 LoRA on the same linears (as many trainable parameters as one
  MoRAM task; no dropout unless ``--lora-dropout``: MoRAM's 0.1 for the same dropout on both),
  the baseline of the ratios;
* ``moram task 1`` -- 16 atoms per linear, all trainable;
* ``moram task 8`` -- after TRACE's 8 tasks: 128 atoms per linear, 112 frozen, 16 trainable;

each without and with gradient checkpointing (the library's ``--gradient-checkpointing``,
:func:`moram_avalanche.text.load.enable_gradient_checkpointing`).

What "memory" is: bytes allocated through torch's allocator, as ``torch.cuda.max_memory_allocated``
counts them (not what the CUDA caching allocator reserves, which is more). ``held`` is the
weights and buffers of the model (one copy: the three models share the base's tensors,
``bench_text.sharing_copy``) and the inputs; ``step peak`` the most allocated on top of them
during the step (activations, gradients, master copies, optimizer state, temporaries);
``peak`` their sum. On
CUDA the step peak is the allocator's own peak statistic; on the CPU it is counted from the
allocation and free events of torch's profiler (``profile_memory=True``): the same quantity,
measured by the allocator's hooks. CPU kernels are not CUDA kernels: on a GPU, attention runs
flash / memory-efficient kernels, and oneDNN's scratch space (not counted here) becomes cuBLAS
workspace; so a CPU number is a measurement of this program on the CPU and an estimate for a
GPU, and the printout says which device measured it. MoRAM's dropout is made again in the
backward (:mod:`moram_avalanche.layers.moram.dropped`): on CUDA drawn again from the generator's
state (nothing kept but the input), on the CPU from its kept noise; ``--redraw-on-cpu`` draws it
again on the CPU too, so that a CPU run keeps what a GPU run keeps.

Examples:
    python scripts/bench_memory_text.py --model llama-1b                    # the 1B model, full depth
    python scripts/bench_memory_text.py --model llama-7b --device cuda      # a 7B step on a GPU
    python scripts/bench_memory_text.py --model llama-1b --layers 2 --seq-len 128   # quick check
    python scripts/bench_memory_text.py --model llama-7b --extrapolate     # a 7B estimate on a CPU

``--extrapolate`` measures the model 1 and 2 layers deep and extends every byte count linearly
to the full depth: every layer holds the same weights and keeps the same activations, and the
embedding, the head and the loss are the intercept. It is an estimate and is printed as one.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Callable, Dict, List, Optional

import torch
from bench_text import (
    MODELS,
    build_base,
    full_depth,
    grow,
    make_inputs,
    model_config,
    trainable_count,
    with_lora,
    with_moram,
)
from bench_timing import apply_threads
from torch import nn

from moram_avalanche.algorithms.mixed_precision import GradientClip, training_optimizer
from moram_avalanche.layers.moram import dropped
from moram_avalanche.models.language_model import causal_answer_logits, token_loss
from moram_avalanche.strategies.moram_setting import MORAM_TEXT_LOOP
from moram_avalanche.strategies.text.loop import TEXT_BETAS
from moram_avalanche.text.inject import PAPER_TRACE_OPTIONS
from moram_avalanche.text.layer import PAPER_DROPOUT
from moram_avalanche.text.load import enable_gradient_checkpointing
from moram_avalanche.text.targets import MORAM_TARGET_MODULES, RELEASE_TARGET_MODULES
from moram_avalanche.utils.files import atomic_write_text

#: the paper's TRACE loop (Sec. 4): lr 5e-4, batch 4, context 1024 tokens
TRACE_LR, TRACE_BATCH, TRACE_CONTEXT = 5e-4, 4, 1024
#: tasks in TRACE
TRACE_TASKS = 8
MB = 2 ** 20
#: ``--targets`` -> the target table: TRACE's (the release's q, k, v, o) or the paper's classification streams' (q, k)
TARGETS = {"trace": RELEASE_TARGET_MODULES, "paper": MORAM_TARGET_MODULES}


# ---------------------------------------------------------------------- measuring
def allocated_peak(step: Callable[[], None], device: torch.device) -> Dict[str, int]:
    """Run ``step`` once; ``{"peak": most bytes allocated above the start, "net": bytes still
    allocated at the end above the start}`` (module docstring: CUDA's peak statistic, or the CPU
    allocator's events under torch's profiler)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        start = torch.cuda.memory_allocated(device)
        step()
        torch.cuda.synchronize(device)
        return {"peak": torch.cuda.max_memory_allocated(device) - start,
                "net": torch.cuda.memory_allocated(device) - start}
    if device.type != "cpu":
        raise ValueError(f"allocated_peak measures cuda or cpu, not {device.type}")
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    events = [event for event in prof.profiler.kineto_results.events() if event.name() == "[memory]"]
    current = peak = 0
    for event in sorted(events, key=lambda event: event.start_ns()):
        current += event.nbytes()
        peak = max(peak, current)
    return {"peak": peak, "net": current}


def held_bytes(model: nn.Module, inputs: dict) -> int:
    """Bytes of ``model``'s parameters and buffers (each storage once) and of the inputs."""
    storages = {}
    for tensor in [*model.parameters(), *model.buffers(), *inputs.values()]:
        storage = tensor.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
    return sum(storages.values())


def training_step(model: nn.Module, inputs: dict, full_logits: bool = False,
                  master_weights: bool = True) -> Callable[[], None]:
    """The first training step of a task: a fresh AdamW (the text loop's betas, no weight decay),
    over float32 masters of bf16 trainable weights unless ``master_weights`` is False, its gradients
    clipped as the loop clips them (module docstring), forward with the token loss (the library's,
    or with ``full_logits`` the model's own), backward, step."""
    params = [p for p in model.parameters() if p.requires_grad]
    features = {k: v for k, v in inputs.items() if k != "labels"}
    kept = []  # the optimizer outlives the step, as the loop's does (its state is what the step leaves)

    def run():
        optimizer = training_optimizer(  # inside the step: its master copies are the step's
            params, lambda group: torch.optim.AdamW(group, lr=TRACE_LR, betas=TEXT_BETAS, weight_decay=0.0),
            clip=GradientClip(MORAM_TEXT_LOOP.max_grad_norm), master_weights=master_weights)
        kept.append(optimizer)
        model.train()
        optimizer.zero_grad(set_to_none=True)
        if full_logits:
            loss = model(**inputs).loss
        else:
            loss = token_loss(*causal_answer_logits(model, features, inputs["labels"]))
        loss.backward()
        optimizer.step()
    return run


# ---------------------------------------------------------------------- rows
def variants(base: nn.Module, rank: int, options: dict, dropout: float, tasks: int,
             targets=None, lora_dropout: float = 0.0) -> Dict[str, Callable[[], nn.Module]]:
    """``{row name: build}``: LoRA of ``rank`` (``lora_dropout`` on its input), MoRAM after 1 and
    after ``tasks`` tasks, on ``targets`` (a ``model_type`` table; None: the architecture's query and key)."""
    def moram(count):
        def build():
            model = with_moram(base, dropout, dict(options, targets=targets))
            grow(model, count)
            return model
        return build
    return {"lora": lambda: with_lora(base, rank, targets=targets, dropout=lora_dropout), "moram task 1": moram(1),
            f"moram task {tasks}": moram(tasks)}


def measure(base: nn.Module, inputs: dict, device: torch.device, rank: int, options: dict, dropout: float,
            tasks: int, checkpointing=(False, True), full_logits: bool = False, targets=None,
            master_weights: bool = True, lora_dropout: float = 0.0) -> List[dict]:
    """One row per variant and checkpointing setting (module docstring)."""
    held = held_bytes(base, inputs)
    rows = []
    for checkpoint in checkpointing:
        for name, build in variants(base, rank, options, dropout, tasks, targets, lora_dropout).items():
            model = build()
            if checkpoint:
                enable_gradient_checkpointing(model)
            numbers = allocated_peak(training_step(model, inputs, full_logits, master_weights), device)
            adapter = held_bytes(model, {}) - held_bytes(base, {})  # the adapters' own tensors
            rows.append({"variant": name, "gradient_checkpointing": checkpoint, "held": held + adapter,
                         "step_peak": numbers["peak"], "step_net": numbers["net"],
                         "peak": held + adapter + numbers["peak"], "trainable": trainable_count(model)})
            del model  # its adapters, gradients and optimizer state go with it
            print(f"  {name:14s} checkpointing {'on ' if checkpoint else 'off'}: peak {rows[-1]['peak'] / MB:9.0f} MiB "
                  f"(held {rows[-1]['held'] / MB:.0f} + step {numbers['peak'] / MB:.0f})", flush=True)
    return rows


def table(rows: List[dict]) -> str:
    lora = {row["gradient_checkpointing"]: row["peak"] for row in rows if row["variant"] == "lora"}
    lines = [f"{'variant':14s} {'checkpointing':>13s} {'trainable':>10s} {'held MiB':>9s} {'step MiB':>9s} "
             f"{'peak MiB':>9s} {'peak / LoRA':>11s}"]
    for row in rows:
        lines.append(f"{row['variant']:14s} {'on' if row['gradient_checkpointing'] else 'off':>13s} "
                     f"{row['trainable']:10d} {row['held'] / MB:9.0f} {row['step_peak'] / MB:9.0f} "
                     f"{row['peak'] / MB:9.0f} {row['peak'] / lora[row['gradient_checkpointing']]:10.3f}x")
    return "\n".join(lines)


def extrapolate(shallow: List[dict], deeper: List[dict], depths, depth: int) -> List[dict]:
    """Rows at ``depth`` layers from rows measured at ``depths = (a, b)`` layers, each byte count
    linear in the depth (every layer holds the same weights and keeps the same activations; the
    embedding, the head and the loss are the intercept)."""
    a, b = depths
    rows = []
    for one, two in zip(shallow, deeper):
        row = dict(one)
        for key in ("held", "step_peak", "step_net", "peak"):
            row[key] = round(one[key] + (two[key] - one[key]) * (depth - a) / (b - a))
        row["trainable"] = round(one["trainable"] + (two["trainable"] - one["trainable"]) * (depth - a) / (b - a))
        rows.append(row)
    return rows


def run_depth(args, layers: Optional[int], answer: int) -> List[dict]:
    """Build the model ``layers`` deep (full depth: None), print what is measured, measure it."""
    device, dtype = torch.device(args.device), getattr(torch, args.dtype)
    config = model_config(args.model, layers)
    base = build_base(args.model, config, device, dtype)
    inputs = make_inputs(config, args.batch, args.seq_len - answer, answer, device)["train"]
    depth = getattr(config, MODELS[args.model][3][0])
    print(f"model {args.model}: {sum(p.numel() for p in base.parameters()) / 1e6:.0f}M parameters, {depth} layers"
          + ("" if depth == full_depth(args.model) else f" -- SHRUNK from {full_depth(args.model)}"), flush=True)
    checkpointing = {"both": (False, True), "off": (False,), "on": (True,)}[args.checkpointing]
    return measure(base, inputs, device, PAPER_TRACE_OPTIONS["atoms_per_task"], PAPER_TRACE_OPTIONS, PAPER_DROPOUT,
                   args.tasks, checkpointing, args.full_logits, TARGETS[args.targets], not args.pure_bf16,
                   args.lora_dropout)


def main(argv: Optional[List[str]] = None) -> List[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(MODELS), default="llama-1b")
    parser.add_argument("--layers", type=int, default=None, help="shrink the depth to N layers (a quick check)")
    parser.add_argument("--extrapolate", action="store_true",
                        help="measure 1 and 2 layers deep and extrapolate linearly to the full depth (a model "
                             "too large for this machine's memory; an estimate, printed as one)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="bfloat16",
                        help="the model's weights and compute (the paper's TRACE runs: bfloat16; the trainable "
                             "weights' float32 masters beside them unless --pure-bf16)")
    parser.add_argument("--batch", type=int, default=TRACE_BATCH, help="sequences per step (paper: 4)")
    parser.add_argument("--seq-len", type=int, default=TRACE_CONTEXT, help="tokens per sequence (paper: 1024)")
    parser.add_argument("--answer-len", type=int, default=None,
                        help="of which answer tokens carry the loss (default: a quarter)")
    parser.add_argument("--tasks", type=int, default=TRACE_TASKS, help="tasks of the grown MoRAM row (TRACE: 8)")
    parser.add_argument("--checkpointing", choices=("both", "off", "on"), default="both")
    parser.add_argument("--full-logits", action="store_true",
                        help="the model's own labels= loss over every position's logits instead of the library's")
    parser.add_argument("--pure-bf16", action="store_true",
                        help="AdamW on the bf16 weights themselves (the library's master_weights=False; its only way "
                             "before it kept master weights) instead of float32 master copies")
    parser.add_argument("--targets", choices=sorted(TARGETS), default="trace",
                        help="trace: the release's q, k, v, o (what --benchmark trace adapts); paper: q, k")
    parser.add_argument("--lora-dropout", type=float, default=0.0,
                        help="dropout on the LoRA baseline's input (default 0: none; MoRAM's own, "
                             f"{PAPER_DROPOUT}, for the same dropout on both)")
    parser.add_argument("--redraw-on-cpu", action="store_true",
                        help="MoRAM's backward draws its dropout again on the CPU as it does on CUDA, instead of "
                             "keeping the noise (the CPU then keeps what a GPU keeps: an estimate of a GPU run)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (CPU)")
    parser.add_argument("--json", default=None, help="also write the numbers to this JSON file")
    args = parser.parse_args(argv)
    if args.extrapolate and args.layers is not None:
        parser.error("--extrapolate measures 1 and 2 layers itself: leave --layers out")
    if model_config(args.model).is_encoder_decoder:
        parser.error("the TRACE setting is for decoder-only models: pick a llama model")
    answer = args.answer_len if args.answer_len is not None else max(1, args.seq_len // 4)
    if not 0 <= args.lora_dropout < 1:
        parser.error(f"--lora-dropout must be a probability in [0, 1), got {args.lora_dropout:g}")
    if not 0 < answer < args.seq_len:
        parser.error(f"--answer-len must be between 1 and --seq-len - 1 ({args.seq_len - 1}), got {answer}")
    apply_threads(args)
    dropped.REDRAW_ON_CPU = args.redraw_on_cpu
    device = torch.device(args.device)
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    precision = ("" if args.dtype == "float32" else
                 ", pure bf16 weights" if args.pure_bf16 else ", float32 master weights")
    print(f"torch {torch.__version__}, {where}, {args.dtype}{precision}; memory: bytes allocated "
          f"({'CUDA peak statistic' if device.type == 'cuda' else 'CPU allocator events'})")
    print(f"batch {args.batch} x {args.seq_len} tokens ({answer} answer tokens), MoRAM {PAPER_TRACE_OPTIONS} "
          f"dropout {PAPER_DROPOUT} (made again in the backward: "
          f"{'drawn again' if dropped.redrawn(torch.empty(0, device=device)) else 'from its kept noise'}), LoRA rank {PAPER_TRACE_OPTIONS['atoms_per_task']} "
          f"dropout {args.lora_dropout:g}, on "
          f"{', '.join(TARGETS[args.targets]['llama'])} ({args.targets}); loss over "
          + ("every position's logits (--full-logits)" if args.full_logits else "the answer positions' logits"))
    depth = full_depth(args.model) if args.layers is None else args.layers
    measured = {}
    if args.extrapolate:
        measured = {layers: run_depth(args, layers, answer) for layers in (1, 2)}
        rows = extrapolate(measured[1], measured[2], (1, 2), depth)
        print(f"\nESTIMATE: {args.model} at its full depth ({depth} layers), extrapolated linearly from 1 and 2 layers")
    else:
        rows = run_depth(args, args.layers, answer)
        print()
    print(table(rows))
    if args.json:
        settings = {k: v for k, v in vars(args).items() if k != "json"}
        settings.update(answer_len=answer, depth=depth, full_depth=full_depth(args.model), device_name=where,
                        torch=torch.__version__, moram=dict(PAPER_TRACE_OPTIONS, dropout=PAPER_DROPOUT),
                        load=os.getloadavg()[0])
        payload = {"settings": settings, "rows": rows, "estimate": args.extrapolate,
                   "measured": {str(k): v for k, v in measured.items()}}
        atomic_write_text(args.json, json.dumps(payload, indent=2) + "\n")
        print(f"wrote {args.json}")
    return rows


if __name__ == "__main__":
    main()
