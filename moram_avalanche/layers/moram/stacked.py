"""The frozen base and the bank's keys as one matrix: ``[W x + b | A x] = x [W; A]^T + [b; 0]``.

Step 1 (``p = A x``) and the base's ``W x + b`` read the same tokens. On the GPU paths
(:mod:`~moram_avalanche.layers.moram.paths.dense`) they are two GEMMs, so every token is read twice
from memory; on a 768-wide layer of the CLIP tower that second read is about a quarter of the
bytes a call moves (issue "GPU path II", item 3: "``[W; A]`` in one GEMM where the re-read of
``x`` dominates"). Stacked, ``W`` ``[d_out, d_in]`` over ``A`` ``[R, d_in]``, one GEMM gives both:
the first ``d_out`` columns of its ``[N, d_out + R]`` output are ``W x + b``, the last ``R`` are
``p``, read in place (no copy): as two views of it, or, by a planned call's read-out, as it is
(:meth:`~moram_avalanche.layers.moram.paths.triton.ReadOut.joined`: ``p`` at ``d_out`` entries into
each row).

The stacked matrix is a copy (``W`` and ``A`` live in separate tensors), so it is kept only where a
user asked for the base's copy (:func:`~moram_avalanche.layers.moram.layer.keep_base_casts`,
``--keep-base-casts``: memory for speed), only where no backward follows (``torch.no_grad()``,
inference mode: evaluation and generation), and only of a frozen bank, where nothing it holds
changes between calls (a task's trainable rows change at every optimizer step, not always
visibly: :meth:`~moram_avalanche.layers.moram.layer.MoRAMRouting.stacked_base`). The
hand-written backward keeps reading ``W`` and ``A`` apart. :class:`StackedBase` is what a call
reads; :func:`stack_base` builds it; the layer keeps one per compute dtype and builds it again when
any tensor it was built from is replaced or edited in place
(:meth:`~moram_avalanche.layers.moram.layer.MoRAMRouting.stacked_base`). Pure torch.
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Sequence, Tuple

import torch


class StackedBase(NamedTuple):
    """The frozen base and the bank in one dtype, as a call without a backward reads them."""

    weight_keys_t: torch.Tensor  # [W; A]^T [d_in, d_out + R] (a transposed view of the stacked rows)
    bias: Optional[torch.Tensor]  # [b; 0] [d_out + R], or None where the base has no bias
    values: torch.Tensor  # B [R, d_out], the trainable rows times the bank's new_value_scale
    out_features: int  # d_out: columns ..d_out of the GEMM are W x + b, the rest p = A x
    num_atoms: int  # R


class StackedGroup(NamedTuple):
    """Several layers' :class:`StackedBase` over the same input, side by side in one copy: one GEMM
    ``x [W_1; A_1; W_2; A_2; ...]^T + [b_1; 0; b_2; 0; ...]`` gives every layer's base and
    projections (open_clip's packed ``in_proj`` for q, k and v, with their keys)."""

    weight_keys_t: torch.Tensor  # [d_in, sum of (d_out + R)]
    bias: Optional[torch.Tensor]  # [sum of (d_out + R)], or None where no base has a bias
    parts: Tuple[StackedBase, ...]  # each layer's, views of the above
    columns: Tuple[Tuple[int, int], ...]  # each layer's columns (start, stop) of the GEMM's output


def stack_bases(parts: Sequence[Tuple[torch.Tensor, Optional[torch.Tensor], torch.Tensor, torch.Tensor]],
                dtype: torch.dtype) -> StackedGroup:
    """Each ``(W [d_out, d_in], b or None, keys [R, d_in], values [R, d_out])`` (the bank's rows
    frozen first, the trainable values already scaled) stacked in ``dtype``, every layer's rows
    beside the last one's, in one tensor (detached: no autograd reads them)."""
    if not parts:
        raise ValueError("stack_bases needs at least one (weight, bias, keys, values)")
    width = parts[0][0].shape[1]
    rows, biases, columns, sizes = [], [], [], []
    start = 0
    for weight, bias, keys, values in parts:
        out_features, num_atoms = weight.shape[0], keys.shape[0]
        if weight.shape[1] != width or keys.shape[1] != width or values.shape != (num_atoms, out_features):
            raise ValueError(f"cannot stack a base {tuple(weight.shape)} with keys {tuple(keys.shape)} and values "
                             f"{tuple(values.shape)}: expected keys [R, {width}] and values [R, {out_features}], "
                             f"every base reading {width} features")
        rows += [weight.detach().to(dtype), keys.detach().to(dtype)]
        biases += [None if bias is None else bias.detach().to(dtype), weight.new_zeros(num_atoms, dtype=dtype)]
        columns.append((start, start + out_features + num_atoms))
        sizes.append((out_features, num_atoms))
        start += out_features + num_atoms
    whole = torch.cat(rows).t()
    bias = None
    if any(b is not None for b in biases[::2]):
        bias = torch.cat([b if b is not None else whole.new_zeros(parts[i // 2][0].shape[0])
                          for i, b in enumerate(biases)])
    stacked = tuple(
        StackedBase(whole[:, first:last], None if bias is None else bias[first:last],
                    values.detach().to(dtype).contiguous(), out_features, num_atoms)
        for (first, last), (out_features, num_atoms), (_, _, _, values) in zip(columns, sizes, parts))
    return StackedGroup(whole, bias, stacked, tuple(columns))


def stack_base(weight: torch.Tensor, bias: Optional[torch.Tensor], keys: torch.Tensor, values: torch.Tensor,
               dtype: torch.dtype) -> StackedBase:
    """One layer's :class:`StackedBase` (:func:`stack_bases` of one)."""
    return stack_bases([(weight, bias, keys, values)], dtype).parts[0]


__all__ = ["StackedBase", "StackedGroup", "stack_base", "stack_bases"]
