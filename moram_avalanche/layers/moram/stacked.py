"""The frozen base and the bank's keys as one matrix: ``[W x + b | A x] = x [W; A]^T + [b; 0]``.

Step 1 (``p = A x``) and the base's ``W x + b`` read the same tokens. On the GPU paths
(:mod:`~moram_avalanche.layers.moram.paths.dense`) they are two GEMMs, so every token is read twice
from memory; on a 768-wide layer of the CLIP tower that second read is about a quarter of the
bytes a call moves (issue "GPU path II", item 3: "``[W; A]`` in one GEMM where the re-read of
``x`` dominates"). Stacked, ``W`` ``[d_out, d_in]`` over ``A`` ``[R, d_in]``, one GEMM gives both:
the first ``d_out`` columns of its ``[N, d_out + R]`` output are ``W x + b``, the last ``R`` are
``p``, read in place as two views (no copy).

The stacked matrix is a copy (``W`` and ``A`` live in separate tensors), so it is kept only where a
user asked for the base's copy (:func:`~moram_avalanche.layers.moram.layer.keep_base_casts`,
``--keep-base-casts``: memory for speed), and only where no backward follows (``torch.no_grad()``,
inference mode: evaluation and generation), where nothing it holds changes between calls. The
hand-written backward keeps reading ``W`` and ``A`` apart. :class:`StackedBase` is what a call
reads; :func:`stack_base` builds it; the layer keeps one per compute dtype and builds it again when
any tensor it was built from is replaced or edited in place
(:meth:`~moram_avalanche.layers.moram.layer.MoRAMRouting.stacked_base`). Pure torch.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import torch


class StackedBase(NamedTuple):
    """The frozen base and the bank in one dtype, as a call without a backward reads them."""

    weight_keys_t: torch.Tensor  # [W; A]^T [d_in, d_out + R] (a transposed view of the stacked rows)
    bias: Optional[torch.Tensor]  # [b; 0] [d_out + R], or None where the base has no bias
    values: torch.Tensor  # B [R, d_out], the trainable rows times the bank's new_value_scale
    out_features: int  # d_out: columns ..d_out of the GEMM are W x + b, the rest p = A x
    num_atoms: int  # R


def stack_base(weight: torch.Tensor, bias: Optional[torch.Tensor], keys: torch.Tensor, values: torch.Tensor,
               dtype: torch.dtype) -> StackedBase:
    """``W`` ``[d_out, d_in]`` and ``b`` (or None) of the base, and the whole bank's ``keys`` ``[R, d_in]``
    and ``values`` ``[R, d_out]`` (frozen rows first, the trainable ones already scaled), stacked in
    ``dtype`` (detached: no autograd reads them)."""
    out_features, num_atoms = weight.shape[0], keys.shape[0]
    if keys.shape[1] != weight.shape[1] or values.shape != (num_atoms, out_features):
        raise ValueError(f"cannot stack a base [{out_features}, {weight.shape[1]}] with keys {tuple(keys.shape)} and "
                         f"values {tuple(values.shape)}: expected keys [R, {weight.shape[1]}] and values "
                         f"[R, {out_features}]")
    rows = torch.cat([weight.detach().to(dtype), keys.detach().to(dtype)])
    stacked_bias = None
    if bias is not None:
        stacked_bias = torch.cat([bias.detach().to(dtype), bias.new_zeros(num_atoms, dtype=dtype)])
    return StackedBase(rows.t(), stacked_bias, values.detach().to(dtype).contiguous(), out_features, num_atoms)


__all__ = ["StackedBase", "stack_base"]
