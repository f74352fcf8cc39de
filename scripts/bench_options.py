"""Each option for a cheaper MoRAM call: its micro-benchmark, and whether this version of the library has it.

The options the issue "GPU path II" weighs for the per-call cost (lettered as the project's GPU
profiling tool letters them), each timed here as a prototype in plain PyTorch against what a
call does today, on the pieces of :mod:`bench_pieces` (one :class:`~bench_pieces.Case`), by every
clock of ``bench_timing`` -- the ratio option / today is what the option would save:

* (a) the base GEMM and ``p = A x`` as one GEMM over ``[W; A]`` (one read of ``x``);
* (b) q, k and v and their keys in one GEMM over ``[Wq; Wk; Wv; Aq; Ak; Av]`` (one cast and one
  read of the block's input for three layers; square layers only);
* (c) the read-out folded into the base GEMM: ``[x c] [W | B^T]^T`` (no second pass over ``y``);
* (f) a call replayed from a CUDA graph against the same call queued eagerly (what a captured
  or compiled ``reduce-overhead`` step saves per call: the host's launches);
* (g) the bank joined once: the rows of a bank whose last task trains, cast and joined at every
  call today, against a bank's rows already joined.

Whether the library has an option is read from what it does, not from names it might use
(:data:`OPTIONS`' probes): GEMMs dispatched per eval call of a layer and per residual block
(``count_ops.Count``), whether the bank's rows are the same tensors from one call to the next.
An option the layer exposes as a switch is found by reading ``MoRAMLayerConfig``'s fields and
``MoRAMLinear``'s arguments for any beyond this version's four (:func:`layer_switches`); a
boolean one is timed on against off (:func:`switch_benchmarks`). Nothing here fails on a version
that lacks an option: it prints a "not in this version" line.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional

import torch
import torch.nn.functional as F
from bench_pieces import NotHere, bank_rows, routed, routers, whole

#: the layer's options in this version (``MoRAMLayerConfig``'s fields; the paper's four numbers)
KNOWN_OPTIONS = ("atoms_per_task", "topk", "temperature", "threshold")
#: GEMMs one eval call makes in this version: the base, ``p = A x`` and the read-out
GEMMS_TODAY = 3


def per_clock(times: Dict[str, Dict[str, Optional[float]]]) -> Dict[str, Optional[float]]:
    """``{clock: option / today}``: the option and today timed alike, by each clock."""
    from bench_timing import ratio

    return {clock: ratio(t["option"], t["today"]) for clock, t in times.items()}


def graph_over_queued(times: Dict[str, Dict[str, Optional[float]]]) -> Dict[str, Optional[float]]:
    """``{"graph / back-to-back": ...}``: one call replayed from a CUDA graph against the same call queued."""
    from bench_timing import ratio

    return {"graph / back-to-back": ratio(times["graph"]["option"], times["back-to-back"]["today"])}


@dataclass(frozen=True)
class Option:
    """One option: its letter, what it is, ``micro(ctx) -> {"today": fn, "option": fn}`` (a NotHere
    where it does not apply), ``probe(ctx) -> "in this version: ..." or "not in this version: ..."``,
    and ``compare(times) -> {label: ratio}`` of the two as the clocks timed them."""

    key: str
    title: str
    micro: Callable
    probe: Callable
    compare: Callable = per_clock


def gemms(fn: Callable[[], object]) -> int:
    """GEMMs (``count_ops.GEMMS``) dispatched by one call of ``fn``."""
    from count_ops import GEMMS, Count

    with Count() as count:
        fn()
    return sum(count.ops[name] for name in GEMMS)


def gpu_path(device) -> Optional[str]:
    """The path the probes count on: the library's own on a GPU; on the CPU the GPU's dense path
    (the options are for the GPU: the CPU's sparse path reads out by ``embedding_bag``, not a GEMM)."""
    return None if torch.device(device).type == "cuda" else "dense"


def gemms_per_call(ctx) -> int:
    """GEMMs of one eval call of ``ctx``'s frozen layer, as a model calls it, on :func:`gpu_path`."""
    return gemms(whole(ctx.frozen, ctx, path=gpu_path(ctx.device)))


@functools.lru_cache(maxsize=None)
def block_gemms() -> tuple:
    """``(GEMMs of one residual block of the tiny CLIP's image tower with atoms on its six linears, MoRAM
    linears in it)``, eval, frozen bank, on the CPU's :func:`gpu_path`: fewer GEMMs than each linear
    makes alone means layers were fused."""
    import open_clip

    from moram_avalanche.clip.inject import inject_moram
    from moram_avalanche.clip.registry import TINY_CONFIG
    from moram_avalanche.layers.base import find_layers
    from moram_avalanche.layers.moram.layer import MoRAMLinear
    from moram_avalanche.layers.moram.paths import use_path

    torch.manual_seed(0)
    model = open_clip.CLIP(**TINY_CONFIG).eval()
    inject_moram(model, encoders=("visual",))
    block = model.visual.transformer.resblocks[0]
    for layer in find_layers(block, MoRAMLinear).values():
        layer.expand()
        layer.expand()
        layer.freeze()
    width = TINY_CONFIG["vision_cfg"]["width"]
    tokens = torch.randn(2, 17, width)
    with torch.inference_mode(), use_path(gpu_path("cpu")):
        count = gemms(lambda: block(tokens))
    return count, len(find_layers(block, MoRAMLinear))


# ---------------------------------------------------------------- micro-benchmarks
def _micro_a(ctx):
    keys, _ = bank_rows(ctx)
    joined = torch.cat([ctx.weight, keys])
    bias = torch.cat([ctx.bias, ctx.bias.new_zeros(keys.shape[0])])
    return {"today": lambda: (F.linear(ctx.x, ctx.weight, ctx.bias), F.linear(ctx.x, keys)),
            "option": lambda: F.linear(ctx.x, joined, bias)}


def _micro_b(ctx):
    case = ctx.case
    if case.d_in != case.d_out:
        raise NotHere("q, k, v are square layers: not this shape")
    keys, _ = bank_rows(ctx)
    stacked = torch.cat([ctx.weight] * 3 + [keys] * 3)
    bias = torch.cat([ctx.bias] * 3 + [ctx.bias.new_zeros(3 * keys.shape[0])])

    def today():
        for _ in range(3):
            x = ctx.x_in.to(ctx.dtype)
            F.linear(x, ctx.weight, ctx.bias)
            F.linear(x, keys)
    return {"today": today, "option": lambda: F.linear(ctx.x_in.to(ctx.dtype), stacked, bias)}


def _micro_c(ctx):
    _, values = bank_rows(ctx)
    _, coef, _ = routed(ctx, next(iter(routers().values())))
    folded = torch.cat([ctx.weight, values.t()], dim=1).contiguous()
    joined = torch.empty(ctx.case.tokens, ctx.case.d_in + values.shape[0], device=ctx.device, dtype=ctx.dtype)

    def option():
        joined[:, :ctx.case.d_in].copy_(ctx.x_in)  # autocast's cast of x, written into the joined input
        joined[:, ctx.case.d_in:].copy_(coef)      # the router's output, written in place by a fused router
        return F.linear(joined, folded, ctx.bias)
    return {"today": lambda: F.linear(ctx.x_in.to(ctx.dtype), ctx.weight, ctx.bias).addmm_(coef, values),
            "option": option}


def _micro_f(ctx):
    call = whole(ctx.frozen, ctx)
    return {"today": call, "option": call}


def _micro_g(ctx):
    return {"today": lambda: ctx.training.rows(ctx.dtype), "option": lambda: ctx.frozen.rows(ctx.dtype)}


# ---------------------------------------------------------------- probes
def _fused_gemms(ctx) -> str:
    count, where = gemms_per_call(ctx), gpu_path(ctx.device) or "the library's"
    if count < GEMMS_TODAY:
        return (f"in this version: {count} GEMMs per eval call on the {where} path (was {GEMMS_TODAY}: base, "
                "p = A x, read-out)")
    return f"not in this version: {count} GEMMs per eval call on the {where} path (base, p = A x, read-out)"


def _fused_block(ctx) -> str:
    count, linears = block_gemms()
    per_layer = gemms_per_call(ctx)
    if count < per_layer * linears:
        return f"in this version: {count} GEMMs for a block's {linears} MoRAM linears ({per_layer} each alone)"
    return f"not in this version: {count} GEMMs for a block's {linears} MoRAM linears ({per_layer} each)"


def _graphs(ctx) -> str:
    return ("not in this version: the library queues each call eagerly; a CUDA graph is the caller's "
            "(torch.compile mode 'reduce-overhead', torch.cuda.graph), which the graph clock measures")


def _joined_once(ctx) -> str:
    first, second = ctx.training.rows(ctx.dtype), ctx.training.rows(ctx.dtype)
    if first.keys is second.keys and first.values is second.values:
        return "in this version: a bank whose last task trains gives the same joined rows to every call"
    return "not in this version: a bank whose last task trains is cast and joined at every call"


#: the options (module docstring), by letter
OPTIONS: Dict[str, Option] = {option.key: option for option in (
    Option("a", "one GEMM over [W; A]: the base and p = A x together", _micro_a, _fused_gemms),
    Option("b", "q, k, v and their keys in one GEMM (one cast, one read of x)", _micro_b, _fused_block),
    Option("c", "the read-out folded into the base GEMM: [x c] [W | B^T]^T", _micro_c, _fused_gemms),
    Option("f", "the call replayed from a CUDA graph, against queued eagerly", _micro_f, _graphs, graph_over_queued),
    Option("g", "the bank joined once, not cast and joined per call", _micro_g, _joined_once),
)}


# ---------------------------------------------------------------- switches the layer exposes
def layer_switches() -> Dict[str, object]:
    """Options of the layer beyond this version's four (:data:`KNOWN_OPTIONS`), by name, with their
    defaults: ``MoRAMLayerConfig``'s fields and ``MoRAMLinear``'s keyword arguments."""
    from moram_avalanche.layers.moram.config import MoRAMLayerConfig
    from moram_avalanche.layers.moram.layer import MoRAMLinear

    found = {field.name: field.default for field in dataclasses.fields(MoRAMLayerConfig)}
    for name, parameter in inspect.signature(MoRAMLinear.__init__).parameters.items():
        if name not in ("self", "base") and parameter.kind is not inspect.Parameter.VAR_KEYWORD:
            found.setdefault(name, parameter.default)
    return {name: default for name, default in found.items() if name not in KNOWN_OPTIONS}


def switch_benchmarks(ctx) -> Dict[str, object]:
    """``{switch: {"today": fn (off), "option": fn (on)}, or why it is not timed}`` for each boolean switch
    of :func:`layer_switches`: the frozen layer's eval call built with it off and on."""
    import copy

    from moram_avalanche.layers.moram.layer import MoRAMLinear

    result = {}
    for name, default in layer_switches().items():
        if not isinstance(default, bool):
            result[name] = f"found (default {default!r}); not a boolean switch, not timed"
            continue
        calls = {}
        for label, value in (("today", False), ("option", True)):
            try:
                layer = MoRAMLinear(copy.deepcopy(ctx.frozen.base), **dict(ctx.frozen.options, **{name: value}))
            except TypeError as error:
                calls = f"found in MoRAMLayerConfig, but MoRAMLinear does not take it: {error}"
                break
            layer.load_state_dict(ctx.frozen.state_dict())
            calls[label] = whole(layer.to(ctx.device).eval(), ctx)
        result[name] = calls
    return result


def measure(ctx, repeats: int, calls: int, keys: Optional[List[str]] = None) -> Dict[str, dict]:
    """``{option: {"title", "probe", "ratios": {label: option / today or None}, "today_s", "why"}}`` for
    ``ctx`` (every option, or ``keys``), then each switch of the layer as ``"switch NAME"`` (or one
    ``"switches"`` entry saying there is none)."""
    from bench_timing import time_clocks

    result, benchmarks = {}, {}
    for key in keys or OPTIONS:
        option = OPTIONS[key]
        try:
            probe = option.probe(ctx)
        except Exception as error:  # a probe of a changed library says so and the others go on
            probe = f"not probed: {type(error).__name__}: {str(error).splitlines()[0][:90]}"
        result[key] = {"title": option.title, "probe": probe}
        try:
            benchmarks[key] = (option.micro(ctx), option.compare)
        except NotHere as why:
            result[key]["why"] = str(why)
        except (AttributeError, ImportError, TypeError) as error:
            result[key]["why"] = f"not in this version: {type(error).__name__}: {str(error).splitlines()[0][:90]}"
    switches = switch_benchmarks(ctx)
    for name, calls_or_why in switches.items():
        result[f"switch {name}"] = {"title": f"the layer's switch {name} (found by reading its options)",
                                    "probe": "in this version"}
        if isinstance(calls_or_why, dict):
            benchmarks[f"switch {name}"] = (calls_or_why, per_clock)
        else:
            result[f"switch {name}"]["why"] = calls_or_why
    if not switches:
        result["switches"] = {"title": "the layer's own switches beyond " + ", ".join(KNOWN_OPTIONS),
                              "probe": "not in this version: MoRAMLayerConfig and MoRAMLinear take only those"}
    for key, (fns, compare) in benchmarks.items():
        times, notes = time_clocks(fns, repeats, ctx.device, calls=calls)
        result[key]["ratios"] = compare(times)
        result[key]["today_s"] = {clock: t["today"] for clock, t in times.items()}
        if notes:
            result[key]["why"] = "; ".join(sorted(set(notes.values())))
    return result


__all__ = ["GEMMS_TODAY", "KNOWN_OPTIONS", "OPTIONS", "Option", "block_gemms", "gemms", "gemms_per_call", "gpu_path",
           "graph_over_queued", "layer_switches", "measure", "per_clock", "switch_benchmarks"]
