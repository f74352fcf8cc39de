"""The MoRAM layer's arithmetic as one autograd function with a hand-written backward.

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
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import torch
import torch.nn.functional as F

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
    norm = torch.linalg.vector_norm(proj, dim=-1, keepdim=True).clamp_min_(RELEVANCE_EPS)
    # s = p / n with n > 0 per token: the top-k of s are the top-k of p, so only the k kept
    # relevances are divided (same values as dividing all of p first).
    kept_proj, idx = proj.topk(k, dim=-1, sorted=False)
    kept_relevance = kept_proj / norm
    softmax = torch.softmax(kept_relevance / temperature, dim=-1)
    weights = softmax
    if threshold is not None:
        weights = softmax * (kept_relevance >= threshold)
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
    out = F.embedding_bag(routing.idx, value_bank, per_sample_weights=coef, mode="sum")
    if bias is not None:
        out.add_(bias)
    if weight is not None:
        out.addmm_(tokens, weight.t())  # the base GEMM accumulates into the same buffer
    return out, proj, routing


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
        grad_coef = (grad_out @ value_bank.t()).gather(1, routing.idx).to(wide)
        grad_kept_proj = grad_coef * routing.weights
        grad_softmax = grad_coef * routing.kept_proj
        if ctx.threshold is not None:
            grad_softmax = grad_softmax * (routing.kept_relevance >= ctx.threshold)
        u = routing.softmax
        grad_z = u * (grad_softmax - (grad_softmax * u).sum(-1, keepdim=True))
        grad_kept_relevance = grad_z / ctx.temperature
        grad_kept_proj += grad_kept_relevance / routing.norm
        # through n = ||p|| (zero where the norm was clamped at eps)
        norm_scale = -(grad_kept_relevance * routing.kept_relevance).sum(-1, keepdim=True)
        norm_scale = norm_scale / routing.norm.square()
        norm_scale = norm_scale * (routing.norm > RELEVANCE_EPS)
        grad_proj = proj * norm_scale
        grad_proj.scatter_add_(1, routing.idx, grad_kept_proj)
        grad_proj = grad_proj.to(tokens.dtype)

        if needs[0]:
            grad_tokens = grad_proj @ key_bank
            if weight is not None:
                grad_tokens.addmm_(grad_out, weight)
            grads[0] = grad_tokens
        if needs[5]:
            grads[5] = grad_proj[:, start:].t() @ tokens
        return tuple(grads)


def _tail_rows(idx: torch.Tensor, coef: torch.Tensor, start: int, total: int) -> torch.Tensor:
    """``[N, total - start]`` dense coefficients of the atoms at ``start..total`` (0 if not kept)."""
    local = idx - start
    dense = coef.new_zeros(coef.shape[0], total - start)
    dense.scatter_add_(1, local.clamp_min(0), coef * (local >= 0))
    return dense


# ---------------------------------------------------------------------- routing ablations
class PlainResult(NamedTuple):
    """Output of :func:`plain_mixture`."""

    out: torch.Tensor  # [N, d_out]
    idx: torch.Tensor  # [N, k] kept atoms (not differentiable)
    weights: torch.Tensor  # [N, k] mixture weights (detached, for activation statistics)
    balance: Optional[torch.Tensor]  # 0-d load-balancing term, or None


#: the load-balancing terms :func:`plain_mixture` can return (``balance=``)
BALANCE_FORMS = ("release", "switch")


def release_balance_term(weights: torch.Tensor, idx: torch.Tensor, num_atoms: int) -> torch.Tensor:
    """The MoRAM release's load-balancing term ``R * sum_i Pbar_i^2`` of one layer.

    ``Pbar_i`` is the mean over tokens of atom ``i``'s mixture weight: the post-top-k
    ``softmax(s_I / tau)`` of ``weights`` ``[N, k]``, scattered to the bank by ``idx`` (0 where
    not kept); the weights are differentiable. Perfectly uniform use gives 1; one atom taking
    every token gives ``R``. This is the term of the release's commented-out training forward
    (Artificer-AI-Lab/MoRAM, ``XTAIL/loralib/moram.py``, ``forward_backup``:
    ``P = weights.reshape(-1, R).mean(0); loss = R * (P ** 2).sum()``); unlike the Switch form
    it still pushes towards balance when every atom is kept (``k >= R``, e.g. all of the first
    task at r = k = 16), because ``tau = 0.01`` makes the kept weights far from uniform.
    """
    tokens = max(weights.shape[0], 1)
    mass = weights.new_zeros(num_atoms).index_add(0, idx.reshape(-1), weights.reshape(-1))
    mean_weight = mass / tokens
    return num_atoms * (mean_weight * mean_weight).sum()


def balance_term(relevance: torch.Tensor, idx: torch.Tensor, temperature: float) -> torch.Tensor:
    """Switch-Transformer load-balancing term ``R * sum_i f_i P_i`` of one layer.

    Fedus, Zoph and Shazeer, "Switch Transformers" (JMLR 2022), eq. 4-6: ``P_i`` is the mean
    over tokens of the router probability of atom ``i``, here ``softmax(s / tau)`` over the
    whole bank (before top-k and gate; differentiable), and ``f_i`` the fraction of routing
    assignments that go to atom ``i``: the share of (token, kept slot) pairs of the top-k
    selection ``idx`` ``[N, k]``, so ``sum_i f_i = 1`` (Switch's top-1 fraction when k = 1;
    Hugging Face's top-k variant sums over slots instead, which multiplies the term by k).
    Perfectly uniform routing gives 1.

    When every atom is kept (``k >= R``: no top-k, or all of the first task at r = k = 16)
    ``f_i = 1/R`` and the term is exactly 1, with no gradient, whatever the routing: the
    Switch form balances only what top-k selects. :func:`release_balance_term` is the form
    of the MoRAM release and the default of the load-balancing ablation.
    """
    num_atoms = relevance.shape[-1]
    probs = torch.softmax(relevance / temperature, dim=-1)
    mean_prob = probs.mean(0)
    counts = torch.zeros(num_atoms, dtype=probs.dtype, device=probs.device)
    ones = torch.ones(idx.numel(), dtype=probs.dtype, device=probs.device)
    counts.index_add_(0, idx.reshape(-1), ones)
    fraction = counts / max(idx.numel(), 1)
    return num_atoms * (fraction * mean_prob).sum()


def plain_mixture(tokens, weight, bias, keys, values, k, temperature, threshold, *,
                  router=None, balance=None) -> PlainResult:
    """The layer with ordinary autograd, for the routing ablations that need it.

    ``keys`` ``[R, d_in]`` and ``values`` ``[R, d_out]`` are the whole bank (frozen rows and
    trainable rows concatenated by the caller; gradients reach whatever requires grad).
    The relevance is the self-activation ``s = p / max(||p||, eps)`` or, with ``router``
    ``[R, d_in]``, the external router's logits ``s = router x``. Then, as in the method:
    top-``k`` of ``s`` (for self-activation selected on ``p``, the same order as the fused
    path), ``w = softmax(s_I / tau)``, eval gate ``w <- w * [s_I >= threshold]`` (``None``: no
    gate), ``y = W x + b + sum_I w_i p_i B_i``. With ``balance`` (one of
    :data:`BALANCE_FORMS`) the layer's load-balancing term is returned too:
    :func:`release_balance_term` (``"release"``) or :func:`balance_term` (``"switch"``).
    """
    if balance not in (None, *BALANCE_FORMS):
        raise ValueError(f"balance must be None or one of {BALANCE_FORMS}, got {balance!r}")
    wide = route_dtype(tokens.dtype)
    proj = F.linear(tokens, keys).to(wide)
    if router is None:
        norm = torch.linalg.vector_norm(proj, dim=-1, keepdim=True).clamp_min(RELEVANCE_EPS)
        _, idx = proj.topk(k, dim=-1, sorted=False)
        relevance = proj / norm
        kept_relevance = relevance.gather(1, idx)
    else:
        relevance = F.linear(tokens, router).to(wide)
        kept_relevance, idx = relevance.topk(k, dim=-1, sorted=False)
    soft = torch.softmax(kept_relevance / temperature, dim=-1)
    weights = soft if threshold is None else soft * (kept_relevance >= threshold)
    coef = (weights * proj.gather(1, idx)).to(tokens.dtype)
    mix = coef.new_zeros(proj.shape).scatter(1, idx, coef)
    out = mix @ values
    if bias is not None:
        out = out + bias
    if weight is not None:
        out = out + tokens @ weight.t()
    term = None
    if balance == "release":
        term = release_balance_term(soft, idx, relevance.shape[-1])
    elif balance == "switch":
        term = balance_term(relevance, idx, temperature)
    return PlainResult(out, idx, weights.detach(), term)
