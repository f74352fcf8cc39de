"""MoE-Adapters beside open_clip's residual blocks, reached by wrapping two leaf modules.

Nothing of open_clip is copied. ``ResidualAttentionBlock.forward`` ends with
``x = x + self.ls_2(self.mlp(self.ln_2(x)))`` (open_clip 3.3, batch-first ``[B, N, d]``), so
two leaf wrappers are enough: :class:`StreamTap` replaces ``ln_2`` and hands its input (the
residual stream) to the block's :class:`~moram_avalanche.layers.moe_adapter.MoEAdapterMixture`;
:class:`MixtureAdd` replaces ``ls_2`` (an ``nn.Identity`` in CLIP) and adds the mixture's
output to the MLP branch: ``x <- x + MLP(LN2(x)) + sum_e g_e(x) E_e(x)`` with the experts
reading the stream before ``ln_2``, as the official MoE-Adapters code (baselines reference,
section 2.1). No Avalanche here.
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence

import torch
from torch import nn

from ..layers.base import find_layers
from ..layers.moe_adapter import MoEAdapterMixture
from .towers import ENCODERS, blocks


class StreamTap(nn.Module):
    """Wraps ``ln_2``: passes its input to the block's mixture, returns ``ln_2(x)`` unchanged."""

    def __init__(self, base: nn.Module, mixture: MoEAdapterMixture) -> None:
        super().__init__()
        self.base = base
        # not a submodule: the mixture is registered once, under MixtureAdd
        object.__setattr__(self, "_mixture", mixture)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self._mixture.remember(x)
        return self.base(x)


class MixtureAdd(nn.Module):
    """Wraps ``ls_2``: ``ls_2(mlp_out) + mixture(stream before ln_2)``."""

    def __init__(self, base: nn.Module, mixture: MoEAdapterMixture) -> None:
        super().__init__()
        self.base = base
        self.moe = mixture

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.base(x)
        extra = self.moe.take()
        return out if extra is None else out + extra


def inject_moe_adapters(
    model: nn.Module,
    encoders: Sequence[str] = ENCODERS,
    *,
    experts: int = 22,
    bottleneck: int = 64,
    topk: int = 2,
    dropout: float = 0.1,
    scale: float = 0.1,
    freeze_model: bool = True,
) -> Dict[str, MoEAdapterMixture]:
    """Give every residual block of ``encoders`` a :class:`MoEAdapterMixture` beside its MLP.

    Defaults are the release's MTIL setting (``--ffn_adapt_where AdapterDoubleEncoder
    --experts_num 22 --topk 2``; bottleneck 64, dropout 0.1, scale 0.1 in its ``Adapter``).
    With ``freeze_model`` every existing CLIP parameter is frozen first. The mixtures start
    with no router: the model computes exactly what it did until
    :func:`~moram_avalanche.layers.moe_adapter.add_router` and a
    route are given. Returns ``{dotted block name: mixture}``.
    """
    if find_layers(model, MoEAdapterMixture):
        raise ValueError("the model already holds MoE adapters: inject_moe_adapters once per model")
    found = blocks(model, encoders)
    for block in found:
        if not (isinstance(getattr(block.module, "ln_2", None), nn.Module)
                and isinstance(getattr(block.module, "ls_2", None), nn.Module)):
            raise TypeError(f"{block.encoder} block {block.name!r} ({type(block.module).__name__}) "
                            "lacks ln_2/ls_2: only open_clip's ResidualAttentionBlock is supported")
    if freeze_model:
        model.requires_grad_(False)
    mixtures = {}
    for full, block, _ in found:
        like = block.mlp.c_fc.weight
        mixture = MoEAdapterMixture(block.mlp.c_fc.in_features, experts, bottleneck, topk, dropout,
                                    scale, device=like.device, dtype=like.dtype)
        block.ln_2 = StreamTap(block.ln_2, mixture).train(block.training)
        block.ls_2 = MixtureAdd(block.ls_2, mixture).train(block.training)  # the model's mode
        mixtures[full] = mixture
    return mixtures


def block_mixture(block: nn.Module) -> Optional[MoEAdapterMixture]:
    """The mixture :func:`inject_moe_adapters` put beside ``block``'s MLP, or None."""
    tap = getattr(block, "ls_2", None)
    return tap.moe if isinstance(tap, MixtureAdd) else None


__all__ = ["MixtureAdd", "StreamTap", "block_mixture", "inject_moe_adapters"]
