"""The MoRAM layer's arithmetic as one autograd function with a hand-written backward (pure torch).

MoRAM keeps every atom of every task in one contiguous bank and trains only the atoms added
for the current task. Written with ordinary autograd, the layer would (a) differentiate
through a concatenation ``[frozen; trainable]`` and so compute, then discard, the full
``[R, d]`` weight gradients, (b) save a dozen ``[N, R]`` intermediates, and (c) run each
elementwise step of the router as its own kernel in both passes. :class:`MoRAMFunction`
takes the whole bank for the forward pass and the trainable tail as separate arguments,
returns gradients for the tail only, saves ``[N, R]`` projections plus ``[N, k]`` routing
state, and folds the base layer's GEMMs and the atom GEMMs into shared output buffers.

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

On the CPU in float32 three steps run compiled (:mod:`~moram_avalanche.layers.routing_kernel`;
``MORAM_AVALANCHE_KERNEL=off`` keeps everything here): the top-k with the norm, the gated
read-out, and the router's backward, which takes only the ``k`` products ``g . B_i`` each token
needs instead of the ``[N, R]`` GEMM ``g B^T``. Same arithmetic; tests compare both paths.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import torch
import torch.nn.functional as F

from . import routing_kernel

#: L2-normalisation epsilon of the relevance score (method reference, step 2).
RELEVANCE_EPS = 1e-12


def compute_dtype(x: torch.Tensor) -> torch.dtype:
    """The dtype a linear layer computes in for input ``x``: autocast's when it is on."""
    device_type = x.device.type
    if torch.is_autocast_enabled(device_type):
        return torch.get_autocast_dtype(device_type)
    return x.dtype


class Routing(NamedTuple):
    """Routing state of a batch of tokens (``N`` tokens, ``k`` kept atoms)."""

    norm: torch.Tensor  # [N, 1] max(||p||, eps)
    idx: torch.Tensor  # [N, k] kept atoms
    kept_relevance: torch.Tensor  # [N, k] s_I
    softmax: torch.Tensor  # [N, k] u = softmax(s_I / tau), before the gate
    weights: torch.Tensor  # [N, k] w = u * gate
    kept_proj: torch.Tensor  # [N, k] p_I


def route(proj: torch.Tensor, k: int, temperature: float, threshold: Optional[float]) -> Routing:
    """Steps 2-5 on projections ``proj`` ``[N, R]`` (in float32 or wider, whatever the model dtype).

    ``threshold`` is the eval-only gate ``delta``, or None for no gate (training).
    """
    # s = p / n with n > 0 per token: the top-k of s are the top-k of p, so only the k kept
    # relevances are divided (same values as dividing all of p first).
    if routing_kernel.available(proj):  # the same set and norm in one pass (CPU, float32)
        kept_proj, idx, norm = routing_kernel.select(proj, k)
    else:
        norm = torch.linalg.vector_norm(proj, dim=-1, keepdim=True).clamp_min_(RELEVANCE_EPS)
        kept_proj, idx = proj.topk(k, dim=-1, sorted=False)
    kept_relevance = kept_proj / norm
    softmax = torch.softmax(kept_relevance / temperature, dim=-1)
    weights = softmax
    if threshold is not None:
        weights = softmax.masked_fill(kept_relevance < threshold, 0.0)
    return Routing(norm, idx, kept_relevance, softmax, weights, kept_proj)


def route_dtype(dtype: torch.dtype) -> torch.dtype:
    """Routing runs in float32 at least (softmax at tau = 0.01 is sharp)."""
    return torch.promote_types(dtype, torch.float32)


def mixture_forward(tokens, weight, bias, key_bank, value_bank, k, temperature, threshold):
    """``(y, proj, routing)`` for ``tokens`` ``[N, d_in]``; every tensor in one dtype.

    ``y = tokens W^T + b + delta`` when ``weight`` is given, else the atoms' ``delta`` alone.
    """
    proj = F.linear(tokens, key_bank).to(route_dtype(tokens.dtype))
    routing = route(proj, k, temperature, threshold)
    coef = (routing.weights * routing.kept_proj).to(tokens.dtype)
    out = read_out(routing.idx, coef, value_bank, gated=threshold is not None, bias=bias)
    if weight is not None:
        out.addmm_(tokens, weight.t())  # the base GEMM accumulates into the same buffer
    return out, proj, routing


def read_out(idx: torch.Tensor, coef: torch.Tensor, value_bank: torch.Tensor,
             gated: bool = False, bias: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``[N, d_out]`` rows ``bias + sum_j coef[n, j] * value_bank[idx[n, j]]`` (step 6's atom term).

    ``gated``: the eval gate has zeroed some coefficients; their rows are skipped (one
    ``embedding_bag`` over the non-zero entries only, with per-token offsets). Skipping a
    zero term leaves every sum as it is (``a + 0 == a``), and at ``delta = 0.2`` at most
    ``1 / delta^2 = 25`` atoms per token can pass the gate (``||s|| = 1``), often far fewer.
    On the CPU in float32 the compiled read-out skips them in one pass, bias included
    (:func:`~moram_avalanche.layers.routing_kernel.read_out`; ungated, ``embedding_bag`` is as fast).
    """
    if gated and routing_kernel.available(value_bank) and coef.dtype == torch.float32:
        return routing_kernel.read_out(idx, coef, value_bank, bias)
    if not gated:
        out = F.embedding_bag(idx, value_bank, per_sample_weights=coef, mode="sum")
    else:
        keep = coef != 0
        counts = keep.sum(1)
        offsets = torch.cumsum(counts, 0) - counts  # start of each token's bag
        out = F.embedding_bag(idx[keep], value_bank, offsets, per_sample_weights=coef[keep],
                              mode="sum")
    return out if bias is None else out.add_(bias)


class MoRAMFunction(torch.autograd.Function):
    """``y = W x + b + sum_I w_i p_i B_i`` with gradients for x, the trainable atoms, W and b.

    Forward args: ``tokens [N, d_in]``, ``weight [d_out, d_in]`` or None (then only the atom
    term is returned), ``bias [d_out]`` or None, ``key_bank [R, d_in]``, ``value_bank
    [R, d_out]``, ``new_keys [r, d_in]``, ``new_values [r, d_out]`` (the last ``r`` rows of the
    banks; ``r`` may be 0), ``k``, ``temperature``, ``threshold`` (None: no gate).
    Returns ``(y, idx, weights)``; ``idx`` and ``weights`` (for activation statistics) are
    not differentiable.
    """

    @staticmethod
    def forward(ctx, tokens, weight, bias, key_bank, value_bank, new_keys, new_values,
                k, temperature, threshold):
        with torch.autocast(tokens.device.type, enabled=False):  # inputs are already cast
            out, proj, routing = mixture_forward(
                tokens, weight, bias, key_bank, value_bank, k, temperature, threshold
            )
        ctx.save_for_backward(tokens, weight, key_bank, value_bank, proj, *routing)
        ctx.num_frozen = key_bank.shape[0] - new_keys.shape[0]
        ctx.temperature = temperature
        ctx.threshold = threshold
        ctx.mark_non_differentiable(routing.idx, routing.weights)
        ctx.set_materialize_grads(False)
        return out, routing.idx, routing.weights

    @staticmethod
    def backward(ctx, grad_out, _grad_idx, _grad_weights):
        tokens, weight, key_bank, value_bank, proj, *saved = ctx.saved_tensors
        routing = Routing(*saved)
        needs = ctx.needs_input_grad
        grads = [None] * 10
        if grad_out is None:
            return tuple(grads)
        grad_out = grad_out.contiguous()
        wide = proj.dtype  # routing dtype (float32 or wider)
        start = ctx.num_frozen

        if needs[6]:  # dL/dB_i = sum over tokens of c_i g, for the trainable rows
            coef = (routing.weights * routing.kept_proj).to(grad_out.dtype)
            grads[6] = _tail_rows(routing.idx, coef, start, value_bank.shape[0]).t() @ grad_out

        if needs[1]:
            grads[1] = grad_out.t() @ tokens
        if needs[2]:
            grads[2] = grad_out.sum(0)
        if not (needs[0] or needs[5]):
            return tuple(grads)  # nothing upstream of the projections needs a gradient

        # router: c = w * p_I with w = u * gate, u = softmax(s_I / tau), s_I = p_I / n
        # read-out: dL/dc_i = g . B_i (one GEMM over the bank, then the k used columns)
        # the kernel takes k products per token (memory-bound); the GEMM takes R (compute-bound):
        # the kernel wins once the bank is a few times k (scripts/bench_atoms.py: not at R = k)
        sparse = proj.shape[1] > 2 * routing.idx.shape[1]
        if sparse and wide == torch.float32 and routing_kernel.available(grad_out):
            grad_proj = routing_kernel.route_backward(grad_out, value_bank, proj, routing, ctx.temperature,
                                                      ctx.threshold)
        else:
            grad_proj = _router_backward(grad_out @ value_bank.t(), proj, routing, ctx.temperature, ctx.threshold)
        grad_proj = grad_proj.to(tokens.dtype)

        if needs[0]:
            grad_tokens = grad_proj @ key_bank
            if weight is not None:
                grad_tokens.addmm_(grad_out, weight)
            grads[0] = grad_tokens
        if needs[5]:
            grads[5] = grad_proj[:, start:].t() @ tokens
        return tuple(grads)


def _router_backward(scores: torch.Tensor, proj: torch.Tensor, routing: Routing, temperature: float,
                     threshold: Optional[float]) -> torch.Tensor:
    """``dL/dp`` ``[N, R]`` from ``scores = dL/dy B^T`` and the saved routing (module docstring)."""
    grad_coef = scores.gather(1, routing.idx).to(proj.dtype)
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


def _tail_rows(idx: torch.Tensor, coef: torch.Tensor, start: int, total: int) -> torch.Tensor:
    """``[N, total - start]`` dense coefficients of the atoms at ``start..total`` (0 if not kept)."""
    local = idx - start
    dense = coef.new_zeros(coef.shape[0], total - start)
    dense.scatter_add_(1, local.clamp_min(0), coef * (local >= 0))
    return dense


__all__ = ["RELEVANCE_EPS", "MoRAMFunction", "Routing", "compute_dtype", "mixture_forward", "read_out",
           "route", "route_dtype"]
