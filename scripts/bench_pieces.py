"""The pieces of one MoRAM layer call, each a function that can be timed by every clock of ``bench_timing``.

A MoRAM layer's eval call on the GPU's dense path is, in order (``layers/moram/paths/dense.py``):
the input cast to the compute dtype (autocast's), the bank's rows in that dtype
(``MoRAMBank.rows``: the frozen rows cast once and kept, the trainable ones cast and joined per
call), the base GEMM ``W x + b`` (its weight cast per call under autocast: a frozen weight is not
in autocast's cache), ``p = A x``, the router's steps 2-5 (``c = w * p``, one ``Router`` per
implementation: PyTorch's or Triton's), and the read-out ``y += c B``; a training step adds the
router's backward and ``dL/dc = g B^T``. :data:`PIECES` builds each of them, and the whole layer
(on each path the switch offers, a frozen bank and one whose last task trains, and a training
step), from one :class:`Case`: a layer shape, a token count, a bank and a dtype.

Timing each piece replayed from a CUDA graph gives its GPU time alone; the whole layer against
the sum of its pieces then shows what the host adds. A piece this version of the library does
not have (a name that moved, a router that is gone) is reported as not in this version, with the
error, never a crash: the profile keeps working while the layer changes.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Callable, Dict, Optional, Tuple, Union

import torch
import torch.nn.functional as F
from bench_timing import autocast_to
from torch import nn


@dataclass(frozen=True)
class Case:
    """One layer call to take apart: ``d_in -> d_out`` on ``tokens`` tokens, a bank of ``atoms`` atoms
    (``per_task`` a task, the last task's trainable in the training layer), the routing
    ``topk``, ``temperature``, ``threshold``, computed in ``dtype`` (``float32``, or ``bfloat16``
    autocast) by a model that holds its weights and activations in ``model_dtype`` (``float32``: a
    CLIP under AMP, every call casting its input and weight; ``bfloat16``: a bf16 language model)."""

    label: str
    d_in: int
    d_out: int
    tokens: int
    atoms: int = 160
    per_task: int = 16
    topk: int = 16
    temperature: float = 0.01
    threshold: float = 0.2
    dtype: str = "bfloat16"
    model_dtype: str = "float32"


#: the ViT-B/16 tower's linears at batch 64 (the paper's CLIP setting: r 16, k 16, tau 0.01, delta 0.2;
#: 10 tasks) and LLaMA-1B's q and k projections at one decode step of 8 sequences (the paper's LLM
#: setting: r 8, k 4, tau 0.1; 15 tasks)
TOWER_CASES = tuple(Case(f"tower {d_in}->{d_out}", d_in, d_out, 64 * 197, dtype=dtype)
                    for dtype in ("bfloat16", "float32") for d_in, d_out in ((768, 768), (768, 3072), (3072, 768)))
DECODE_CASES = tuple(Case(f"decode {d_in}->{d_out}", d_in, d_out, 8, atoms=120, per_task=8, topk=4, temperature=0.1,
                          model_dtype="bfloat16") for d_in, d_out in ((2048, 2048), (2048, 512)))
#: ``--quick``: tiny layers (every figure meaningless; checks the script)
QUICK_CASES = (Case("quick 32->32", 32, 32, 6, atoms=32), Case("quick 32->64", 32, 64, 6, atoms=32, dtype="float32"),
               Case("quick decode 32->16", 32, 16, 2, atoms=24, per_task=8, topk=4, temperature=0.1,
                    model_dtype="bfloat16"))


class NotHere(Exception):
    """A piece that cannot be built here: this version of the library lacks it, or this device cannot run it."""


def moram_layer(case: Case, device, frozen: bool):
    """A ``MoRAMLinear`` of ``case`` on ``device`` in ``case.model_dtype``: ``case.atoms`` atoms with values
    N(0, 0.02^2) (so the read-out is not zero), every atom frozen (``frozen``) or the last task's trainable."""
    from moram_avalanche.layers.moram.layer import MoRAMLinear

    torch.manual_seed(0)
    layer = MoRAMLinear(nn.Linear(case.d_in, case.d_out), atoms_per_task=case.per_task, topk=case.topk,
                        temperature=case.temperature, threshold=case.threshold)
    for _ in range(case.atoms // case.per_task):
        layer.expand()
        with torch.no_grad():
            layer.new_values.normal_(std=0.02)
    if frozen:
        layer.freeze()
    return layer.to(device=device, dtype=getattr(torch, case.model_dtype))


def context(case: Case, device) -> SimpleNamespace:
    """What the pieces of ``case`` read: both layers, the input, and the tensors one call computes."""
    dtype = getattr(torch, case.dtype)
    frozen = moram_layer(case, device, frozen=True).eval()
    training = moram_layer(case, device, frozen=False)
    x_in = torch.randn(case.tokens, case.d_in, device=device).to(getattr(torch, case.model_dtype))
    ctx = SimpleNamespace(case=case, device=torch.device(device), dtype=dtype, frozen=frozen, training=training,
                          x_in=x_in, x=x_in.to(dtype), grad=torch.randn(case.tokens, case.d_out, device=device))
    ctx.weight = frozen.base.weight.detach().to(dtype)
    ctx.bias = frozen.base.bias.detach().to(dtype)
    return ctx


def bank_rows(ctx) -> Tuple[torch.Tensor, torch.Tensor]:
    """The frozen layer's keys ``A`` ``[R, d_in]`` and values ``B`` ``[R, d_out]`` in the compute dtype."""
    rows = ctx.frozen.rows(ctx.dtype)
    return rows.keys, rows.values


def routers() -> Dict[str, object]:
    """The dense path's routers this version has (every ``Router`` its module defines), by name."""
    try:
        from moram_avalanche.layers.moram.paths import dense
        kind = dense.Router
    except (ImportError, AttributeError) as error:
        raise NotHere(f"not in this version: no Router in layers.moram.paths.dense ({error})") from None
    return {value.name: value for value in vars(dense).values() if isinstance(value, kind)}


def route(router, proj, case, saving: bool):
    """``router.forward`` on ``proj`` with ``case``'s routing; ``saving``: a backward will follow (a
    version whose routers take no ``saving`` flag, before 0.7, is called without it)."""
    args = (proj, case.topk, case.temperature, case.threshold, False)
    takes_saving = len(inspect.signature(router.forward).parameters) > len(args)
    return router.forward(*args, saving) if takes_saving else router.forward(*args)


def routed(ctx, router) -> tuple:
    """``(p, c, state)`` of ``router`` on ``ctx``'s input, computed once (a NotHere if it cannot run here)."""
    keys, _ = bank_rows(ctx)
    proj = F.linear(ctx.x, keys)
    case = ctx.case
    try:
        coef, state, _ = route(router, proj, case, saving=True)  # its state feeds the backward piece
    except Exception as error:  # a router this device cannot run (Triton without CUDA, say)
        raise NotHere(f"cannot run here: {type(error).__name__}: {str(error).splitlines()[0][:90]}") from None
    return proj, coef, state


def whole(layer, ctx, training: bool = False, path: Optional[str] = None) -> Callable:
    """One call of ``layer`` as a model makes it (the model's input, under autocast to the compute dtype;
    ``training``: with its backward), on ``path`` when given."""
    from moram_avalanche.layers.moram.paths import use_path

    layer.train(training)
    forced = (lambda: use_path(path)) if path else contextlib.nullcontext

    def run():
        with forced(), autocast_to(ctx.device, ctx.dtype):
            if not training:
                with torch.inference_mode():
                    return layer(ctx.x_in)
            inp = ctx.x_in.detach().requires_grad_()
            out = layer(inp)
        out.backward(ctx.grad.to(out.dtype))
        for parameter in layer.parameters():
            parameter.grad = None
    return run


def path_calls(ctx) -> Dict[str, Union[Callable, str]]:
    """The frozen layer's eval call on each path of the switch: a function, or why it cannot run here."""
    from moram_avalanche.layers.moram.paths import PATHS, mixture_for, use_path

    calls = {}
    for path in PATHS:
        with use_path(path):
            try:
                mixture_for(ctx.x, ctx.frozen.num_atoms, ctx.case.topk, gated=True)
            except RuntimeError as error:
                calls[f"MoRAMLinear eval, frozen bank, path {path}"] = "cannot run here: " + str(error).split(
                    "cannot run here: ", 1)[-1][:110]
                continue
        calls[f"MoRAMLinear eval, frozen bank, path {path}"] = whole(ctx.frozen, ctx, path=path)
    return calls


def _base_kept(ctx):
    """The frozen layer's eval call with its base's copy kept (``keep_base_casts``): on the GPU paths the
    base and the keys in one GEMM (``layers.moram.stacked``), the call planned after the first
    (``layers.moram.plan``)."""
    try:
        from moram_avalanche.layers.moram.layer import keep_base_casts
    except ImportError:
        raise NotHere("not in this version: no keep_base_casts") from None
    layer = copy.deepcopy(ctx.frozen)
    keep_base_casts(layer)
    return whole(layer, ctx)


def _cast_x(ctx):
    if ctx.x_in.dtype == ctx.dtype:
        raise NotHere(f"nothing to cast: the input is {str(ctx.dtype)[6:]} already")
    return lambda: ctx.x_in.to(ctx.dtype)


def _cast_weight(ctx):
    if ctx.frozen.base.weight.dtype == ctx.dtype:
        raise NotHere(f"nothing to cast: the weight is {str(ctx.dtype)[6:]} already")
    return lambda: ctx.frozen.base.weight.to(ctx.dtype)


def _base_gemm(ctx):
    return lambda: F.linear(ctx.x, ctx.weight, ctx.bias)


def _projections(ctx):
    keys, _ = bank_rows(ctx)
    return lambda: F.linear(ctx.x, keys)


def _read_out(ctx):
    _, values = bank_rows(ctx)
    router = next(iter(routers().values()))
    _, coef, _ = routed(ctx, router)
    out = F.linear(ctx.x, ctx.weight, ctx.bias)
    return lambda: out.addmm_(coef, values)


def _grad_coef(ctx):
    _, values = bank_rows(ctx)
    grad = ctx.grad.to(ctx.dtype)
    return lambda: grad @ values.t()


def _router_pieces(ctx) -> Dict[str, Union[Callable, str]]:
    """Each router's forward (steps 2-5) and backward on the frozen layer's projections."""
    pieces = {}
    case = ctx.case
    for name, router in routers().items():
        try:
            proj, coef, state = routed(ctx, router)
        except NotHere as why:
            pieces[f"  routing, {name} router"] = pieces[f"  routing backward, {name} router"] = str(why)
            continue
        grad_coef = torch.randn_like(coef)
        pieces[f"  routing, {name} router"] = (
            lambda router=router, proj=proj: route(router, proj, case, saving=False))
        pieces[f"  routing backward, {name} router"] = (
            lambda router=router, proj=proj, state=state, grad_coef=grad_coef: router.backward(
                grad_coef, proj, state, case.topk, case.temperature, None, True))
    return pieces


#: name -> ``build(ctx) -> fn`` (or a NotHere saying why not) of each piece, in a call's order
PIECES: Dict[str, Callable] = {
    "nn.Linear, the base alone": lambda ctx: whole(ctx.frozen.base, ctx),
    "MoRAMLinear eval, frozen bank (the library's path)": lambda ctx: whole(ctx.frozen, ctx),
    "MoRAMLinear eval, frozen bank, base kept (stacked, planned)": _base_kept,
    "MoRAMLinear eval, last task trainable": lambda ctx: whole(ctx.training, ctx),
    "MoRAMLinear training step (forward + backward)": lambda ctx: whole(ctx.training, ctx, training=True),
    "  cast x to the compute dtype": _cast_x,
    "  cast W to the compute dtype (autocast, every call)": _cast_weight,
    "  bank rows, frozen bank": lambda ctx: (lambda: ctx.frozen.rows(ctx.dtype)),
    "  bank rows, last task trainable (cast + join)": lambda ctx: (lambda: ctx.training.rows(ctx.dtype)),
    "  base GEMM W x + b": _base_gemm,
    "  p = A x": _projections,
    "  read-out y += c B": _read_out,
    "  dL/dc = g B^T (backward)": _grad_coef,
}
#: builders of several pieces at once (``ctx -> {name: fn or why not}``): the paths, the routers
PIECE_GROUPS = (path_calls, _router_pieces)


def pieces(ctx) -> Dict[str, Union[Callable, str]]:
    """Every piece of ``ctx``'s call: ``{name: fn}``, or ``{name: why it is not here}``."""
    built = {}
    for name, build in PIECES.items():
        try:
            built[name] = build(ctx)
        except NotHere as why:
            built[name] = str(why)
        except (AttributeError, ImportError, TypeError) as error:  # the library changed under the profile
            built[name] = f"not in this version: {type(error).__name__}: {str(error).splitlines()[0][:90]}"
    for group in PIECE_GROUPS:
        try:
            built.update(group(ctx))
        except NotHere as why:
            built[group.__name__] = str(why)
        except (AttributeError, ImportError, TypeError) as error:
            built[group.__name__] = f"not in this version: {type(error).__name__}: {str(error).splitlines()[0][:90]}"
    return built


def time_pieces(ctx, repeats: int, calls: int) -> Dict[str, dict]:
    """``{piece: {clock: seconds per call or None, "host": seconds to queue one, "why": ...}}`` of
    every piece of ``ctx``, each timed by every clock of ``bench_timing`` and :func:`~bench_timing.host_enqueue`."""
    from bench_timing import host_enqueue, time_clocks

    built = pieces(ctx)
    runnable = {name: fn for name, fn in built.items() if callable(fn)}
    times, notes = time_clocks(runnable, repeats, ctx.device, calls=calls)
    host = host_enqueue(runnable, repeats, ctx.device, calls)
    result = {}
    for name, fn in built.items():
        if not callable(fn):
            result[name] = {"why": fn}
            continue
        result[name] = {clock: values[name] for clock, values in times.items()}
        result[name]["host"] = host[name]
        why = [reason for key, reason in notes.items() if key.endswith(f" {name}")]
        if why:
            result[name]["why"] = "; ".join(sorted(set(why)))
    return result


def reproduces_the_layer(ctx, router_name: Optional[str] = None) -> float:
    """The largest difference between the frozen layer's eval output and the output its pieces
    compute (base GEMM, ``p = A x``, ``router_name``'s routing or the first router, read-out), in the
    compute dtype: the pieces time what the layer does only if this is rounding-small."""
    chosen = routers()
    router = chosen[router_name] if router_name else next(iter(chosen.values()))
    _, values = bank_rows(ctx)
    with torch.inference_mode():
        _, coef, _ = routed(ctx, router)
        pieces_out = F.linear(ctx.x, ctx.weight, ctx.bias).addmm_(coef, values)
        with autocast_to(ctx.device, ctx.dtype):
            layer_out = ctx.frozen.eval()(ctx.x_in)
    return float((pieces_out.float() - layer_out.float()).abs().max())


__all__ = ["Case", "DECODE_CASES", "NotHere", "PIECES", "PIECE_GROUPS", "QUICK_CASES", "TOWER_CASES",
           "bank_rows", "context", "moram_layer", "path_calls", "pieces", "reproduces_the_layer", "routed", "routers",
           "time_pieces", "whole"]
