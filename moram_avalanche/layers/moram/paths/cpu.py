"""The CPU's paths of MoRAM's layer: gathered routing, a sparse read-out, the hand-written backward.

:func:`sparse_mixture` computes the paper's six steps once, without autograd, on the gathered
``[N, k]`` routing of :func:`route` (steps 2-5 in plain PyTorch, read top to bottom) and reads
the values out sparsely (``embedding_bag``; at eval the gate's zero terms are skipped). It is the
``reference`` and ``cpu-kernel`` paths of :mod:`~moram_avalanche.layers.moram.paths.choice` (the GPU
takes :mod:`~moram_avalanche.layers.moram.paths.dense`). Two things here make it fast:

* :class:`~moram_avalanche.layers.moram.backward.MoRAMFunction` attaches the backward of those
  steps, written by hand (gradients for the trainable rows only), keeping the ``[N, R]``
  projections plus the ``[N, k]`` routing state; :func:`sparse_router_backward` is this path's
  part of it.
* :func:`kernels_for` picks, once per call, who runs the three steps the compiled CPU kernels
  cover (:mod:`~moram_avalanche.layers.moram.paths.cpu_kernel`): the top-k with the norm, the gated
  read-out and the router's backward. The compiled ones run only on the CPU in float32 once
  :func:`routing_kernel.load() <moram_avalanche.layers.moram.paths.cpu_kernel.load>` has built them;
  nothing here ever builds them. Same arithmetic; tests compare both paths.

Equations (paper; method reference steps 1-6), per token ``x`` and bank ``A`` ``[R, d_in]``,
``B`` ``[R, d_out]`` (one row per atom):

* ``p = A x``; ``n = max(||p||, eps)``; ``s = p / n``
* ``I = top-k(s)`` (signed); ``w = softmax(s_I / tau)``; eval: ``w <- w * [s_I >= delta]``
* ``y = W x + b + sum_{i in I} w_i p_i B_i``

Backward, with ``g = dL/dy``, ``c_i = w_i p_i`` and ``u = softmax(s_I / tau)``, ``m`` the gate:

* ``dL/dc_i = g . B_i``; ``dL/dB_i = sum_tokens c_i g`` (trainable rows only)
* ``dL/du = m * dL/dc * p_I``; ``dL/dz = u * (dL/du - <dL/du, u>)``; ``dL/ds_I = dL/dz / tau``
* ``dL/dp_I += dL/dc * w + dL/ds_I / n``; ``dL/dp += (-<dL/ds_I, s_I> / n) * p / n`` (0 if ``||p|| <= eps``)
* ``dL/dx = g W + (dL/dp) A``; ``dL/dA_tail = (dL/dp_tail)^T x``
"""

from __future__ import annotations

import functools
from typing import Callable, NamedTuple, Optional

import torch
import torch.nn.functional as F

from ..backward import MoRAMFunction, attach_backward
from ..bank import BankRows
from . import cpu_kernel as routing_kernel

#: L2-normalisation epsilon of the relevance score (method reference, step 2).
RELEVANCE_EPS = 1e-12


def compute_dtype(x: torch.Tensor) -> torch.dtype:
    """The dtype a linear layer computes in for input ``x``: autocast's when it is on."""
    device_type = x.device.type
    if torch.is_autocast_enabled(device_type):
        return torch.get_autocast_dtype(device_type)
    return x.dtype


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
    runs steps 2-3's top-k and norm (:func:`kernels_for` picks it).
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
    """``dL/dp`` ``[N, R]`` from ``dL/dy`` ``[N, d_out]`` and the saved routing (module docstring)."""
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


# ---------------------------------------------------------------- the one dispatch
class Kernels(NamedTuple):
    """Who runs the three steps the compiled kernels cover, for one call (:func:`kernels_for`)."""

    select: Callable  # (proj, k) -> (kept_proj, idx, norm): steps 2-3
    read_out: Callable  # (idx, coef, value_bank, bias) -> b + sum_j coef_j B_idx_j: step 6
    router_backward: Callable  # (grad_out, value_bank, proj, routing, tau, threshold) -> dL/dp


def kernels_for(tokens: torch.Tensor, num_atoms: int, k: int, gated: bool) -> Kernels:
    """The implementations for ``tokens`` ``[N, d_in]``, a bank of ``num_atoms`` and ``k`` kept atoms.

    The compiled kernels when they are built (:func:`routing_kernel.built()
    <moram_avalanche.layers.moram.paths.cpu_kernel.built>`; never built here) and the tensors they see
    are CPU float32: the projections (float32 for float32, bfloat16 and float16 tokens) for
    the top-k; the tokens' own dtype for the read-out and the router's backward. The compiled
    read-out only where the gate skips terms (ungated, ``embedding_bag`` is as fast), the
    compiled backward only where the bank is a few times ``k``: it takes the ``k`` products
    ``g . B_i`` each token needs (memory-bound) where PyTorch's GEMM takes ``R``
    (compute-bound), which wins at ``R = k`` (``scripts/bench_atoms.py``).
    """
    compiled = tokens.device.type == "cpu" and routing_kernel.built() is not None
    in_float32 = compiled and tokens.dtype == torch.float32
    return Kernels(
        select=routing_kernel.select if compiled and route_dtype(tokens.dtype) == torch.float32 else select,
        read_out=(routing_kernel.read_out if in_float32 else gated_read_out) if gated else read_out,
        router_backward=routing_kernel.route_backward if in_float32 and num_atoms > 2 * k else router_backward,
    )


# ---------------------------------------------------------------- steps 1-6 and the hand-written backward
def sparse_mixture(kernels: Kernels, tokens: torch.Tensor, weight: Optional[torch.Tensor],
                   bias: Optional[torch.Tensor], bank: BankRows, k: int, temperature: float,
                   threshold: Optional[float], recording: bool = False):
    """Steps 1-6 on ``tokens`` ``[N, d_in]``: ``(y [N, d_out], kept idx [N, k], weights w [N, k])``.

    ``weight`` / ``bias`` are the base's (None: ``y`` is the atoms' term alone); ``threshold``
    is the eval gate ``delta`` or None; ``bank`` the joined rows
    (:meth:`~moram_avalanche.layers.moram.bank.MoRAMBank.rows`). The steps run without autograd;
    :class:`~moram_avalanche.layers.moram.backward.MoRAMFunction` gives ``y`` their hand-written
    backward (gradients for the trainable atoms, the tokens, and ``W``, ``b`` where they require
    it) when one is needed, with :func:`sparse_router_backward`.
    """
    with torch.no_grad():
        proj = F.linear(tokens, bank.keys).to(route_dtype(tokens.dtype))  # 1. p_i = A_i . x
        routing = route(proj, k, temperature, threshold, kernels.select)  # 2.-5.
        coef = (routing.weights * routing.kept_proj).to(tokens.dtype)     # w_i p_i
        out = kernels.read_out(routing.idx, coef, bank.values, bias)      # 6. b + sum_i w_i p_i B_i
        if weight is not None:
            out.addmm_(tokens, weight.t())                                #    + W x
    out = attach_backward(out, tokens, weight, bias, bank, proj, tuple(routing),
                          functools.partial(sparse_router_backward, kernels, temperature, threshold))
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


__all__ = ["RELEVANCE_EPS", "Kernels", "MoRAMFunction", "Routing", "compute_dtype", "gated_read_out",
           "kept_router_backward", "kernels_for", "read_out", "route", "route_dtype", "router_backward", "select",
           "sparse_mixture", "sparse_router_backward"]
