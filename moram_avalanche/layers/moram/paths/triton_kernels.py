"""MoRAM's routing (steps 2-5) in three Triton kernels: one token row per warp, the top-k by integer keys.

Imported only by :mod:`~moram_avalanche.layers.moram.paths.triton`, once it knows Triton is installed
(this module imports it at the top), which also chooses the launch
(:func:`~moram_avalanche.layers.moram.paths.triton.launch`). Each program takes ``BLOCK_N`` token rows
of ``R <= BLOCK_R = BLOCK_H * BLOCK_W`` projections, a row as ``BLOCK_H`` slices of ``BLOCK_W``
columns (``[BLOCK_H, BLOCK_N, BLOCK_W]`` blocks; ``[BLOCK_N, BLOCK_H, BLOCK_W]`` where ``ROWS_FIRST``,
which the launch rule sets where the installed Triton compiles that order to fewer instructions:
:func:`~moram_avalanche.layers.moram.paths.triton.rows_first`), one row per warp where the row fits
(``BLOCK_R <= 1024``): a row's reductions stay inside its warp (shuffles, or one ``REDUX``
instruction on sm_80 and later for a 32-bit integer; no barrier, no shared memory, from Triton 3.7
on):

* :func:`route_forward_kernel` -- ``p`` ``[N, R]`` in, the dense coefficients ``c = w * p``
  ``[N, R]`` out (zero off the kept atoms), on request the weights ``w`` (for the activation
  statistics), and, when a backward will follow, the kept set: its ``k`` columns ``[N, k]`` (int16,
  in the order they were picked, largest first) and the row's norm ``[N]``;
* :func:`route_backward_kernel` -- ``dL/dc`` and ``p`` ``[N, R]`` and that kept set in, ``dL/dp``
  out, and on request ``c`` (what the values' gradient ``c^T dL/dy`` needs). It reads ``dL/dc``
  only at the ``k`` kept columns and selects nothing;
* :func:`route_read_out_kernel` -- the eval forward of steps 2-6 after the first GEMM: ``p``
  ``[N, R]`` and the base output ``y0 = W x + b`` ``[N, d_out]`` (or none) in, ``y = y0 + c B``
  ``[N, d_out]`` out, ``B`` read only at each row's ``k`` kept atoms (none of ``c``, the weights or
  a state written). The routing is :func:`route_forward_kernel`'s, helper for helper.

The arithmetic is steps 2-5 and the router's backward as
:mod:`~moram_avalanche.layers.moram.paths.reference` states them (the same gathered ``[k]`` form as
its :func:`~moram_avalanche.layers.moram.paths.reference.route`); what differs is how the kept set
``I`` is found (:func:`_top_k`).

The top-k (step 3): ``k`` rounds, each taking the largest remaining entry of the row. Every entry
of ``p`` is first mapped to an integer with the same order (:func:`_ordered_bits`: the float's bits,
all but the sign flipped for a negative number, ``-0.0`` read as ``+0.0``); a 16-bit ``p`` (bfloat16,
float16) packs that integer and its column into one 32-bit key, ``(bits << 16) | (0xFFFF - column)``,
so one integer maximum finds the value and, among equal values, the lower column; the keys are
distinct, so the next round's is the largest key below the last one picked, and no key is removed
(:func:`_below`: a subtraction a key and one unsigned minimum a row, ``REDUX.MIN.U32`` -- about 16
instructions a round where removing the picked key took 25 to 35). A 32- or 64-bit ``p`` does not
fit one machine integer with its column; its round takes two reductions (:func:`_pick`): the
largest key, then the lowest column holding it, which it removes. Either way ``I`` is the set
``torch.topk`` selects, ties going to the lower index (as the compiled CPU kernel breaks them). The
softmax, the gate and the gradient then run on the ``k`` gathered entries of each row, not on its
``BLOCK_R``; the dense outputs are written as two stores: zeros (``dL/dp = p * scale`` in the
backward) off ``I``, the gathered values at ``I``. The backward finds which entries are off ``I``
from the last kept column ``j`` (the cut): an entry is kept when ``(p_i, -i) >= (p_j, -j)``, off
otherwise -- a NaN, which compares false both ways, is off, so every entry is written by one of
the two stores (a test ``(p_i, -i) < (p_j, -j)`` for off left a row whose cut was NaN unwritten
off ``I``: uninitialised memory). The two stores are disjoint in a row without a NaN; in a row
holding one (a kept NaN, or a NaN cut) an entry may be written by both, each with NaN: such a
row's norm is NaN (:func:`_norm`, as the reference's ``clamp_min`` gives it), which makes its
whole ``dL/dp`` NaN as in the reference. Its ``c`` (``WRITE_COEF``) is NaN at ``I`` (ungated) and 0
off it, an entry both stores write 0 or NaN. Two exact alternatives cost more than the NaN rows
are worth (the sm_90 report, bfloat16, the CLIP tower's shape): the top-k's keys for the
partition, 22% more instructions a row in the backward; a NaN row's ``c`` made NaN throughout, 4%
and 39 registers a thread (75% occupancy, from 100%).

Arithmetic is float32 for float32 / bfloat16 / float16 projections (the routing's float32 of the
PyTorch paths) and float64 for float64 ones. Triton passes a Python float argument as float32
(``triton.runtime.jit.mangle_type``), so a float64 launch passes ``1 / tau``, ``delta`` and ``eps``
as the int64 of their float64 bits, which :func:`_exact` reads back. Under ``TRITON_INTERPRET=1``
(set before Triton is imported) the same kernels run on CPU tensors, which is how the test suite
checks them.

Offsets: ``tl.program_id`` and ``tl.arange`` are int32, and Triton passes an int argument below
``2 ** 31`` (a row stride) as int32, so ``row * stride`` is computed in int32 and wraps once it
reaches ``2 ** 31`` (a wrapped offset is read ``2 ** 32`` entries before the row). Each kernel
takes ``LONG_INDEX``: the launcher sets it where a launch can form an offset of ``2 ** 31`` or more
(:func:`~moram_avalanche.layers.moram.paths.triton.long_index`), and the kernel then takes its
rows, and the read-out its rows of ``B``, as int64, so that every offset made from them is int64.
Without it the kernels compile as they did before the flag (int32 offsets: fewer registers and
instructions).
"""

from __future__ import annotations

import triton
import triton.language as tl


# ---------------------------------------------------------------- a block of rows, [BLOCK_H, BLOCK_N, BLOCK_W] or rows first
@triton.jit
def _row_max(t, ROWS_FIRST: tl.constexpr):
    """Each row's maximum ``[BLOCK_N]`` of a dense block (``[BLOCK_H, BLOCK_N, BLOCK_W]``, or
    ``[BLOCK_N, BLOCK_H, BLOCK_W]`` where ``ROWS_FIRST``: module docstring)."""
    if ROWS_FIRST:
        return tl.max(tl.max(t, axis=2), axis=1)
    else:
        return tl.max(tl.max(t, axis=2), axis=0)


@triton.jit
def _row_min(t, ROWS_FIRST: tl.constexpr):
    if ROWS_FIRST:
        return tl.min(tl.min(t, axis=2), axis=1)
    else:
        return tl.min(tl.min(t, axis=2), axis=0)


@triton.jit
def _row_sum(t, ROWS_FIRST: tl.constexpr):
    if ROWS_FIRST:
        return tl.sum(tl.sum(t, axis=2), axis=1)
    else:
        return tl.sum(tl.sum(t, axis=2), axis=0)


@triton.jit
def _per_row(v, ROWS_FIRST: tl.constexpr):
    """``[BLOCK_N]`` -> ``[1, BLOCK_N, 1]`` (``[BLOCK_N, 1, 1]`` where ``ROWS_FIRST``), to meet a dense block."""
    if ROWS_FIRST:
        return v[:, None, None]
    else:
        return v[None, :, None]


@triton.jit
def _route_type(x):
    """``x`` in the routing dtype: float64 stays, the rest routes in float32."""
    if x.dtype == tl.float64:
        return x
    else:
        return x.to(tl.float32)


# ---------------------------------------------------------------- step 3: the top-k
@triton.jit
def _ordered_bits(p):
    """Signed integers of ``p``'s width in ``p``'s order: a float's bits, all but the sign flipped
    where it is set; ``-0.0`` (the sign bit alone) first read as ``+0.0``, so that the two tie as
    they compare equal (NaN unordered). On the bits, not the float: Triton's interpreter holds a
    bfloat16 as its 16 bits."""
    if p.dtype.primitive_bitwidth == 16:
        bits = p.to(tl.int16, bitcast=True)
        bits = tl.where(bits == -32768, 0, bits).to(tl.int16)
        return bits ^ ((bits >> 15) & 0x7FFF)
    elif p.dtype.primitive_bitwidth == 32:
        bits = p.to(tl.int32, bitcast=True)
        bits = tl.where(bits == -2147483648, 0, bits)
        return bits ^ ((bits >> 31) & 0x7FFFFFFF)
    else:
        bits = p.to(tl.int64, bitcast=True)
        bits = tl.where(bits == -9223372036854775807 - 1, 0, bits)
        return bits ^ ((bits >> 63) & 0x7FFFFFFFFFFFFFFF)


@triton.jit
def _lowest(key):
    """The lowest integer of ``key``'s type: no entry's key (it would be a NaN's with every bit set)."""
    if key.dtype == tl.int64:
        return -9223372036854775807 - 1
    else:
        return -2147483648


@triton.jit
def _sort_keys(p, valid, cols, PACKED: tl.constexpr):
    """The keys the rounds reduce: packed ``(bits << 16) | (0xFFFF - column)`` int32 for a 16-bit
    ``p``, the ordered bits alone otherwise; the lowest integer off the bank."""
    bits = _ordered_bits(p)
    if PACKED:
        key = (bits.to(tl.int32) << 16) | (0xFFFF - cols)
    else:
        key = bits
    return tl.where(valid, key, _lowest(key))


@triton.jit
def _below(key, top, ROWS_FIRST: tl.constexpr):
    """Each row's largest packed key below ``top`` ``[BLOCK_N]`` (keys are distinct: they hold their
    column), the rest of the row untouched: the least unsigned ``(top - 1) - key``. The subtraction
    wraps, so every key at or above ``top`` lands above every key below it: one subtraction a key and
    one unsigned minimum a row, no key removed."""
    gap = (_per_row(top - 1, ROWS_FIRST) - key).to(tl.uint32, bitcast=True)
    return (top - 1) - _row_min(gap, ROWS_FIRST).to(tl.int32, bitcast=True)


@triton.jit
def _pick(key, cols, BLOCK_R: tl.constexpr, ROWS_FIRST: tl.constexpr):
    """``(column [BLOCK_N], key with it removed)`` for keys without their column (32 or 64 bits): each
    row's largest key, then the lowest column holding it."""
    top = _row_max(key, ROWS_FIRST)
    column = _row_min(tl.where(key == _per_row(top, ROWS_FIRST), cols, BLOCK_R), ROWS_FIRST)
    return column, tl.where(cols == _per_row(column, ROWS_FIRST), _lowest(key), key)


@triton.jit
def _top_k(p, valid, cols, K: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_R: tl.constexpr,
           BLOCK_K: tl.constexpr, ROWS_FIRST: tl.constexpr):
    """``(kept, columns [BLOCK_N, BLOCK_K] int32)``: step 3's ``I`` of each row, as a dense mask and
    as its ``K`` columns in the order picked, largest first (slots past ``K``: 0)."""
    PACKED: tl.constexpr = p.dtype.primitive_bitwidth == 16
    key = _sort_keys(p, valid, cols, PACKED)
    slots = tl.arange(0, BLOCK_K)
    columns = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.int32)
    if PACKED:  # each round the largest key below the last one picked
        top = _row_max(key, ROWS_FIRST)
        for i in tl.static_range(K):
            if i > 0:
                top = _below(key, top, ROWS_FIRST)
            columns = tl.where(slots[None, :] == i, (0xFFFF - (top & 0xFFFF))[:, None], columns)
        kept = valid & (key >= _per_row(top, ROWS_FIRST))
    else:  # each round the largest key and its lowest column, removed
        for i in tl.static_range(K):
            column, key = _pick(key, cols, BLOCK_R, ROWS_FIRST)
            columns = tl.where(slots[None, :] == i, column[:, None], columns)
        kept = valid & (key == _lowest(key))
    return kept, columns


# ---------------------------------------------------------------- steps 2, 4, 5 on the kept set, and the outputs
@triton.jit
def _norm(x, eps, ROWS_FIRST: tl.constexpr):
    """Each row's ``n = max(||x||, eps)`` ``[BLOCK_N]`` (step 2); NaN where the row holds a NaN, as the
    reference's ``clamp_min`` gives it (``tl.maximum``'s default returns the other operand)."""
    return tl.maximum(tl.sqrt(_row_sum(x * x, ROWS_FIRST)), eps, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def _exact(number, P):
    """A float argument's value in a launch on projections ``P``: as it came (a Python float, which
    Triton passes as float32), or, where ``P`` is float64, read back from the int64 of its float64
    bits, as the launcher passes it (``paths.triton``'s ``_float_arguments``)."""
    if P.dtype.element_ty == tl.float64:
        return number.to(tl.int64).to(tl.float64, bitcast=True)
    else:
        return number


@triton.jit
def _weights(x_kept, live, norm, inv_tau, delta, GATED: tl.constexpr):
    """``(s, u, w)`` ``[BLOCK_N, BLOCK_K]`` of the kept projections ``x_kept`` (steps 2, 4, 5)."""
    s = x_kept / norm[:, None]                                             # 2. s = p / n
    logits = tl.where(live, s * inv_tau, float("-inf"))
    top = tl.max(logits, axis=1)
    top = tl.where(top == float("-inf"), 0.0, top)                         # rows past N: nothing kept
    e = tl.exp(logits - top[:, None])
    u = e / tl.maximum(tl.sum(e, axis=1), 1.0)[:, None]                    # 4. u = softmax(s_I / tau)
    #                                    (a kept row's sum is >= 1: its largest term is exp(0))
    if GATED:
        w = tl.where(s >= delta, u, 0.0)                                   # 5. w = u [s >= delta]
    else:
        w = u
    return s, u, w


@triton.jit
def _write(OUT, rows, stride, cols, off, off_values, columns, live, kept_values, KEEP_ALL: tl.constexpr,
           ROWS_FIRST: tl.constexpr):
    """Rows of ``OUT``: ``kept_values`` at the kept ``columns``, ``off_values`` where ``off`` (two
    disjoint stores: the dense block off the kept set, then the kept set, gathered)."""
    if not KEEP_ALL:
        tl.store(OUT + _per_row(rows, ROWS_FIRST) * stride + cols, off_values.to(OUT.dtype.element_ty), mask=off)
    tl.store(OUT + rows[:, None] * stride + columns, kept_values.to(OUT.dtype.element_ty), mask=live)


@triton.jit
def _block(P, stride_p, n_rows, n_atoms, BLOCK_N: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_W: tl.constexpr,
           LONG_INDEX: tl.constexpr, ROWS_FIRST: tl.constexpr):
    """``(rows [BLOCK_N], row_ok, cols [BLOCK_H, 1, BLOCK_W] or [1, BLOCK_H, BLOCK_W], valid, p)``: the program's rows and their
    projections ``p`` (in ``P``'s dtype, 0 off the bank), a row as ``BLOCK_H`` slices of ``BLOCK_W`` columns.
    ``rows`` are int32, or int64 where ``LONG_INDEX`` (module docstring: every offset made from a row is
    then int64)."""
    if LONG_INDEX:
        rows = tl.program_id(0).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    else:
        rows = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    if ROWS_FIRST:
        cols = tl.arange(0, BLOCK_H)[None, :, None] * BLOCK_W + tl.arange(0, BLOCK_W)[None, None, :]
    else:
        cols = tl.arange(0, BLOCK_H)[:, None, None] * BLOCK_W + tl.arange(0, BLOCK_W)[None, None, :]
    row_ok = rows < n_rows
    valid = _per_row(row_ok, ROWS_FIRST) & (cols < n_atoms)
    p = tl.load(P + _per_row(rows, ROWS_FIRST) * stride_p + cols, mask=valid, other=0.0)
    return rows, row_ok, cols, valid, p


@triton.jit
def _every_atom(rows, row_ok, valid, n_atoms, BLOCK_K: tl.constexpr):
    """``(off, columns, live)`` where every atom is kept (``k >= R``): nothing off, all ``BLOCK_K = BLOCK_R``
    columns."""
    columns = tl.arange(0, BLOCK_K)[None, :] + rows[:, None] * 0
    return valid & False, columns, row_ok[:, None] & (columns < n_atoms)


@triton.jit
def route_forward_kernel(P, C, W, KEPT, NORM, n_rows, n_atoms, stride_p, stride_c, stride_w, inv_tau, delta, eps,
                         K: tl.constexpr, GATED: tl.constexpr, KEEP_ALL: tl.constexpr, WRITE_W: tl.constexpr,
                         SAVE: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_W: tl.constexpr,
                         BLOCK_K: tl.constexpr, LONG_INDEX: tl.constexpr, ROWS_FIRST: tl.constexpr):
    BLOCK_R: tl.constexpr = BLOCK_H * BLOCK_W
    inv_tau, delta, eps = _exact(inv_tau, P), _exact(delta, P), _exact(eps, P)
    rows, row_ok, cols, valid, p = _block(P, stride_p, n_rows, n_atoms, BLOCK_N, BLOCK_H, BLOCK_W, LONG_INDEX,
                                          ROWS_FIRST)
    x = _route_type(p)
    norm = _norm(x, eps, ROWS_FIRST)                                       # 2. n = max(||p||, eps)
    if KEEP_ALL:
        off, columns, live = _every_atom(rows, row_ok, valid, n_atoms, BLOCK_K)
    else:
        kept, columns = _top_k(p, valid, cols, K, BLOCK_N, BLOCK_R, BLOCK_K, ROWS_FIRST)  # 3. I = top-k
        off = valid & ~kept
        live = row_ok[:, None] & (tl.arange(0, BLOCK_K) < K)[None, :]
        if SAVE:
            tl.store(KEPT + rows[:, None] * K + tl.arange(0, BLOCK_K)[None, :], columns.to(tl.int16), mask=live)
    x_kept = _route_type(tl.load(P + rows[:, None] * stride_p + columns, mask=live, other=0.0))
    s, u, w = _weights(x_kept, live, norm, inv_tau, delta, GATED)          # 4.-5.
    zeros = tl.zeros(valid.shape, dtype=tl.float32)
    _write(C, rows, stride_c, cols, off, zeros, columns, live, w * x_kept, KEEP_ALL, ROWS_FIRST)
    if WRITE_W:
        _write(W, rows, stride_w, cols, off, zeros, columns, live, w, KEEP_ALL, ROWS_FIRST)
    if SAVE:
        tl.store(NORM + rows, norm, mask=row_ok)


@triton.jit
def route_backward_kernel(G, P, KEPT, NORM, DP, C, n_rows, n_atoms, stride_g, stride_p, stride_dp, stride_c,
                          inv_tau, delta, eps, K: tl.constexpr, GATED: tl.constexpr, KEEP_ALL: tl.constexpr,
                          WRITE_GRAD: tl.constexpr, WRITE_COEF: tl.constexpr, BLOCK_N: tl.constexpr,
                          BLOCK_H: tl.constexpr, BLOCK_W: tl.constexpr, BLOCK_K: tl.constexpr,
                          LONG_INDEX: tl.constexpr, ROWS_FIRST: tl.constexpr):
    inv_tau, delta, eps = _exact(inv_tau, P), _exact(delta, P), _exact(eps, P)
    rows, row_ok, cols, valid, p = _block(P, stride_p, n_rows, n_atoms, BLOCK_N, BLOCK_H, BLOCK_W, LONG_INDEX,
                                          ROWS_FIRST)
    x = _route_type(p)
    norm = tl.load(NORM + rows, mask=row_ok, other=1.0)
    if KEEP_ALL:
        off, columns, live = _every_atom(rows, row_ok, valid, n_atoms, BLOCK_K)
    else:  # the forward's kept columns; off them: past the last kept (the cut) in the top-k's order
        live = row_ok[:, None] & (tl.arange(0, BLOCK_K) < K)[None, :]
        columns = tl.load(KEPT + rows[:, None] * K + tl.arange(0, BLOCK_K)[None, :], mask=live, other=0)
        columns = columns.to(tl.int32)
        cut = tl.load(KEPT + rows * K + (K - 1), mask=row_ok, other=0).to(tl.int32)
        x_cut = _route_type(tl.load(P + rows * stride_p + cut, mask=row_ok, other=0.0))
        x_cut, cut = _per_row(x_cut, ROWS_FIRST), _per_row(cut, ROWS_FIRST)
        kept = (x > x_cut) | ((x == x_cut) & (cols <= cut))
        off = valid & ~kept  # (a NaN compares false both ways: off, module docstring)
    x_kept = _route_type(tl.load(P + rows[:, None] * stride_p + columns, mask=live, other=0.0))
    s, u, w = _weights(x_kept, live, norm, inv_tau, delta, GATED)
    if WRITE_COEF:
        _write(C, rows, stride_c, cols, off, tl.zeros(valid.shape, dtype=tl.float32), columns, live, w * x_kept,
               KEEP_ALL, ROWS_FIRST)
    if WRITE_GRAD:
        g = tl.load(G + rows[:, None] * stride_g + columns, mask=live, other=0.0).to(x.dtype)  # dL/dc at I
        if GATED:
            grad_u = tl.where(live & (s >= delta), g * x_kept, 0.0)        # dL/du = m dL/dc p_I
        else:
            grad_u = tl.where(live, g * x_kept, 0.0)
        grad_z = u * (grad_u - tl.sum(grad_u * u, axis=1)[:, None])
        grad_s = grad_z * inv_tau
        norm_scale = -tl.sum(grad_s * s, axis=1) / (norm * norm)
        norm_scale = tl.where(norm > eps, norm_scale, norm_scale * 0.0)    # 0 where n was clamped at eps
        #                                    (times 0, as the reference masks it: a NaN norm's row stays NaN)
        _write(DP, rows, stride_dp, cols, off, x * _per_row(norm_scale, ROWS_FIRST), columns, live,
               x_kept * norm_scale[:, None] + (g * w + grad_s / norm[:, None]), KEEP_ALL, ROWS_FIRST)


@triton.jit
def _slot(t, slots, i):
    """Slot ``i`` of each row of a ``[BLOCK_N, BLOCK_K]`` block: ``[BLOCK_N]`` (the one term of a row's sum)."""
    return tl.sum(tl.where(slots[None, :] == i, t, 0), axis=1)


@triton.jit
def route_read_out_kernel(P, Y0, B, Y, n_rows, n_atoms, n_out, offset_p, stride_p, stride_y0, stride_b, stride_y,
                          inv_tau, delta, eps, K: tl.constexpr, GATED: tl.constexpr, BASE: tl.constexpr,
                          BLOCK_N: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_W: tl.constexpr,
                          BLOCK_K: tl.constexpr, BLOCK_O: tl.constexpr, LONG_INDEX: tl.constexpr,
                          ROWS_FIRST: tl.constexpr):
    """``Y = Y0 + c B`` on the program's ``BLOCK_N`` rows and ``BLOCK_O`` output columns (grid axis 1):
    steps 2-5 as :func:`route_forward_kernel` takes them (``k < R``), then, kept slot by kept slot,
    the slot's ``c_i * B[i, :]`` summed in the routing dtype, ``Y0`` added (``BASE``), rounded once.
    ``p`` starts ``offset_p`` entries into ``P`` (the stacked GEMM's one output, ``y0`` its first
    ``n_out`` columns, passes ``P = Y0`` and ``offset_p = n_out``: no views made per call)."""
    BLOCK_R: tl.constexpr = BLOCK_H * BLOCK_W
    inv_tau, delta, eps = _exact(inv_tau, P), _exact(delta, P), _exact(eps, P)
    P += offset_p
    rows, row_ok, cols, valid, p = _block(P, stride_p, n_rows, n_atoms, BLOCK_N, BLOCK_H, BLOCK_W, LONG_INDEX,
                                          ROWS_FIRST)
    x = _route_type(p)
    norm = _norm(x, eps, ROWS_FIRST)                                       # 2. n = max(||p||, eps)
    kept, columns = _top_k(p, valid, cols, K, BLOCK_N, BLOCK_R, BLOCK_K, ROWS_FIRST)  # 3. I = top-k
    slots = tl.arange(0, BLOCK_K)
    live = row_ok[:, None] & (slots < K)[None, :]
    x_kept = _route_type(tl.load(P + rows[:, None] * stride_p + columns, mask=live, other=0.0))
    s, u, w = _weights(x_kept, live, norm, inv_tau, delta, GATED)          # 4.-5.
    coef = w * x_kept                                                      #    c = w p at I
    outs = tl.program_id(1) * BLOCK_O + tl.arange(0, BLOCK_O)
    out_ok = row_ok[:, None] & (outs < n_out)[None, :]
    total = tl.zeros([BLOCK_N, BLOCK_O], dtype=coef.dtype)
    for i in tl.static_range(K):                                           # 6. sum_I c_i B_i
        c_i = _slot(coef, slots, i)
        atom = _slot(columns, slots, i)
        if LONG_INDEX:
            atom = atom.to(tl.int64)
        b_i = tl.load(B + atom[:, None] * stride_b + outs[None, :],
                      mask=out_ok & (c_i != 0)[:, None], other=0.0)        # (a closed gate's row: not read)
        total += c_i[:, None] * b_i.to(total.dtype)
    if BASE:                                                               #    + W x + b
        total += tl.load(Y0 + rows[:, None] * stride_y0 + outs[None, :], mask=out_ok, other=0.0).to(total.dtype)
    tl.store(Y + rows[:, None] * stride_y + outs[None, :], total.to(Y.dtype.element_ty), mask=out_ok)


__all__ = ["route_backward_kernel", "route_forward_kernel", "route_read_out_kernel"]
