"""SplitAttention: ``nn.MultiheadAttention`` with separate q, k, v and out linear layers.

``nn.MultiheadAttention`` packs the q, k and v projections into one ``in_proj_weight``, so no
per-matrix adapter can reach them. SplitAttention has the same call signature and return
value, holds four ordinary ``nn.Linear`` modules (``q_proj``, ``k_proj``, ``v_proj``,
``out_proj``) initialised from the packed weights, and computes the same function (up to
float rounding), so it can replace the attention of any open_clip residual block and
then any adapter (MoRAM atoms, LoRA) can wrap each of the four matrices. Where MoRAM wraps q, k
and v of a self-attention and no backward follows, the three are read by one GEMM again, with
their keys (:func:`~moram_avalanche.layers.moram.together.read_together`, when the bases' copies are
kept).

:func:`split_attention` replaces the attention of every block of a model, choosing how by the
attention module's type (:data:`ATTENTION_SPLITTERS`, peft's ``dispatch_default`` pattern).
"""

from __future__ import annotations

import math
from typing import Callable, Dict, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from ..layers.moram.together import read_together
from .towers import ENCODERS, blocks


class SplitAttention(nn.Module):
    """Multi-head attention with one ``nn.Linear`` per projection (drop-in for ``nn.MultiheadAttention``).

    Build it from an existing module with :meth:`from_mha`. Supports batch-first and
    sequence-first inputs, unbatched inputs, boolean or additive ``attn_mask`` (``[L, S]`` or
    ``[B * num_heads, L, S]``), ``key_padding_mask``, ``need_weights`` (with head averaging),
    dropout and the ``is_causal`` hint (which, as in PyTorch, requires ``attn_mask``).
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        *,
        kdim: Optional[int] = None,
        vdim: Optional[int] = None,
        bias: bool = True,
        dropout: float = 0.0,
        batch_first: bool = False,
        device=None,
        dtype=None,
    ) -> None:
        super().__init__()
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim ({embed_dim}) must be divisible by num_heads ({num_heads})")
        factory = {"device": device, "dtype": dtype}
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        self.kdim = kdim or embed_dim
        self.vdim = vdim or embed_dim
        self.dropout = dropout
        self.batch_first = batch_first
        self.q_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **factory)
        self.k_proj = nn.Linear(self.kdim, embed_dim, bias=bias, **factory)
        self.v_proj = nn.Linear(self.vdim, embed_dim, bias=bias, **factory)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias, **factory)

    @classmethod
    def from_mha(cls, mha: nn.MultiheadAttention) -> "SplitAttention":
        """A SplitAttention computing what ``mha`` computes, with copies of its weights."""
        if not isinstance(mha, nn.MultiheadAttention):
            raise TypeError(f"expected nn.MultiheadAttention, got {type(mha).__name__}")
        if mha.bias_k is not None or mha.add_zero_attn:
            raise ValueError(
                "SplitAttention does not support add_bias_kv or add_zero_attn (CLIP uses neither)"
            )
        ref = mha.out_proj.weight
        split = cls(
            mha.embed_dim, mha.num_heads, kdim=mha.kdim, vdim=mha.vdim,
            bias=mha.in_proj_bias is not None, dropout=mha.dropout, batch_first=mha.batch_first,
            device=ref.device, dtype=ref.dtype,
        )
        if mha._qkv_same_embed_dim:
            weights = mha.in_proj_weight.chunk(3, dim=0)
        else:
            weights = (mha.q_proj_weight, mha.k_proj_weight, mha.v_proj_weight)
        biases = (None,) * 3 if mha.in_proj_bias is None else mha.in_proj_bias.chunk(3, dim=0)
        with torch.no_grad():
            for layer, weight, bias in zip((split.q_proj, split.k_proj, split.v_proj), weights, biases):
                layer.weight.copy_(weight)
                if bias is not None:
                    layer.bias.copy_(bias)
            split.out_proj.weight.copy_(mha.out_proj.weight)
            if mha.out_proj.bias is not None:
                split.out_proj.bias.copy_(mha.out_proj.bias)
        split.train(mha.training)
        split.requires_grad_(mha.out_proj.weight.requires_grad)
        return split

    def forward(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        key_padding_mask: Optional[torch.Tensor] = None,
        need_weights: bool = True,
        attn_mask: Optional[torch.Tensor] = None,
        average_attn_weights: bool = True,
        is_causal: bool = False,
    ) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
        if is_causal and attn_mask is None:
            raise RuntimeError(
                "Need attn_mask if specifying the is_causal hint (as nn.MultiheadAttention)."
            )
        self_attention = query is key and key is value
        batched = query.dim() == 3
        if not batched:
            query, key, value = query.unsqueeze(0), key.unsqueeze(0), value.unsqueeze(0)
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask.unsqueeze(0)
        elif not self.batch_first:
            query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
        batch, tgt_len, src_len = query.shape[0], query.shape[1], key.shape[1]

        together = read_together((self.q_proj, self.k_proj, self.v_proj), query) if self_attention else None
        if together is not None:  # MoRAM on q, k and v, no backward: one GEMM, as a packed in_proj
            q, k, v = (self._heads(t) for t in together)
        else:
            q = self._heads(self.q_proj(query))
            k = self._heads(self.k_proj(key))
            v = self._heads(self.v_proj(value))
        mask = self._merged_mask(attn_mask, key_padding_mask, batch, tgt_len, src_len, q.dtype)
        dropout_p = self.dropout if self.training else 0.0

        weights = None
        if need_weights:
            scores = (q * (1.0 / math.sqrt(self.head_dim))) @ k.transpose(-2, -1)
            if mask is not None:
                scores = scores + mask
            weights = torch.softmax(scores, dim=-1)
            attended = F.dropout(weights, p=dropout_p) if dropout_p > 0 else weights
            out = attended @ v
            if average_attn_weights:
                weights = weights.mean(dim=1)
        else:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
        out = self.out_proj(out.transpose(1, 2).reshape(batch, tgt_len, self.embed_dim))

        if not batched:
            out = out.squeeze(0)
            weights = weights.squeeze(0) if weights is not None else None
        elif not self.batch_first:
            out = out.transpose(0, 1)
        return out, weights

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, L, E]`` -> ``[B, num_heads, L, head_dim]``."""
        return x.view(x.shape[0], x.shape[1], self.num_heads, self.head_dim).transpose(1, 2)

    def _merged_mask(self, attn_mask, key_padding_mask, batch, tgt_len, src_len, dtype):
        """One additive mask broadcastable to ``[B, num_heads, L, S]``, or None."""
        mask = None
        if attn_mask is not None:
            mask = _additive(attn_mask, dtype)
            if mask.dim() == 3:
                mask = mask.view(batch, self.num_heads, tgt_len, src_len)
            elif mask.dim() != 2:
                raise RuntimeError(f"attn_mask must be 2-D or 3-D, got shape {tuple(mask.shape)}")
        if key_padding_mask is not None:
            padding = _additive(key_padding_mask, dtype).view(batch, 1, 1, src_len)
            mask = padding if mask is None else mask + padding
        return mask

    def extra_repr(self) -> str:
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, batch_first={self.batch_first}"


def _additive(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Boolean masks (True = not allowed) become 0 / -inf; float masks are cast."""
    if mask.dtype == torch.bool:
        return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(mask, float("-inf"))
    return mask.to(dtype)


#: Attention module type -> a function returning an equal drop-in module whose q, k, v and out
#: projections are separate ``nn.Linear`` layers (the same call signature as the module it
#: replaces). Looked up by exact type, then along the type's MRO.
#:
#: Where the next entry goes: open_clip's main branch replaces the block's
#: ``nn.MultiheadAttention`` by its own ``open_clip.transformer.Attention`` (packed
#: ``in_proj_weight`` / ``in_proj_bias``, an ``out_proj`` linear, called as
#: ``attn(x, attn_mask=...)``; no release has it yet, open_clip 3.3.0 does not). Supporting it
#: is one entry, ``ATTENTION_SPLITTERS[Attention] = <a builder>``, whose module splits the
#: packed weight into q/k/v linears as :meth:`SplitAttention.from_mha` does and keeps that
#: class's ``(x, attn_mask)`` signature and options (``scaled_cosine``, ``scale_heads``).
ATTENTION_SPLITTERS: Dict[type, Callable[[nn.Module], nn.Module]] = {
    nn.MultiheadAttention: SplitAttention.from_mha,
}


def splitter_for(attention: nn.Module) -> Optional[Callable[[nn.Module], nn.Module]]:
    """The :data:`ATTENTION_SPLITTERS` entry for ``attention``'s type (or a base type), or None."""
    for kind in type(attention).__mro__:
        if kind in ATTENTION_SPLITTERS:
            return ATTENTION_SPLITTERS[kind]
    return None


def split_attention(model: nn.Module, encoders: Sequence[str] = ENCODERS) -> int:
    """Replace each block's attention by an equal module with separate q/k/v/out linears.

    The replacement is chosen by the attention's type (:data:`ATTENTION_SPLITTERS`). Every
    block is checked before any is replaced: a block whose attention type has no entry is a
    TypeError naming the type, and the model is left as it was. Idempotent (already split
    blocks are left alone). Returns how many were replaced.
    """
    todo = []
    for block in blocks(model, encoders):
        attention = block.module.attn
        if isinstance(attention, SplitAttention):
            continue
        splitter = splitter_for(attention)
        if splitter is None:
            raise TypeError(
                f"{block.encoder} block {block.name!r} uses {type(attention).__name__}, which "
                f"moram_avalanche cannot split into q/k/v/out linears (supported: "
                f"{', '.join(t.__name__ for t in ATTENTION_SPLITTERS)}); add an entry to "
                "moram_avalanche.clip.attention.ATTENTION_SPLITTERS"
            )
        todo.append((block.module, splitter))
    for module, splitter in todo:
        module.attn = splitter(module.attn)
    return len(todo)


__all__ = ["ATTENTION_SPLITTERS", "SplitAttention", "split_attention", "splitter_for"]
