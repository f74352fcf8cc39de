"""Host microseconds of one MoRAM eval call beside the nn.Linear it wraps, per path: what a call costs besides its GEMMs.

On a GPU a bf16 call of a 768-wide layer is host-bound: its kernels are shorter than the Python
and dispatch that launch them (issue "GPU path II", item 1). This measures that host cost on
the CPU, where it is the same code: a MoRAM layer (768 -> 768, 160 atoms: 10 tasks of 16,
k = 16, tau = 0.01, delta = 0.2) on a few tokens (the GEMMs take a few microseconds), in eval
mode under ``torch.no_grad()``, float32 and bfloat16 autocast, its bank frozen or its last
task's atoms still trainable, the base read apart (the default) or kept (``keep_base_casts``: on
the GPU paths, stacked with the keys, ``layers.moram.stacked``); the ``triton`` path with its kernel
launch stubbed (a no-op, as ``scripts/count_ops.py`` stubs it), ``dense`` and ``reference`` as they
are. A frozen bank's calls are planned (``layers.moram.plan``: the stacked call since 0.7.3, the
call apart since 0.7.6); ``--pieces`` times each kind's pieces.

``--launch dry``: the Triton path's launches made for real up to the GPU driver's call -- the
kernels compiled for sm_90, each launch through Triton's launch or a kept one
(``layers.moram.paths.triton_launch``, 0.7.11) into a launcher that runs nothing
(``utils.triton_dry``) --, so that the figures hold what a GPU's host spends launching. Triton's own
launch at every call, as before 0.7.11: ``MORAM_AVALANCHE_TRITON_LAUNCH=triton``. Unset
``TRITON_INTERPRET`` for it.

Calls are interleaved with the layer's own ``nn.Linear`` in one process: ``--rounds`` rounds of
``--calls`` calls of each, one after the other; the columns are the medians over rounds of
microseconds per call and their ratio, and the ATen operators one call dispatches (of the
Linear's). Run it alone on the machine (nothing else timed or tested at once):

    OMP_NUM_THREADS=1 python scripts/bench_call.py --threads 1
    OMP_NUM_THREADS=1 python scripts/bench_call.py --threads 1 --tokens 1 --width 16 --pieces
    OMP_NUM_THREADS=1 python scripts/bench_call.py --threads 1 --tokens 1 --width 16 --peft
    OMP_NUM_THREADS=1 python scripts/bench_call.py --threads 1 --tokens 1 --width 16 --paths triton --train

``--train``: also, per path, a training step's call over a bank with trainable rows (grad mode on,
the layer in training mode, the tokens requiring grad, float32 and bf16 autocast): its forward
(rows ``train-fwd``) and its forward with the backward of a gradient of ones (``train-f+b``), beside
the ``nn.Linear`` called the same way.

``--peft``: also a peft layer (``moram_avalanche.text``) with the paper's language-model setting
(r = 8, k = 4, tau = 0.1, delta = 0.2) after 15 tasks (120 atoms) over a bfloat16 ``nn.Linear``, no
autocast: what each adapted layer of a bf16 language model's decode step calls, beside that Linear
(rows ``peft``); and over a float32 one under bf16 autocast (rows ``peft-fp32``: a float32 model
under ``Trainer(bf16=True)``). Each base is frozen, as ``get_peft_model`` leaves every base layer:
under autocast that decides who pays the float32 base's cast at each call (autocast keeps its cast
of a weight that requires grad for the rest of its region, so a trainable base's ``nn.Linear``
would be timed with its cast cached; 0.7.11 and before timed it so).

It runs on older checkouts too (``PYTHONPATH=<checkout>``), which is how a before / after is read.

``--instructions``: instead of microseconds, the machine instructions a call executes, beside the
Linear's, counted by valgrind's callgrind (the script runs itself under it: a few minutes, most of
them the imports). A count does not depend on what else the machine is doing, where a shared machine's
microseconds move by 10-20 %: two runs of one checkout differ by about 2 % (addresses still move
from run to run: objects' hashes, the allocator's). It leaves out what instructions do not show (cache
misses, the allocator's waits), so its ratios run below the timed ones. The run's string hashes
are seeded (``PYTHONHASHSEED``, 0 unless set). Each loop is one
``functools.reduce`` of ``--calls`` calls, counted alone (``--toggle-collect``, ``--dump-after``);
an import's own ``functools.reduce`` is dumped too, and told apart by its size (``LOOP_FLOOR``).
Each counted row also gives the ratio without the matrix products' arithmetic (column ``no GEMM``):
the instructions executed inside ``at::native::cpublas::gemm`` (PyTorch's CPU matrix product, its
BLAS call included; :func:`dump_arithmetic`) taken from each side. On a GPU that arithmetic is the
device's, not the host's, and on this CPU it is not small beside a 16-wide call: in bf16 the keys'
``p = A x`` over the peft rows' 120 atoms is about 19 thousand instructions of scalar bf16 dot products, six
times the ``nn.Linear``'s own product. The ``ratio`` column, with it, is item 7's figure as measured
before 0.7.12; ``no GEMM`` is the nearer reading of what a GPU's host does.
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path
from typing import Optional

import torch
from torch import nn

from moram_avalanche.layers.moram.layer import MoRAMLinear

try:
    from moram_avalanche.layers.moram.layer import keep_base_casts
except ImportError:  # a checkout before 0.7.0: the base is read apart
    keep_base_casts = None
from moram_avalanche.layers.moram.paths import triton as moram_triton
from moram_avalanche.layers.moram.paths import use_path
from moram_avalanche.utils.dispatch import OpCounter


def stub_triton() -> None:
    """The Triton launches replaced by no-ops, on any device."""
    class Launcher:
        def __getitem__(self, grid):
            return lambda *args, **kwargs: None

    moram_triton._kernels = lambda: types.SimpleNamespace(route_forward_kernel=Launcher(),
                                                          route_backward_kernel=Launcher(),
                                                          route_read_out_kernel=Launcher())
    moram_triton.usable = lambda tensor: True


def dry_launches():
    """``--launch dry``: the Triton kernels compiled for sm_90 and launched through Triton's launch
    (kept or not: ``paths.triton_launch``) into a launcher that runs nothing (``utils.triton_dry``):
    what a GPU's host does for a launch, short of the driver's own call."""
    from moram_avalanche.utils.triton_dry import dry_driver

    moram_triton.usable = lambda tensor: True
    return dry_driver(record=False)


def build(width: int, tasks: int, frozen: bool) -> MoRAMLinear:
    torch.manual_seed(0)
    layer = MoRAMLinear(nn.Linear(width, width), atoms_per_task=16, topk=16, temperature=0.01, threshold=0.2)
    for _ in range(tasks):
        layer.expand()
        with torch.no_grad():
            layer.new_values.normal_(std=0.02)
    if frozen:
        layer.freeze()
    return layer.eval()


def per_call_us(fn, calls: int) -> float:
    start = time.perf_counter_ns()
    for _ in range(calls):
        fn()
    return (time.perf_counter_ns() - start) / calls / 1e3


#: the run that ``--instructions`` starts under callgrind (its hidden ``--counted-run``): each
#: measurement is then one counted loop
COUNTED = {"run": False}


def counted_loop(fn, calls: int) -> None:
    """``calls`` calls of ``fn`` in one ``functools.reduce``: what callgrind counts and dumps (``--instructions``)."""
    functools.reduce(lambda _, __: fn(), range(calls), None)


def measure(layer: nn.Module, x: torch.Tensor, path: str, amp: bool, rounds: int, calls: int, linear=None):
    linear = layer.base if linear is None else linear
    with use_path(path), torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
        return compare(lambda: layer(x), lambda: linear(x), rounds, calls)


def compare(moram, linear, rounds: int, calls: int):
    """``(MoRAM us, Linear us, MoRAM's operators, Linear's)`` of two calls (no arguments) made in the
    caller's modes: medians over ``rounds`` of ``calls`` each, interleaved (under callgrind, one
    counted loop each and no microseconds: nan), after three warm calls (the first keep the bank in
    the compute dtype and choose the path)."""
    for _ in range(3):
        moram(), linear()
    with OpCounter() as moram_ops:
        moram()
    with OpCounter() as linear_ops:
        linear()
    if COUNTED["run"]:  # under callgrind: one loop each, counted by the run that started it
        counted_loop(moram, calls)
        counted_loop(linear, calls)
        return math.nan, math.nan, moram_ops.total, linear_ops.total
    moram_us, linear_us = [], []
    for _ in range(rounds):
        linear_us.append(per_call_us(linear, calls))
        moram_us.append(per_call_us(moram, calls))
    return statistics.median(moram_us), statistics.median(linear_us), moram_ops.total, linear_ops.total


def measure_training(layer: nn.Module, x: torch.Tensor, path: str, amp: bool, backward: bool, rounds: int,
                     calls: int):
    """:func:`measure` for a training step's call (``--train``): grad mode on, the layer in training
    mode over its bank with trainable rows, the tokens requiring grad (an inner layer's input); its
    forward alone, or (``backward``) the forward and the backward of a gradient of ones, beside the
    layer's ``nn.Linear`` called the same way (its frozen weight: the tokens' gradient alone). Each
    backward adds into the tokens' and the atoms' ``.grad``, the same way at each call."""
    layer.train()
    linear = layer.base
    x = x.detach().requires_grad_(True)
    with use_path(path), torch.enable_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
        grad = torch.ones_like(layer(x))
        if backward:
            return compare(lambda: torch.autograd.backward(layer(x), grad),
                           lambda: torch.autograd.backward(linear(x), grad), rounds, calls)
        return compare(lambda: layer(x), lambda: linear(x), rounds, calls)


def training_rows(path: str, width: int, x: torch.Tensor, rounds: int, calls: int) -> None:
    """``--train``: the rows of a training step's call (:func:`measure_training`), float32 and bf16
    autocast, its forward (``train-fwd``) and its forward and backward (``train-f+b``), the base read
    apart (a trainable bank's call takes the long way: no plan)."""
    for backward in (False, True):
        for amp in (False, True):
            layer = build(width, 10, False)
            moram, linear, ops, linear_ops = measure_training(layer, x, path, amp, backward, rounds, calls)
            print(f"{path:10s} {'bf16' if amp else 'fp32':5s} {'train-f+b' if backward else 'train-fwd':9s} "
                  f"{'apart':5s} {moram:9.1f} {linear:9.1f} {moram / linear:6.2f}x  {ops} ({linear_ops})", flush=True)


def pieces(width: int, tokens: int, rounds: int, calls: int) -> None:
    """Where a bf16 eval call with the base kept (Triton, launch stubbed, frozen bank) spends its host
    time: the whole call, the planned call's pieces (``layers.moram.plan``), and the long way's
    decisions the plan skips, each timed alone, medians over ``rounds``."""
    from moram_avalanche.layers.moram.layer import compute_dtype, tokens_of

    layer = build(width, 10, True)
    keep_base_casts(layer)
    x = torch.randn(1, tokens, width)
    weight, bias = layer.base.weight, layer.base.bias
    with use_path("triton"), torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        layer(x)  # keeps the stacked copy, chooses the path, plans the call
        plan = getattr(layer, "_plan", None)
        steps = getattr(plan, "steps", None)  # (0.7.5: the repeat's own steps, constants bound)
        read_out = getattr(steps, "read_out", None) is not None
        rows = tokens_of(x, torch.bfloat16)  # the long way's tokens, cast
        planned_rows = x.reshape(-1, width)  # the planned call's: autocast's addmm casts them
        stacked = layer.stacked_base(torch.bfloat16, weight, bias)
        k, gate = layer.routing_now(layer.num_atoms)
        mixture = layer.path(rows, layer.num_atoms, k, True, True)
        full = torch.addmm(stacked.bias, rows, stacked.weight_keys_t)
        base_out, proj = full.split_with_sizes((stacked.out_features, stacked.num_atoms), 1)
        out = mixture(rows, stacked, k, layer.temperature, gate, False)[0]
        joined = read_out and hasattr(steps.read_out, "joined")  # (0.7.7: the GEMM's output read in place)
        shape = x.shape[:-1] + (layer.out_features,)
        timed = {
            "the whole call": lambda: layer(x),
            "nn.Linear, for scale": lambda: layer.base(x),
            "  the plan's check (EvalPlan.applies)": (lambda: plan.applies(layer, x, weight, bias)) if plan else None,
            "  tokens: reshape": lambda: x.reshape(-1, width),
            ("  steps 1-6 (the plan's StackedRepeat)" if steps is not None else "  steps 1-6 (stacked_mixture)"):
                ((lambda: steps(planned_rows)) if steps is not None else
                 lambda: mixture(planned_rows, stacked, k, layer.temperature, gate, False)),
            "    the stacked GEMM (addmm, casting the tokens)": lambda: torch.addmm(stacked.bias, planned_rows,
                                                                                stacked.weight_keys_t),
            "    the two views (split_with_sizes)": lambda: full.split_with_sizes((stacked.out_features,
                                                                                 stacked.num_atoms), 1),
            ("    the read-out's launch (ReadOut.joined)" if joined else "    the read-out's launch (ReadOut)"
             if read_out else "    the read-out's launch (run_read_out)"):
                ((lambda: steps.read_out.joined(full, shape)) if joined else (lambda: steps.read_out(proj, base_out))
                 if read_out else
                 lambda: moram_triton.run_read_out(proj, base_out, stacked.values, k, layer.temperature, gate)),
            "  the output's reshape": lambda: out.reshape(*x.shape[:-1], out.shape[-1]),
            "the long way's decisions, which a plan skips:": None,
            "  tokens: reshape and cast (tokens_of)": lambda: tokens_of(x, torch.bfloat16),
            "  bank size (num_atoms)": lambda: layer.num_atoms,
            "  compute dtype": lambda: compute_dtype(x),
            "  the kept path (path)": lambda: layer.path(rows, layer.num_atoms, k, True, True),
            "  the stacked copy's checks (stacked_base)": lambda: layer.stacked_base(torch.bfloat16, weight, bias),
        }
        if joined:  # (no views of the GEMM's output, and the output made in the call's shape)
            del timed["    the two views (split_with_sizes)"], timed["  the output's reshape"]
        medians = timed_pieces(timed, rounds, calls)
    print_pieces("base kept", medians, width, tokens, rounds, calls)


def timed_pieces(timed: dict, rounds: int, calls: int) -> dict:
    """Each piece's median microseconds over ``rounds`` (None for a heading: a piece that is None)."""
    return {name: None if fn is None else statistics.median(per_call_us(fn, calls) for _ in range(rounds))
            for name, fn in timed.items()}


def print_pieces(base: str, medians: dict, width: int, tokens: int, rounds: int, calls: int) -> None:
    print(f"host us per piece of a bf16 eval call, {base}, {width} -> {width}, {tokens} token(s); medians of "
          f"{rounds} rounds x {calls} calls")
    for name, us in medians.items():
        print(f"  {name:48s} {'' if us is None else f'{us:7.1f}'}")


def pieces_apart(width: int, tokens: int, rounds: int, calls: int) -> None:
    """Where a bf16 eval call with the base read apart (the default; Triton, launch stubbed, frozen
    bank) spends its host time: the whole call and the planned repeat's pieces (``EvalPlan.apart``,
    0.7.6), each timed alone, medians over ``rounds``."""
    import torch.nn.functional as F

    layer = build(width, 10, True)
    x = torch.randn(1, tokens, width)
    weight, bias = layer.base.weight, layer.base.bias
    with use_path("triton"), torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        layer(x)  # keeps the bank in bf16, chooses the path, plans the call
        plan = getattr(layer, "_plan", None)
        steps = getattr(plan, "steps", None)
        if steps is None or not hasattr(steps, "cast"):  # (0.7.6: paths.dense.ApartRepeat)
            print("this checkout plans no call that reads the base apart")
            return
        rows = x.reshape(-1, width).to(torch.bfloat16)
        cast_weight, cast_bias = weight.to(torch.bfloat16), bias.to(torch.bfloat16)
        proj = torch.mm(rows, steps.keys_t)
        base_out = F.linear(rows, cast_weight, cast_bias)
        by_autocast = not getattr(steps, "cast_base", True)  # (0.7.8: F.linear under autocast casts the base)
        timed = {
            "the whole call": lambda: layer(x),
            "nn.Linear, for scale": lambda: layer.base(x),
            "  the plan's check (EvalPlan.applies)": lambda: plan.applies(layer, x, weight, bias),
            "  steps 1-6 (the plan's ApartRepeat)": lambda: steps(x.reshape(-1, width)),
            "    tokens: reshape and cast": lambda: x.reshape(-1, width).to(torch.bfloat16),
            "    p = A x (mm)": lambda: torch.mm(rows, steps.keys_t),
        }
        if by_autocast:
            timed["    W x + b (linear, autocast casting W and b)"] = lambda: F.linear(rows, weight, bias)
        else:
            timed["    the base's weight and bias cast"] = lambda: (weight.to(torch.bfloat16), bias.to(torch.bfloat16))
            timed["    W x + b (linear)"] = lambda: F.linear(rows, cast_weight, cast_bias)
        timed["    the read-out's launch (ReadOut)"] = lambda: steps.read_out(proj, base_out)
        medians = timed_pieces(timed, rounds, calls)
    print_pieces("base read apart", medians, width, tokens, rounds, calls)


def peft_rows(width: int, tokens: int, rounds: int, calls: int) -> None:
    """The peft layer's eval call over a bf16 base, then over a float32 base under bf16 autocast
    (module docstring), frozen bank, base apart and kept."""
    from moram_avalanche.text.peft_layer import MoRAMTunerLayer
    from moram_avalanche.text.peft_method import MoRAMConfig

    for label, dtype in (("peft", torch.bfloat16), ("peft-fp32", torch.float32)):
        torch.manual_seed(0)
        layer = MoRAMTunerLayer(nn.Linear(width, width).to(dtype), "default",
                                MoRAMConfig(target_modules=["q"]))  # the paper's LLM setting: r 8, k 4, tau 0.1
        layer.base_layer.requires_grad_(False)  # (frozen, as get_peft_model leaves every base layer)
        bank = layer.moram_bank["default"]
        for _ in range(14):  # 15 tasks (a 15-task sequence of the standard CL benchmark): 120 atoms
            bank.expand()
            with torch.no_grad():
                bank.new_values.normal_(std=0.02)
        bank.freeze()
        layer.eval()
        x = torch.randn(1, tokens, width, dtype=dtype)
        for kept in (False, True):
            keep_base_casts(layer, kept)
            moram, linear, ops, linear_ops = measure(layer, x, "triton", dtype == torch.float32, rounds, calls,
                                                     layer.base_layer)
            print(f"{label:10s} {'bf16':5s} {'frozen':9s} {'kept' if kept else 'apart':5s} {moram:9.1f} {linear:9.1f} "
                  f"{moram / linear:6.2f}x  {ops} ({linear_ops})", flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--tokens", type=int, default=8)
    parser.add_argument("--width", type=int, default=768)
    parser.add_argument("--paths", default="triton,dense,reference")
    parser.add_argument("--pieces", action="store_true",
                        help="instead: where the bf16 eval call spends its time, piece by piece, the base kept "
                             "then read apart")
    parser.add_argument("--peft", action="store_true",
                        help="also: the peft layer's call over a bf16 base (a bf16 language model's decode step)")
    parser.add_argument("--train", action="store_true",
                        help="also: a training step's call per path (grad mode on, trainable rows), its forward "
                             "(rows train-fwd) and its forward and backward (train-f+b)")
    parser.add_argument("--instructions", action="store_true",
                        help="instead of microseconds: instructions a call, counted by valgrind's callgrind "
                             "(module docstring; minutes)")
    parser.add_argument("--launch", choices=("stub", "dry"), default="stub",
                        help="the Triton path's kernel launches: stub (no-ops: the call's own host cost) or dry "
                             "(through Triton's launch into a launcher that runs nothing: what a GPU's host adds "
                             "per launch; Triton's compiler, no interpreter: unset TRITON_INTERPRET)")
    parser.add_argument("--counted-run", action="store_true", help=argparse.SUPPRESS)  # (--instructions' own run)
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parser.parse_args(argv)
    if args.instructions and args.pieces:
        parser.error("--instructions counts whole calls; --pieces times their pieces: ask for one of them")
    if args.instructions:
        return counted_rows([arg for arg in argv if arg != "--instructions"], args.calls)
    COUNTED["run"] = args.counted_run
    torch.set_num_threads(args.threads)
    if args.launch == "dry":
        with dry_launches():
            return run_rows(args)
    stub_triton()
    return run_rows(args)


def run_rows(args) -> None:
    """The rows ``args`` ask for, the launches stubbed or dry (:func:`main`)."""
    if args.pieces:
        pieces(args.width, args.tokens, args.rounds, args.calls)
        pieces_apart(args.width, args.tokens, args.rounds, args.calls)
        return
    x = torch.randn(1, args.tokens, args.width)
    print(f"torch {torch.__version__}, {args.threads} thread(s); {args.width} -> {args.width}, 160 atoms, "
          f"{args.tokens} tokens; medians of {args.rounds} rounds x {args.calls} calls, interleaved with nn.Linear")
    print(f"{'path':10s} {'dtype':5s} {'bank':9s} {'base':5s} {'MoRAM us':>9s} {'Linear us':>9s} {'ratio':>6s}  "
          "ops (Linear's)")
    for path in args.paths.split(","):
        for frozen in (True, False):
            layer = build(args.width, 10, frozen)
            for kept in (False, True) if keep_base_casts is not None else (False,):
                if keep_base_casts is not None:
                    keep_base_casts(layer, kept)
                for amp in (False, True):
                    moram, linear, ops, linear_ops = measure(layer, x, path, amp, args.rounds, args.calls)
                    print(f"{path:10s} {'bf16' if amp else 'fp32':5s} {'frozen' if frozen else 'trainable':9s} "
                          f"{'kept' if kept else 'apart':5s} {moram:9.1f} {linear:9.1f} {moram / linear:6.2f}x  "
                          f"{ops} ({linear_ops})", flush=True)
        if args.train:
            training_rows(path, args.width, x, args.rounds, args.calls)
    if args.peft:
        peft_rows(args.width, args.tokens, args.rounds, args.calls)


#: a row of the counted run (``--instructions``): its columns of microseconds are nan
COUNTED_ROW = re.compile(r"^(\S+)\s+(fp32|bf16)\s+(frozen|trainable|train-fwd|train-f\+b)\s+(kept|apart)\s+nan\s+nan"
                         r"\s+nanx\s+(\d+) \((\d+)\)$")


def dump_total(dump: Path) -> int:
    """The instructions a callgrind dump counted (its ``totals:`` line, else ``summary:``)."""
    found = re.search(r"^(?:totals|summary):\s+(\d+)", dump.read_text(), re.M)
    if found is None:
        raise ValueError(f"{dump} holds no 'totals:' or 'summary:' line: not a callgrind dump?")
    return int(found.group(1))


#: the function whose instructions, its callees' included, are a counted call's matrix arithmetic
#: (:func:`dump_arithmetic`): PyTorch's CPU GEMM, every dtype's overload, its BLAS call included
ARITHMETIC = "at::native::cpublas::gemm("

_NAMED = re.compile(r"^(c?fn)=(?:\((\d+)\))? ?(.*)$")


def dump_arithmetic(dump: Path, prefix: str = ARITHMETIC) -> int:
    """The instructions a callgrind dump counted inside the functions named ``prefix...``, their
    callees included, a call from one of them into another counted once (at the outer): the sum of
    the inclusive costs of the calls made into them from elsewhere, read from the dump's call
    records (a ``cfn=`` line, a ``calls=`` line, then the call's position(s) and its inclusive cost
    of the first event), with callgrind's compressed names (``(id) name`` at first use, ``(id)``
    after) or plain ones."""
    names, caller, callee, total, positions, call = {}, "", "", 0, 1, False
    with open(dump) as lines:
        for line in lines:
            if call:
                call = False
                if callee.startswith(prefix) and not caller.startswith(prefix):
                    total += int(line.split()[positions])
                continue
            named = _NAMED.match(line.rstrip("\n")) if line.startswith(("fn=", "cfn=")) else None
            if named is not None:
                kind, ident, name = named.groups()
                if ident is not None:
                    name = names.setdefault(ident, name) if name else names.get(ident, "")
                if kind == "fn":
                    caller = name
                else:
                    callee = name
            elif line.startswith("calls="):
                call = True
            elif line.startswith("positions:"):  # ("line" by default; "instr line" gives two)
                positions = len(line.split()) - 1
    return total


#: fewer instructions a call than any module's (``nn.Linear``'s call executes tens of thousands): a dump
#: below ``calls`` times this is some other ``functools.reduce`` (an import's), not a counted loop
LOOP_FLOOR = 5000


def counted_table(stdout: str, totals: list, calls: int, arithmetic: Optional[list] = None) -> list:
    """``[(path, dtype, bank, base, MoRAM, Linear, ratio, ratio without the GEMMs' arithmetic, ops,
    Linear's ops)]``: the counted run's rows (``stdout``) with the instructions a call of each, from
    ``totals``, the dumps' counts in order, and ``arithmetic``, the instructions of each dump's matrix
    products (:func:`dump_arithmetic`; None: none taken). The loops are the dumps of at least
    ``LOOP_FLOOR`` instructions a call (an import's ``functools.reduce`` is dumped too, between rows
    where a row imports), two a row in order: MoRAM's, then the Linear's."""
    rows = [match.groups() for match in map(COUNTED_ROW.match, stdout.splitlines()) if match]
    arithmetic = [0] * len(totals) if arithmetic is None else arithmetic
    if len(arithmetic) != len(totals):
        raise ValueError(f"{len(totals)} dumps' totals but {len(arithmetic)} dumps' arithmetic: give one of each a dump")
    loops = [(total, gemm) for total, gemm in zip(totals, arithmetic) if total >= LOOP_FLOOR * calls]
    if not rows or len(loops) != 2 * len(rows):
        raise ValueError(f"{len(rows)} rows and {len(loops)} counted loops ({len(totals)} dumps): each row needs "
                         "two (is valgrind's --toggle-collect=functools_reduce matching?)")
    table = []
    for row, (moram, moram_gemm), (linear, linear_gemm) in zip(rows, loops[::2], loops[1::2]):
        path, dtype, bank, base, ops, linear_ops = row
        table.append((path, dtype, bank, base, moram / calls, linear / calls, moram / linear,
                      (moram - moram_gemm) / (linear - linear_gemm), ops, linear_ops))
    return table


def counted_rows(argv: list, count: int) -> None:
    """``--instructions``: this script again with ``argv``, under callgrind (each measurement one
    counted loop of ``count`` calls), then its rows with the instructions a call of MoRAM and of the
    Linear, in thousands, and their ratio."""
    if shutil.which("valgrind") is None:
        raise SystemExit("--instructions counts with valgrind's callgrind, which is not installed here (Debian: "
                         "apt-get install valgrind); without --instructions the calls are timed")
    if "dry" in argv:  # (--launch dry: the kernels compiled first, outside callgrind; the counted run loads them)
        warm = subprocess.run([sys.executable, str(Path(__file__).resolve()), *argv, "--rounds", "1", "--calls", "1"],
                              capture_output=True, text=True)
        if warm.returncode != 0:
            raise SystemExit(f"the run compiling the kernels failed (exit {warm.returncode}):\n{warm.stderr[-3000:]}")
    with tempfile.TemporaryDirectory() as folder:
        out_file = Path(folder) / "callgrind.out"
        command = ["valgrind", "--tool=callgrind", "--collect-atstart=no", "--toggle-collect=functools_reduce",
                   "--dump-after=functools_reduce", f"--callgrind-out-file={out_file}", sys.executable,
                   str(Path(__file__).resolve()), *argv, "--counted-run"]
        print(f"counting under callgrind (a few minutes): {' '.join(command[:6])} ...", flush=True)
        # (string hashes seeded once: attribute lookups probe the same dictionary slots from run to run)
        run = subprocess.run(command, capture_output=True, text=True,
                             env={**os.environ, "PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED", "0")})
        if run.returncode != 0:
            raise SystemExit(f"the counted run failed (exit {run.returncode}):\n{run.stderr[-3000:]}")
        dumps = sorted(Path(folder).glob("callgrind.out.*"), key=lambda dump: int(dump.suffix[1:]))
        table = counted_table(run.stdout, [dump_total(dump) for dump in dumps], count,
                              [dump_arithmetic(dump) for dump in dumps])
    print(f"torch {torch.__version__}; thousands of instructions a call (callgrind, one loop of {count} calls "
          "each), beside nn.Linear's; no GEMM: the ratio without the matrix products' arithmetic (module docstring)")
    print(f"{'path':10s} {'dtype':5s} {'bank':9s} {'base':5s} {'MoRAM ki':>9s} {'Linear ki':>9s} {'ratio':>6s} "
          f"{'no GEMM':>7s}  ops (Linear's)")
    for path, dtype, bank, base, moram, linear, ratio, bare, ops, linear_ops in table:
        print(f"{path:10s} {dtype:5s} {bank:9s} {base:5s} {moram / 1e3:9.1f} {linear / 1e3:9.1f} {ratio:6.2f}x "
              f"{bare:6.2f}x  {ops} ({linear_ops})", flush=True)


if __name__ == "__main__":
    main()
