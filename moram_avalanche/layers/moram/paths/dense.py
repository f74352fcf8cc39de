"""The GPU path of MoRAM's layer: no host synchronisation, a dense read-out, routing by PyTorch or Triton.

The same six steps as :mod:`~moram_avalanche.layers.moram.paths.reference` (which states them),
in another form. The reference path's gathered ``[N, k]`` routing and ``embedding_bag`` read-out,
which skips the eval gate's zero terms, suit the CPU; on a GPU the skipping costs more than it
saves (boolean indexing waits for the device in every layer call, and ``embedding_bag`` runs in
float32 whatever the autocast dtype). This path:

* step 1 is one GEMM ``p = A x`` ``[N, R]`` in the compute dtype (autocast's or the input's);
* steps 2-5 write DENSE coefficients ``c = w * p`` ``[N, R]`` (zero off the kept atoms and where
  the gate closes), in float32 arithmetic, by a :class:`Router`: :data:`TORCH_ROUTER` (the
  reference path's :func:`~moram_avalanche.layers.moram.paths.reference.route`, then one
  ``scatter``) or :data:`TRITON_ROUTER` (:mod:`~moram_avalanche.layers.moram.paths.triton`: one
  fused kernel each way);
* step 6 is the base GEMM with its bias and one more GEMM, ``c B``, accumulated into it (the
  official release's read-out, ``(w * p) B^T``), in the compute dtype.

Where no backward follows and the layer keeps its base's copy, :func:`stacked_mixture` takes
steps 1 and the base's ``W x + b`` as ONE GEMM over the stacked ``[W; A]``
(:mod:`~moram_avalanche.layers.moram.stacked`): the tokens are read once, not twice. Where no
backward follows, nothing is recorded and the tokens are few (a decode step's), the Triton router
takes steps 2-6 in one kernel (:func:`fused_read_out`): no dense ``c``, ``B`` read at the kept atoms
only -- with the stacked GEMM, two kernels a layer.

Every shape depends on the bank and the batch, never on the data: no ``nonzero``, no boolean
indexing, no ``.item()``; the calls can be captured in a CUDA graph and traced by
``torch.compile``. The hand-written backward
(:class:`~moram_avalanche.layers.moram.backward.MoRAMFunction`) keeps ``p`` and the router's
state (the PyTorch router's ``[N, k]`` routing; the Triton router's kept columns ``[N, k]`` and
norms ``[N]``, written only when a backward will follow); what differs from
the reference path's is where ``dL/dc`` comes from: ``dL/dc = g B^T``, one GEMM over the bank,
then the router's backward gives ``dL/dp``; the trainable values' gradient reads the dense
``c_tail``.
"""

from __future__ import annotations

import functools
from typing import Callable, NamedTuple, Optional, Tuple

import torch
import torch.nn.functional as F

from ..backward import attach_backward, needs_grad
from ..bank import BankRows
from ..dropped import DroppedTokens
from ..stacked import StackedBase
from . import triton as moram_triton
from .reference import Routing, kept_router_backward, route, route_dtype


class Router(NamedTuple):
    """Who runs steps 2-5 of the dense path, forward and backward.

    ``forward(proj, k, tau, threshold, recording, saving) -> (coef, state, usage)``: dense ``c = w * p``
    in ``proj``'s dtype, the tensors the backward needs besides ``proj`` (``saving``: a backward
    will follow), and what the activation statistics read (``(idx, weights)``, ``idx`` None for
    dense ``[N, R]`` weights).
    ``backward(grad_coef or None, proj, state, k, tau, threshold, want_coef) -> (dL/dp or None,
    c or None)``.
    """

    name: str
    forward: Callable
    backward: Callable
    #: steps 2-6 in one call where no backward follows and nothing is recorded, or None:
    #: ``read_out(proj, base_out or None, values, k, tau, threshold) -> y`` (:func:`fused_read_out`)
    read_out: Optional[Callable] = None


# ---------------------------------------------------------------- the PyTorch router
def _torch_forward(proj, k, temperature, threshold, recording, saving):
    routing = route(proj.to(route_dtype(proj.dtype)), k, temperature, threshold)   # 2.-5. (gathered)
    coef = torch.zeros_like(proj).scatter_(1, routing.idx, (routing.weights * routing.kept_proj).to(proj.dtype))
    return coef, tuple(routing), ((routing.idx, routing.weights) if recording else None)


def _torch_backward(grad_coef, proj, state, k, temperature, threshold, want_coef):
    routing = Routing(*state)
    coef = None
    if want_coef:
        coef = torch.zeros_like(proj).scatter_(1, routing.idx, (routing.weights * routing.kept_proj).to(proj.dtype))
    if grad_coef is None:
        return None, coef
    kept = grad_coef.gather(1, routing.idx).to(routing.norm.dtype)
    grad = kept_router_backward(kept, proj.to(routing.norm.dtype), routing, temperature, threshold)
    return grad.to(proj.dtype), coef


# ---------------------------------------------------------------- the Triton router
def _triton_forward(proj, k, temperature, threshold, recording, saving):
    coef, weights, state = moram_triton.route_forward(proj, k, temperature, threshold, want_weights=recording,
                                                      want_state=saving)
    return coef, state, ((None, weights) if recording else None)


def _triton_backward(grad_coef, proj, state, k, temperature, threshold, want_coef):
    return moram_triton.route_backward(grad_coef, proj, state, k, temperature, threshold, want_coef=want_coef)


TORCH_ROUTER = Router("torch", _torch_forward, _torch_backward)
TRITON_ROUTER = Router("triton", _triton_forward, _triton_backward, moram_triton.run_read_out)

#: device types whose autocast casts ``F.linear``'s floating inputs to its dtype (``linear`` is on
#: the lower-precision list of both, ``torch.amp``'s autocast documentation), and the dtypes it
#: casts (it leaves float64 alone): where :class:`ApartRepeat` leaves the base's cast to it
AUTOCAST_LINEAR = ("cpu", "cuda")
AUTOCAST_CASTS = (torch.float32, torch.float16, torch.bfloat16)


def autocast_casts(device_type: Optional[str], *tensors: Optional[torch.Tensor]) -> bool:
    """Whether autocast on ``device_type`` (None: autocast off) casts each of ``tensors`` (None: an
    absent bias) for ``F.linear`` itself (:data:`AUTOCAST_LINEAR`, :data:`AUTOCAST_CASTS`): the
    one rule by which a planned call apart (:class:`ApartRepeat`) and the peft layer
    (:func:`~moram_avalanche.text.peft_layer.fusable`) leave a base's cast to autocast."""
    return device_type in AUTOCAST_LINEAR and all(t is None or t.dtype in AUTOCAST_CASTS for t in tensors)


def _in_dtype(weight: torch.Tensor, bias: Optional[torch.Tensor], dtype: torch.dtype):
    """``(weight, bias)`` cast to ``dtype`` (a call apart's base, its copy not kept: ``MoRAMRouting.base_in``)."""
    return weight.to(dtype=dtype), None if bias is None else bias.to(dtype=dtype)


def _base_width_error(base_features: int, atom_features: int) -> str:
    """The error of a base whose output is not as wide as the atoms' values (its weight's ``.data``
    swapped for another shape): what the other steps refuse as a shape mismatch, said plainly."""
    return (f"the base computes {base_features} output features but the atoms' values have {atom_features}: "
            "the base's weight was swapped for one of another shape (through .data?); give the layer a base "
            f"with {atom_features} outputs, or wrap the new base in a new MoRAM layer")


# ---------------------------------------------------------------- forward and backward
def dense_forward(router: Router, tokens: torch.Tensor, weight: Optional[torch.Tensor],
                  bias: Optional[torch.Tensor], bank: BankRows, k: int, temperature: float,
                  threshold: Optional[float], recording: bool, saving: bool = False):
    """Steps 1-6 without autograd: ``(y [N, d_out], proj, router state, usage)`` (module docstring;
    ``saving``: a backward will follow, the router keeps what it needs)."""
    if torch.is_grad_enabled():
        if torch.compiler.is_compiling():  # (a graph takes the context manager)
            with torch.no_grad():
                return dense_forward(router, tokens, weight, bias, bank, k, temperature, threshold, recording, saving)
        # torch.no_grad()'s own two calls, without its object and context protocol (about 20 thousand
        # instructions a training call): grad mode was on, and is on again after, raised or not
        torch._C._set_grad_enabled(False)
        try:
            return dense_forward(router, tokens, weight, bias, bank, k, temperature, threshold, recording, saving)
        finally:
            torch._C._set_grad_enabled(True)
    proj = F.linear(tokens, bank.keys) if bank.keys_t is None else torch.mm(tokens, bank.keys_t)  # 1. p = A x
    if not saving and fused_read_out(router, proj, k, recording):                            # 2.-6. in one call
        base_out = None if weight is None else F.linear(tokens, weight, bias)
        if base_out is not None and base_out.shape[1] != bank.values.shape[1]:  # (the kernel reads d_out columns)
            raise ValueError(_base_width_error(base_out.shape[1], bank.values.shape[1]))
        out = router.read_out(proj, base_out, bank.values, k, temperature, threshold)
        return out, proj, (), None
    coef, state, usage = router.forward(proj, k, temperature, threshold, recording, saving)  # 2.-5. c = w p
    if weight is None:
        out = coef @ bank.values                                                     # 6. c B
    else:
        out = F.linear(tokens, weight, bias)                                         #    W x + b
        out.addmm_(coef, bank.values)                                                #    + c B
    return out, proj, state, usage


def dense_mixture(router: Router, tokens: torch.Tensor, weight: Optional[torch.Tensor],
                  bias: Optional[torch.Tensor], bank: BankRows, k: int, temperature: float,
                  threshold: Optional[float], recording: bool, dropped: Optional[DroppedTokens] = None):
    """``(y, idx or None, weights)`` of steps 1-6 with the hand-written backward where a gradient
    is needed (``idx``/``weights``: what :meth:`~moram_avalanche.layers.moram.bank.MoRAMBank.record`
    reads, None when not ``recording``; ``dropped``: the tokens are a dropout of its input,
    :mod:`~moram_avalanche.layers.moram.dropped`, no base then)."""
    saving = needs_grad(tokens, weight, bias, bank, dropped)  # (asked once: the forward changes none of it)
    out, proj, state, usage = dense_forward(router, tokens, weight, bias, bank, k, temperature, threshold,
                                            recording, saving)
    if saving:
        out = attach_backward(out, tokens, weight, bias, bank, proj, state,
                              functools.partial(dense_router_backward, router, k, temperature, threshold), dropped,
                              needed=True)
    idx, weights = usage if usage is not None else (None, None)
    return out, idx, weights


def fused_read_out(router: Router, proj: torch.Tensor, k: int, recording: bool) -> bool:
    """Whether a call without a backward takes steps 2-6 in the router's one read-out call
    (:attr:`Router.read_out`, the Triton router's :func:`~moram_avalanche.layers.moram.paths.triton.route_read_out`):
    nothing recorded, not every atom kept, at most
    :data:`~moram_avalanche.layers.moram.paths.triton.READ_OUT_ROWS` token rows (a decode step's)."""
    return (router.read_out is not None and not recording and k < proj.shape[1]
            and proj.shape[0] <= moram_triton.READ_OUT_ROWS)


def stacked_mixture(router: Router, tokens: torch.Tensor, stacked: StackedBase, k: int, temperature: float,
                    threshold: Optional[float], recording: bool, full: Optional[torch.Tensor] = None):
    """``(y, idx or None, weights)`` of steps 1-6 where no backward follows, the base and the keys in
    ONE GEMM (:mod:`~moram_avalanche.layers.moram.stacked`): ``[W x + b | p] = x [W; A]^T + [b; 0]``,
    the router on the ``p`` view, then ``y = (W x + b) + c B`` in one more GEMM written to a new
    tensor (it reads the base's view once, as ``addmm_`` would read and write it, and ``y`` is
    contiguous). ``full``: that GEMM's output ``[N, d_out + R]`` where a group's one GEMM made it
    (:func:`~moram_avalanche.layers.moram.together.read_together`; a view of its columns)."""
    if full is None:
        weight_keys_t, bias = stacked.weight_keys_t, stacked.bias
        full = torch.mm(tokens, weight_keys_t) if bias is None else torch.addmm(bias, tokens, weight_keys_t)  # 1. + W x + b
    base_out, proj = full.split_with_sizes((stacked.out_features, stacked.num_atoms), 1)
    if fused_read_out(router, proj, k, recording):                                         # 2.-6. in one call
        return router.read_out(proj, base_out, stacked.values, k, temperature, threshold), None, None
    coef, _, usage = router.forward(proj, k, temperature, threshold, recording, False)  # 2.-5. c = w p
    out = torch.addmm(base_out, coef, stacked.values)                                      # 6. + c B
    idx, weights = usage if usage is not None else (None, None)
    return out, idx, weights


def with_triton_router(mixture: Callable, form: Callable) -> bool:
    """Whether ``mixture`` is ``form`` (:func:`dense_mixture`, :func:`stacked_mixture`) with the Triton
    router and nothing else bound, as :func:`~moram_avalanche.layers.moram.paths.choice.mixture_for`
    gives it: what a repeat may bind the one-call read-out of (:func:`stacked_repeat`, :func:`apart_repeat`)."""
    return (isinstance(mixture, functools.partial) and mixture.func is form and len(mixture.args) == 1
            and mixture.args[0] is TRITON_ROUTER and not mixture.keywords)


class StackedRepeat:
    """``stacked_mixture(router, tokens, stacked, k, temperature, threshold, False)[0]`` for one kept
    :class:`~moram_avalanche.layers.moram.stacked.StackedBase`, what a planned eval call repeats
    (:class:`~moram_avalanche.layers.moram.plan.EvalPlan`; issue "GPU path II", item 7: a call's host
    cost): the same operators on the same arguments, with what cannot change from call to call bound
    once (the GEMM's operands, the read-out's constants:
    :class:`~moram_avalanche.layers.moram.paths.triton.ReadOut`, which reads the GEMM's output in
    place where :func:`stacked_mixture` splits it into two views). Where the router has no one-call
    read-out, keeps every atom, or the tokens are more than
    :data:`~moram_avalanche.layers.moram.paths.triton.READ_OUT_ROWS` (read at each call),
    :func:`stacked_mixture` itself. Built by :func:`stacked_repeat`."""

    __slots__ = ("mixture", "stacked", "k", "temperature", "threshold", "weight_keys_t", "bias", "read_out")

    def __init__(self, mixture: Callable, stacked: StackedBase, k: int, temperature: float,
                 threshold: Optional[float], fused: bool):
        self.mixture, self.stacked, self.k, self.temperature, self.threshold = mixture, stacked, k, temperature, threshold
        self.weight_keys_t, self.bias = stacked.weight_keys_t, stacked.bias
        self.read_out = moram_triton.ReadOut(stacked.values, k, temperature, threshold) if fused else None

    def __call__(self, tokens: torch.Tensor, shape: Optional[Tuple[int, ...]] = None) -> torch.Tensor:
        """``y`` for the token rows ``tokens`` ``[N, d_in]``, in ``shape`` (``[N, d_out]`` where None)."""
        if self.read_out is None or tokens.shape[0] > moram_triton.READ_OUT_ROWS:
            out = self.mixture(tokens, self.stacked, self.k, self.temperature, self.threshold, False)[0]
            return out if shape is None else out.reshape(shape)
        bias = self.bias  # stacked_mixture's steps, as fused_read_out takes them (nothing recorded, k < R)
        full = torch.mm(tokens, self.weight_keys_t) if bias is None else torch.addmm(bias, tokens, self.weight_keys_t)
        return self.read_out.joined(full, shape)  # (y0 and p read in place: no split's views)


def stacked_repeat(mixture: Callable, stacked: StackedBase, k: int, temperature: float,
                   threshold: Optional[float]) -> Callable[[torch.Tensor], torch.Tensor]:
    """``tokens -> y``: ``mixture`` (a path's stacked form, :func:`stacked_mixture` with its router,
    as :func:`~moram_avalanche.layers.moram.paths.choice.mixture_for` gives it; any other callable of
    that form is called as it is) repeated over ``stacked`` with ``k``, ``temperature`` and
    ``threshold``, nothing recorded: a :class:`StackedRepeat`, with the Triton router's one-call
    read-out bound where :func:`fused_read_out` would take it (``k < R``; the row count is read at
    each call)."""
    fused = with_triton_router(mixture, stacked_mixture) and k < stacked.num_atoms
    return StackedRepeat(mixture, stacked, k, temperature, threshold, fused)


class ApartRepeat:
    """``tokens -> y``: what a layer's eval call that reads the base apart computes on its token rows
    over one frozen ``bank`` (:meth:`~moram_avalanche.layers.moram.layer.MoRAMRouting.read`: the
    tokens in the compute ``dtype``, the base's ``weight`` / ``bias`` cast to it at each call where
    they are in another (its copy not kept), then ``mixture(tokens, weight, bias, bank, k,
    temperature, threshold, False, None)[0]``), its arguments bound: what a plan made by
    :meth:`~moram_avalanche.layers.moram.plan.EvalPlan.apart` repeats (issue "GPU path II", item 7).
    For the dense path with the Triton router and ``k < R``, :func:`dense_forward`'s steps on at
    most :data:`~moram_avalanche.layers.moram.paths.triton.READ_OUT_ROWS` rows (read at each call)
    with the read-out's constants bound (:class:`~moram_avalanche.layers.moram.paths.triton.ReadOut`):
    ``p = A x``, the base's ``W x + b`` (where there is a base), the read-out, its output made in the
    call's shape. Anything else, ``mixture`` itself. Built by :func:`apart_repeat`. (``F.linear``
    takes ``W^T`` at each call: a view of it bound once would miss a ``.data`` swapped for its
    transpose, which keeps the pointer, shape, dtype and version the plan checks.)

    Under autocast (``autocast``: the device type whose autocast is on for the calls, in
    :data:`AUTOCAST_LINEAR`, its dtype ``dtype``) the read-out's steps leave the base's cast to
    autocast itself: ``F.linear`` is on its list of lower-precision operators, which casts a
    float32, float16 or bfloat16 weight and bias to ``dtype`` as ``.to(dtype=dtype)`` does (the
    same rounding, bit for bit), in C++, without two Python calls (about 1.4 us a call on this
    project's CPU, 16-wide, timed alone). Not for a float64 base (autocast leaves it), nor for a
    weight or bias that requires grad at the call: autocast keeps its cast of such a leaf for the
    rest of its region (its cache, under ``torch.no_grad()`` too), which an edit in place would
    leave stale."""

    __slots__ = ("mixture", "bank", "k", "temperature", "threshold", "dtype", "weight", "bias", "cast", "cast_base",
                 "keys", "keys_t", "read_out")

    def __init__(self, mixture: Callable, bank: BankRows, k: int, temperature: float, threshold: Optional[float],
                 dtype: torch.dtype, weight: Optional[torch.Tensor], bias: Optional[torch.Tensor], fused: bool,
                 autocast: Optional[str] = None):
        self.mixture, self.bank, self.k, self.temperature, self.threshold = mixture, bank, k, temperature, threshold
        self.dtype, self.weight, self.bias = dtype, weight, bias
        self.cast = weight is not None and weight.dtype != dtype  # (MoRAMRouting.base_in, its copy not kept)
        # the read-out's steps: cast here, or by autocast's F.linear (class docstring)
        self.cast_base = self.cast and not autocast_casts(autocast, weight, bias)
        self.keys, self.keys_t = bank.keys, bank.keys_t
        self.read_out = (moram_triton.ReadOut(bank.values, k, temperature, threshold, weight is not None)
                         if fused else None)

    def __call__(self, tokens: torch.Tensor, shape: Optional[Tuple[int, ...]] = None) -> torch.Tensor:
        """``y`` for the token rows ``tokens`` ``[N, d_in]``, in ``shape`` (``[N, d_out]`` where None)."""
        dtype, weight, bias = self.dtype, self.weight, self.bias
        if tokens.dtype != dtype:
            tokens = tokens.to(dtype=dtype)
        if self.read_out is None or tokens.shape[0] > moram_triton.READ_OUT_ROWS:
            if self.cast:
                weight, bias = _in_dtype(weight, bias, dtype)
            out = self.mixture(tokens, weight, bias, self.bank, self.k, self.temperature, self.threshold, False, None)[0]
            return out if shape is None else out.reshape(shape)
        if self.cast_base or (self.cast and (weight.requires_grad or (bias is not None and bias.requires_grad))):
            weight, bias = _in_dtype(weight, bias, dtype)
        keys_t = self.keys_t  # dense_forward's steps, as fused_read_out takes them (nothing recorded, k < R)
        proj = F.linear(tokens, self.keys) if keys_t is None else torch.mm(tokens, keys_t)  # 1. p = A x
        return self.read_out(proj, None if weight is None else F.linear(tokens, weight, bias), shape)  # 2.-6.


def apart_repeat(mixture: Callable, bank: BankRows, k: int, temperature: float, threshold: Optional[float],
                 dtype: torch.dtype, weight: Optional[torch.Tensor], bias: Optional[torch.Tensor],
                 autocast: Optional[str] = None) -> ApartRepeat:
    """``tokens -> y``: ``mixture`` (a path's, as
    :func:`~moram_avalanche.layers.moram.paths.choice.mixture_for` gives it) repeated over the frozen
    ``bank`` with ``k``, ``temperature`` and ``threshold``, nothing recorded, over the base's
    ``weight`` / ``bias`` (or none) in ``dtype``: an :class:`ApartRepeat`, with the Triton router's
    one-call read-out bound where :func:`fused_read_out` would take it (:func:`dense_mixture` with
    that router, ``k < R``; the row count is read at each call). ``autocast``: the device type
    whose autocast is on for the calls, its dtype ``dtype`` (None: off)."""
    fused = with_triton_router(mixture, dense_mixture) and k < bank.keys.shape[0]
    return ApartRepeat(mixture, bank, k, temperature, threshold, dtype, weight, bias, fused, autocast)


def dense_router_backward(router: Router, k: int, temperature: float, threshold: Optional[float], grad_out,
                          values, proj, state, start: int, upstream: bool, tail: bool):
    """``(dL/dp or None, c_tail or None)``: ``dL/dc = g B^T`` (one GEMM over the bank), then the router's backward."""
    grad_coef = grad_out @ values.t() if upstream else None
    grad_proj, coef = router.backward(grad_coef, proj, state, k, temperature, threshold, want_coef=tail)
    return grad_proj, (coef[:, start:] if tail else None)


__all__ = ["AUTOCAST_CASTS", "AUTOCAST_LINEAR", "ApartRepeat", "Router", "autocast_casts", "TORCH_ROUTER", "TRITON_ROUTER", "apart_repeat", "dense_forward", "dense_mixture", "dense_router_backward",
           "fused_read_out", "StackedRepeat", "stacked_mixture", "stacked_repeat", "with_triton_router"]
