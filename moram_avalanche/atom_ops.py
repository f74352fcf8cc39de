"""Autograd kernels for a bank of rank-1 atoms whose newest rows alone are trainable.

MoRAM keeps every atom of every task in one contiguous bank and trains only the atoms added
for the current task (paper, Sec. "little by little"). Differentiating through the
concatenation ``[frozen; trainable]`` would make autograd compute the full ``[R, d]`` weight
gradient and then discard the frozen rows. The two functions here take the whole bank for the
forward pass and the trainable tail as a separate argument, and return a gradient for that
tail only.

Both functions expect the caller to have cast every floating input to one compute dtype
(see :func:`compute_dtype`), so their backward passes need no autocast state.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def compute_dtype(x: torch.Tensor) -> torch.dtype:
    """The dtype a linear layer computes in for input ``x``: autocast's when it is on."""
    device_type = x.device.type
    if torch.is_autocast_enabled(device_type):
        return torch.get_autocast_dtype(device_type)
    return x.dtype


class BankProjection(torch.autograd.Function):
    """``p = x @ bank.T`` (paper eq. 1, ``p_i = A_i x``) with a gradient for the tail rows only.

    Args (forward):
        x: ``[N, d_in]`` tokens.
        bank: ``[R, d_in]`` all keys; not differentiated.
        trainable: ``[r, d_in]`` the last ``r`` rows of ``bank`` (same values), differentiated.
    """

    @staticmethod
    def forward(ctx, x, bank, trainable):
        ctx.save_for_backward(x, bank)
        ctx.num_frozen = bank.shape[0] - trainable.shape[0]
        return F.linear(x, bank)

    @staticmethod
    def backward(ctx, grad_p):
        x, bank = ctx.saved_tensors
        grad_x = grad_p @ bank if ctx.needs_input_grad[0] else None
        grad_trainable = None
        if ctx.needs_input_grad[2]:
            grad_trainable = grad_p[:, ctx.num_frozen:].t() @ x
        return grad_x, None, grad_trainable


class BankReadout(torch.autograd.Function):
    """Sparse read-out ``out[n] = sum_j coef[n, j] * bank[idx[n, j]]`` (paper eq. 6).

    Only the ``k`` selected value rows of each token are read (``embedding_bag`` with
    per-sample weights) instead of a dense ``[N, R] x [R, d_out]`` product.

    Args (forward):
        idx: ``[N, k]`` selected atom indices (long).
        coef: ``[N, k]`` mixture coefficients ``w_i * p_i``.
        bank: ``[R, d_out]`` all values, one row per atom; not differentiated.
        trainable: ``[r, d_out]`` the last ``r`` rows of ``bank``, differentiated.
    """

    @staticmethod
    def forward(ctx, idx, coef, bank, trainable):
        ctx.save_for_backward(idx, coef, bank)
        ctx.num_frozen = bank.shape[0] - trainable.shape[0]
        ctx.num_trainable = trainable.shape[0]
        # detached: lets embedding_bag take its forward-only kernel (no backward bookkeeping)
        return F.embedding_bag(idx, bank, per_sample_weights=coef.detach(), mode="sum")

    @staticmethod
    def backward(ctx, grad_out):
        idx, coef, bank = ctx.saved_tensors
        grad_coef = grad_trainable = None
        if ctx.needs_input_grad[1]:
            # d out[n] / d coef[n, j] = bank[idx[n, j]]: one GEMM, then pick the k used columns.
            grad_coef = (grad_out @ bank.t()).gather(1, idx)
        if ctx.needs_input_grad[3]:
            # Dense [N, r] coefficients of the trainable atoms (zeros where not selected).
            local = idx - ctx.num_frozen
            is_trainable = local >= 0
            dense = coef.new_zeros(coef.shape[0], ctx.num_trainable)
            dense.scatter_add_(1, local.clamp_min(0), coef * is_trainable)
            grad_trainable = dense.t() @ grad_out
        return None, grad_coef, None, grad_trainable
