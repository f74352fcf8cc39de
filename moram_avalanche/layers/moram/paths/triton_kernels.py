"""MoRAM's routing (steps 2-5) as two Triton kernels: one token row per lane, the bank's ``R`` atoms in registers.

Imported only by :mod:`~moram_avalanche.layers.moram.paths.triton`, once it knows Triton is installed
(this module imports it at the top). Each program takes ``BLOCK_N`` tokens and the whole row of
``R <= BLOCK_R`` projections of each, so a token's routing never leaves the chip:

* :func:`route_forward_kernel` -- ``p`` ``[N, R]`` in, the dense coefficients ``c = w * p``
  ``[N, R]`` out (zero off the kept atoms), and on request the weights ``w`` themselves (for
  the activation statistics);
* :func:`route_backward_kernel` -- ``dL/dc`` ``[N, R]`` and ``p`` in, ``dL/dp`` out. It
  recomputes the routing from ``p`` (a few reductions per row) instead of reading saved
  ``[N, k]`` state, so the forward saves nothing but ``p``; on request it also writes ``c``
  (what the values' gradient ``c^T dL/dy`` needs).

The arithmetic is steps 2-5 and the router's backward as
:mod:`~moram_avalanche.layers.moram.paths.reference` states them, in the dense form of
:mod:`~moram_avalanche.layers.moram.paths.dense`: the kept set ``I`` is a mask over the row
(:func:`_kept_set`; ties go to the lower index, as in the compiled CPU kernel), the softmax's
logits are ``s / tau`` on ``I`` and ``-inf`` elsewhere, and the backward reads ``g = dL/dc`` dense
``[N, R]`` (the reference path gathers its ``k`` columns first).

Arithmetic is float32 for float32 / bfloat16 / float16 projections (the routing's float32 of
the PyTorch paths) and float64 for float64 ones. Under ``TRITON_INTERPRET=1`` (set before
Triton is imported) the same kernels run on CPU tensors, which is how the test suite checks them.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _kept_set(p, valid, cols, k, KEEP_ALL: tl.constexpr, BLOCK_R: tl.constexpr):
    """Boolean ``[BLOCK_N, BLOCK_R]``: the ``k`` largest valid entries of each row (step 3)."""
    if KEEP_ALL:
        kept = valid
    else:
        work = tl.where(valid, p, float("-inf"))
        kept = valid & (cols[None, :] < 0)  # all False, of the loop's [BLOCK_N, BLOCK_R] shape
        for _ in range(k):
            top = tl.max(work, axis=1)
            first = tl.min(tl.where(work == top[:, None], cols[None, :], BLOCK_R), axis=1)
            pick = cols[None, :] == first[:, None]
            kept = kept | pick
            work = tl.where(pick, float("-inf"), work)
    return kept


@triton.jit
def _routing(P, rows, cols, n_rows, n_atoms, stride_p, k, inv_tau, delta, eps,
             GATED: tl.constexpr, KEEP_ALL: tl.constexpr, F64: tl.constexpr, BLOCK_R: tl.constexpr):
    """``(p, valid, kept, n, s, u, w)`` of a block of rows (steps 2-5)."""
    valid = (rows < n_rows)[:, None] & (cols < n_atoms)[None, :]
    p = tl.load(P + rows[:, None] * stride_p + cols[None, :], mask=valid, other=0.0)
    if F64:
        p = p.to(tl.float64)
    else:
        p = p.to(tl.float32)
    norm = tl.maximum(tl.sqrt(tl.sum(p * p, axis=1)), eps)                 # 2. n = max(||p||, eps)
    kept = _kept_set(p, valid, cols, k, KEEP_ALL, BLOCK_R)                 # 3. I = top-k
    s = p / norm[:, None]                                                  # 2. s = p / n
    logits = tl.where(kept, s * inv_tau, float("-inf"))
    top = tl.max(logits, axis=1)
    top = tl.where(top == float("-inf"), 0.0, top)                         # rows past N: nothing kept
    e = tl.exp(logits - top[:, None])
    u = e / tl.maximum(tl.sum(e, axis=1), 1.0)[:, None]                    # 4. u = softmax(s_I / tau)
    #                                    (a kept row's sum is >= 1: its largest term is exp(0))
    if GATED:
        w = tl.where(s >= delta, u, 0.0)                                   # 5. w = u [s >= delta]
    else:
        w = u
    return p, valid, kept, norm, s, u, w


@triton.jit
def route_forward_kernel(P, C, W, n_rows, n_atoms, stride_p, stride_c, stride_w, k, inv_tau, delta, eps,
                         GATED: tl.constexpr, KEEP_ALL: tl.constexpr, WRITE_W: tl.constexpr,
                         F64: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_R: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    cols = tl.arange(0, BLOCK_R)
    p, valid, kept, norm, s, u, w = _routing(P, rows, cols, n_rows, n_atoms, stride_p, k, inv_tau, delta, eps,
                                             GATED, KEEP_ALL, F64, BLOCK_R)
    tl.store(C + rows[:, None] * stride_c + cols[None, :], (w * p).to(C.dtype.element_ty), mask=valid)
    if WRITE_W:
        tl.store(W + rows[:, None] * stride_w + cols[None, :], w.to(W.dtype.element_ty), mask=valid)


@triton.jit
def route_backward_kernel(G, P, DP, C, n_rows, n_atoms, stride_g, stride_p, stride_dp, stride_c, k, inv_tau,
                          delta, eps, GATED: tl.constexpr, KEEP_ALL: tl.constexpr, WRITE_GRAD: tl.constexpr,
                          WRITE_COEF: tl.constexpr, F64: tl.constexpr, BLOCK_N: tl.constexpr,
                          BLOCK_R: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    cols = tl.arange(0, BLOCK_R)
    p, valid, kept, norm, s, u, w = _routing(P, rows, cols, n_rows, n_atoms, stride_p, k, inv_tau, delta, eps,
                                             GATED, KEEP_ALL, F64, BLOCK_R)
    if WRITE_COEF:
        tl.store(C + rows[:, None] * stride_c + cols[None, :], (w * p).to(C.dtype.element_ty), mask=valid)
    if WRITE_GRAD:
        g = tl.load(G + rows[:, None] * stride_g + cols[None, :], mask=valid, other=0.0).to(p.dtype)
        if GATED:
            grad_u = tl.where(kept & (s >= delta), g * p, 0.0)
        else:
            grad_u = tl.where(kept, g * p, 0.0)
        grad_z = u * (grad_u - tl.sum(grad_u * u, axis=1)[:, None])
        grad_s = grad_z * inv_tau
        norm_scale = -tl.sum(grad_s * s, axis=1) / (norm * norm)
        norm_scale = tl.where(norm > eps, norm_scale, 0.0)
        grad_p = g * w + grad_s / norm[:, None] + p * norm_scale[:, None]
        tl.store(DP + rows[:, None] * stride_dp + cols[None, :], grad_p.to(DP.dtype.element_ty), mask=valid)


__all__ = ["route_backward_kernel", "route_forward_kernel"]
