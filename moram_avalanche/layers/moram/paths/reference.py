"""MoRAM's six steps, stated here once, and the reference path that computes them in plain PyTorch.

The method of MoRAM ("Little by Little: Continual Learning via Incremental Mixture of Rank-1
Associative Memory Experts", ICML 2026), with the official release's layer (Artificer-AI-Lab/MoRAM,
``XTAIL/loralib/moram.py``) where it fixes what the paper leaves open (``k = max(topk, 2)``). A frozen
linear map ``y = W x + b`` (``W`` ``[d_out, d_in]``) is augmented by a bank of ``R`` rank-1 atoms:
keys ``A_i`` (rows, length ``d_in``) and values ``B_i`` (length ``d_out``); ``A`` ``[R, d_in]``,
``B`` ``[R, d_out]``, one row per atom. For every token ``x`` (each independently):

1. projections  ``p_i = A_i . x``                                   (i = 1..R)
2. relevance    ``s_i = p_i / max(||p||_2, eps)``                   (L2 over the whole bank; eps = 1e-12)
3. sparsity     keep the ``k`` largest ``s_i``, signed (not ``|s|``): the set ``I``;
                ``k = min(max(topk, 2), R)`` (the release's ``max(topk, 2)``; ``R`` when ``topk`` is None)
4. sharpness    ``w_I = softmax(s_I / tau)``; the atoms outside ``I`` weigh 0
5. eval gate    at inference only, when ``delta > 0``: ``w_i <- w_i [s_i >= delta]`` (no renormalisation)
6. output       ``y = W x + b + sum_{i in I} w_i p_i B_i``

The value is scaled by the raw projection ``p_i``, not by ``s_i``: the update is the per-token
mixture of rank-1 updates ``sum_i w_i B_i A_i x``. The layer decides ``k`` and whether the gate is on
(:meth:`~moram_avalanche.layers.moram.layer.MoRAMRouting.read`); every path takes them as given.

Every other module of the layer cites this statement instead of restating it: the compiled CPU
kernels (:mod:`~moram_avalanche.layers.moram.paths.cpu_kernel`), the GPU's dense path
(:mod:`~moram_avalanche.layers.moram.paths.dense`) and its Triton kernels
(:mod:`~moram_avalanche.layers.moram.paths.triton_kernels`), the routing ablations
(:mod:`~moram_avalanche.layers.moram.variants`) and the method written the obvious way
(:mod:`~moram_avalanche.layers.moram.naive`, what the test suite checks every path against).

How this path computes them (the ``reference`` and ``cpu-kernel`` paths of
:mod:`~moram_avalanche.layers.moram.paths`): :func:`sparse_mixture` runs steps 1-6 once without
autograd; steps 2-5 are :func:`route`, read top to bottom, in float32 at least
(:func:`route_dtype`), on a gathered ``[N, k]`` routing (the top-k runs on ``p``: ``n > 0``, so the
``k`` largest ``s`` are the ``k`` largest ``p``); step 6 is :func:`read_out`, an ``embedding_bag``
that skips the eval gate's zero terms. Three of these steps -- the top-k with the norm, the gated
read-out, the router's backward -- are parameters (:class:`Kernels`), which the compiled CPU kernels
can take (:func:`~moram_avalanche.layers.moram.paths.choice.kernels_for` chooses).
:class:`~moram_avalanche.layers.moram.backward.MoRAMFunction` attaches the backward, written by
hand (gradients for the trainable rows only), keeping the ``[N, R]`` projections plus the
``[N, k]`` routing state; the router's part of it, with ``g = dL/dy``, ``c_i = w_i p_i``,
``u = softmax(s_I / tau)`` and ``m`` the gate:

* ``dL/dc_i = g . B_i``; ``dL/dB_i = sum_tokens c_i g`` (trainable rows only)
* ``dL/du = m * dL/dc * p_I``; ``dL/dz = u * (dL/du - <dL/du, u>)``; ``dL/ds_I = dL/dz / tau``
* ``dL/dp_I += dL/dc * w + dL/ds_I / n``; ``dL/dp += (-<dL/ds_I, s_I> / n) * p / n`` (0 if ``||p|| <= eps``)
* ``dL/dx = g W + (dL/dp) A``; ``dL/dA_tail = (dL/dp_tail)^T x``

On a GPU this path is correct but slow: the gated read-out's boolean indexing waits for the
device in every call (the GPU takes the dense path).
"""

from __future__ import annotations

import functools
from typing import Callable, NamedTuple, Optional

import torch
import torch.nn.functional as F

from ..backward import attach_backward
from ..bank import BankRows
from ..dropped import DroppedTokens

#: L2-normalisation epsilon of the relevance score (method reference, step 2).
RELEVANCE_EPS = 1e-12


_ROUTE_DTYPES = {torch.float64: torch.float64}


def route_dtype(dtype: torch.dtype) -> torch.dtype:
    """Routing runs in float32 at least (softmax at tau = 0.01 is sharp): float64 stays, the rest
    (float32, bfloat16, float16) routes in float32."""
    return _ROUTE_DTYPES.get(dtype, torch.float32)


class Routing(NamedTuple):
    """Routing state of a batch of tokens (``N`` tokens, ``k`` kept atoms)."""

    norm: torch.Tensor  # [N, 1] max(||p||, eps)
    idx: torch.Tensor  # [N, k] kept atoms
    kept_relevance: torch.Tensor  # [N, k] s_I
    softmax: torch.Tensor  # [N, k] u = softmax(s_I / tau), before the gate
    weights: torch.Tensor  # [N, k] w = u * gate
    kept_proj: torch.Tensor  # [N, k] p_I


# ---------------------------------------------------------------- steps 2-5 and the three kernel steps, in PyTorch
def select(proj: torch.Tensor, k: int):
    """``(kept_proj [N, k], idx [N, k], norm [N, 1])``: the ``k`` largest entries of each row of
    ``proj`` (signed, in no particular order) and ``max(||p||, eps)``."""
    norm = torch.linalg.vector_norm(proj, dim=-1, keepdim=True).clamp_min_(RELEVANCE_EPS)
    kept_proj, idx = proj.topk(k, dim=-1, sorted=False)
    return kept_proj, idx, norm


def route(proj: torch.Tensor, k: int, temperature: float, threshold: Optional[float],
          select=select) -> Routing:
    """Steps 2-5 on projections ``proj`` ``[N, R]`` (float32 or wider, whatever the model dtype).

    ``threshold`` is the eval-only gate ``delta``, or None for no gate (training). ``select``
    runs steps 2-3's top-k and norm (:class:`Kernels`).
    """
    # n = max(||p||, eps) > 0 per token, so the k largest s = p / n are the k largest p: the
    # top-k runs on p and only the k kept are divided (the same numbers as dividing all of p first)
    kept_proj, idx, norm = select(proj, k)                              # 3. top-k; 2.'s n
    kept_relevance = kept_proj / norm                                   # 2. s_i = p_i / n
    softmax = torch.softmax(kept_relevance / temperature, dim=-1)       # 4. w = softmax(s_I / tau)
    weights = softmax                                                   # 5. w_i <- w_i [s_i >= delta]
    if threshold is not None:
        weights = softmax.masked_fill(kept_relevance < threshold, 0.0)
    return Routing(norm, idx, kept_relevance, softmax, weights, kept_proj)


def read_out(idx: torch.Tensor, coef: torch.Tensor, value_bank: torch.Tensor,
             bias: Optional[torch.Tensor] = None, gated: bool = False) -> torch.Tensor:
    """``[N, d_out]`` rows ``bias + sum_j coef[n, j] * value_bank[idx[n, j]]`` (step 6's atom term).

    ``gated``: the eval gate has zeroed some coefficients; their rows are skipped (one
    ``embedding_bag`` over the non-zero entries only, with per-token offsets). Skipping a
    zero term leaves every sum as it is (``a + 0 == a``), and at ``delta = 0.2`` at most
    ``1 / delta^2 = 25`` atoms per token can pass the gate (``||s|| = 1``), often far fewer.
    """
    if not gated:
        out = F.embedding_bag(idx, value_bank, per_sample_weights=coef, mode="sum")
    else:
        keep = coef != 0
        counts = keep.sum(1)
        offsets = torch.cumsum(counts, 0) - counts  # start of each token's bag
        out = F.embedding_bag(idx[keep], value_bank, offsets, per_sample_weights=coef[keep],
                              mode="sum")
    return out if bias is None else out.add_(bias)


def gated_read_out(idx, coef, value_bank, bias=None) -> torch.Tensor:
    """:func:`read_out` after the eval gate (zero coefficients skipped)."""
    return read_out(idx, coef, value_bank, bias, gated=True)


def router_backward(grad_out: torch.Tensor, value_bank: torch.Tensor, proj: torch.Tensor, routing: Routing,
                    temperature: float, threshold: Optional[float]) -> torch.Tensor:
    """``dL/dp`` ``[N, R]`` from ``dL/dy`` ``[N, d_out]`` and the saved routing (the module docstring's backward)."""
    grad_coef = (grad_out @ value_bank.t()).gather(1, routing.idx).to(proj.dtype)  # dL/dc_i = g . B_i
    return kept_router_backward(grad_coef, proj, routing, temperature, threshold)


def kept_router_backward(grad_coef: torch.Tensor, proj: torch.Tensor, routing: Routing, temperature: float,
                         threshold: Optional[float]) -> torch.Tensor:
    """``dL/dp`` ``[N, R]`` from ``dL/dc`` of the kept atoms ``[N, k]`` (steps 5-2 backwards)."""
    grad_kept_proj = grad_coef * routing.weights
    grad_softmax = grad_coef * routing.kept_proj
    if threshold is not None:
        grad_softmax = grad_softmax * (routing.kept_relevance >= threshold)
    u = routing.softmax
    grad_z = u * (grad_softmax - (grad_softmax * u).sum(-1, keepdim=True))
    grad_kept_relevance = grad_z / temperature
    grad_kept_proj += grad_kept_relevance / routing.norm
    # through n = ||p|| (zero where the norm was clamped at eps)
    norm_scale = -(grad_kept_relevance * routing.kept_relevance).sum(-1, keepdim=True)
    norm_scale = norm_scale / routing.norm.square()
    norm_scale = norm_scale * (routing.norm > RELEVANCE_EPS)
    grad_proj = proj * norm_scale
    grad_proj.scatter_add_(1, routing.idx, grad_kept_proj)
    return grad_proj


# ---------------------------------------------------------------- the three steps a compiled kernel can take
class Kernels(NamedTuple):
    """Who runs the three steps the compiled CPU kernels cover, for one call
    (:func:`~moram_avalanche.layers.moram.paths.choice.kernels_for` chooses)."""

    select: Callable  # (proj, k) -> (kept_proj, idx, norm): steps 2-3
    read_out: Callable  # (idx, coef, value_bank, bias) -> b + sum_j coef_j B_idx_j: step 6
    router_backward: Callable  # (grad_out, value_bank, proj, routing, tau, threshold) -> dL/dp


#: the reference path's own steps, ungated and gated (the ``reference`` path runs these)
TORCH_KERNELS = Kernels(select, read_out, router_backward)
GATED_TORCH_KERNELS = Kernels(select, gated_read_out, router_backward)


# ---------------------------------------------------------------- steps 1-6 and the hand-written backward
def sparse_mixture(kernels: Kernels, tokens: torch.Tensor, weight: Optional[torch.Tensor],
                   bias: Optional[torch.Tensor], bank: BankRows, k: int, temperature: float,
                   threshold: Optional[float], recording: bool = False, dropped: Optional[DroppedTokens] = None):
    """Steps 1-6 on ``tokens`` ``[N, d_in]``: ``(y [N, d_out], kept idx [N, k], weights w [N, k])``.

    ``weight`` / ``bias`` are the base's (None: ``y`` is the atoms' term alone); ``threshold``
    is the eval gate ``delta`` or None; ``bank`` the joined rows
    (:meth:`~moram_avalanche.layers.moram.bank.MoRAMBank.rows`). The steps run without autograd;
    :class:`~moram_avalanche.layers.moram.backward.MoRAMFunction` gives ``y`` their hand-written
    backward (gradients for the trainable atoms, the tokens, and ``W``, ``b`` where they require
    it) when one is needed, with :func:`sparse_router_backward`. ``dropped``: the tokens are a
    dropout of its input (:mod:`~moram_avalanche.layers.moram.dropped`; no base then).
    """
    with torch.no_grad():
        proj = F.linear(tokens, bank.keys).to(route_dtype(tokens.dtype))  # 1. p_i = A_i . x
        routing = route(proj, k, temperature, threshold, kernels.select)  # 2.-5.
        coef = (routing.weights * routing.kept_proj).to(tokens.dtype)     # w_i p_i
        out = kernels.read_out(routing.idx, coef, bank.values, bias)      # 6. b + sum_i w_i p_i B_i
        if weight is not None:
            out.addmm_(tokens, weight.t())                                #    + W x
    out = attach_backward(out, tokens, weight, bias, bank, proj, tuple(routing),
                          functools.partial(sparse_router_backward, kernels, temperature, threshold), dropped)
    return out, routing.idx, routing.weights


def sparse_router_backward(kernels: Kernels, temperature: float, threshold: Optional[float], grad_out, values,
                           proj, state, start: int, upstream: bool, tail: bool):
    """``(dL/dp or None, c_tail or None)`` of the gathered routing (``state``: :class:`Routing`)."""
    routing = Routing(*state)
    tail_coef = grad_proj = None
    if tail:  # the trainable atoms' coefficients c_i = w_i p_i, 0 where not kept
        coef = (routing.weights * routing.kept_proj).to(grad_out.dtype)
        tail_coef = _tail_rows(routing.idx, coef, start, proj.shape[1])
    if upstream:
        grad_proj = kernels.router_backward(grad_out, values, proj, routing, temperature,
                                            threshold).to(grad_out.dtype)
    return grad_proj, tail_coef


def _tail_rows(idx: torch.Tensor, coef: torch.Tensor, start: int, total: int) -> torch.Tensor:
    """``[N, total - start]`` dense coefficients of the atoms at ``start..total`` (0 if not kept)."""
    local = idx - start
    dense = coef.new_zeros(coef.shape[0], total - start)
    dense.scatter_add_(1, local.clamp_min(0), coef * (local >= 0))
    return dense


__all__ = ["GATED_TORCH_KERNELS", "RELEVANCE_EPS", "TORCH_KERNELS", "Kernels", "Routing", "gated_read_out",
           "kept_router_backward", "read_out", "route", "route_dtype", "router_backward", "select", "sparse_mixture",
           "sparse_router_backward"]
