"""Several MoRAM layers that read the same input, with their bases and keys in ONE GEMM.

A transformer block's attention reads one input three times: q, k and v. open_clip packs their
weights in one ``in_proj`` so that plain CLIP makes one GEMM of the three; with MoRAM on each
(three :class:`~moram_avalanche.layers.moram.layer.MoRAMLinear` over the split projections,
:class:`~moram_avalanche.clip.attention.SplitAttention`) that was six GEMMs reading the input, the
base and step 1 (``p = A x``) of each. :func:`read_together` makes them one (issue "GPU path II",
item 3: "q/k/v and their keys in one GEMM as open_clip packs in_proj"):

    x [W_q; A_q; W_k; A_k; W_v; A_v]^T + [b_q; 0; b_k; 0; b_v; 0]

then each layer's routing and read-out on its own columns (views), exactly as its own stacked
call (:func:`~moram_avalanche.layers.moram.paths.dense.stacked_mixture`). Where that call applies
to every layer (their bases' copies kept, :func:`~moram_avalanche.layers.moram.layer.keep_base_casts`;
no backward follows; a GPU path), the group's copy is kept once, each layer's part a view of it
(:func:`~moram_avalanche.layers.moram.layer.keep_stacked`); anywhere else it returns None and the
caller calls each layer. Pure torch.
"""

from __future__ import annotations

from typing import List, Optional, Sequence

import torch
from torch import nn

from .hooks import plain_call
from .layer import MoRAMLinear, compute_dtype, keep_stacked, tokens_of
from .stacked import StackedGroup


def read_together(layers: Sequence[nn.Module], x: torch.Tensor) -> Optional[List[torch.Tensor]]:
    """Each layer's output for the input ``x`` ``[..., d_in]`` (the same as calling it), from one GEMM
    over their stacked bases and keys, or None where that does not apply (module docstring): a layer
    that is not a :class:`~moram_avalanche.layers.moram.layer.MoRAMLinear` over a plain
    ``nn.Linear`` with atoms and its base's copy kept, a bank with trainable rows, a layer with hooks
    or a ``forward`` set on it (accelerate's offload: a call runs them, so it is made), grad mode on, a CPU path, an input the layers would refuse, or
    under ``torch.compile`` without the group's kept copy."""
    if not layers or not x.is_floating_point() or x.dim() == 0 or not all(map(plain_call, layers)):
        return None  # each layer's own call says what is wrong, and runs its hooks (or its wrapped forward)
    dtype = compute_dtype(x)
    tokens = None
    calls = []
    for layer in layers:
        if not (isinstance(layer, MoRAMLinear) and layer.fuses_base()
                and (not layer.training or type(layer).forward is MoRAMLinear.forward)  # (no dropout of its own)
                and layer.stacks_base(layer.base.weight) and layer.in_features == x.shape[-1]):
            return None
        num_atoms = layer.num_atoms
        if not num_atoms:
            return None
        tokens = tokens if tokens is not None else tokens_of(x, dtype)
        k, gate = layer.routing_now(num_atoms)
        mixture = layer.path(tokens, num_atoms, k, gate is not None, True)
        if mixture is None:
            return None
        calls.append((mixture, k, gate))
    group = kept_group(layers, dtype)
    if group is None:
        return None
    weight_keys_t, bias = group.weight_keys_t, group.bias
    full = torch.mm(tokens, weight_keys_t) if bias is None else torch.addmm(bias, tokens, weight_keys_t)
    outs = []  # each layer's steps 2-6 on its columns, as its own stacked call (stacked_mixture's full)
    for layer, (mixture, k, gate), part, (start, stop) in zip(layers, calls, group.parts, group.columns):
        out, idx, weights = mixture(tokens, part, k, layer.temperature, gate, layer.recording, full[:, start:stop])
        if layer.recording:
            layer.record(idx, weights)
        outs.append(out if x.dim() == 2 else out.reshape(*x.shape[:-1], layer.out_features))
    return outs


def kept_group(layers: Sequence[MoRAMLinear], dtype: torch.dtype) -> Optional[StackedGroup]:
    """The group's kept copy in ``dtype`` (every layer's kept part of the same one, in order), built
    again where any part changed; None where a bank has trainable rows, and under ``torch.compile``
    where no copy is kept (none is made while tracing:
    :meth:`~moram_avalanche.layers.moram.layer.MoRAMRouting.stacked_base` says why)."""
    sources = [layer.stack_sources(layer.base.weight, layer.base.bias) for layer in layers]
    if any(kept[4] is not None for kept in sources):
        return None  # a bank with trainable rows is never stacked (MoRAMRouting.stacked_base says why)
    entries = [layer.kept_stacked(dtype, kept) for layer, kept in zip(layers, sources)]
    if all(entry is not None for entry in entries):
        group = entries[0][3]
        if len(group.parts) == len(layers) and all(entry[2] is part for entry, part in zip(entries, group.parts)):
            return group
    if torch.compiler.is_compiling():
        return None
    return keep_stacked(layers, sources, dtype)


__all__ = ["kept_group", "read_together"]
