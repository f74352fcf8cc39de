"""LoRALinear: a frozen ``nn.Linear`` plus one low-rank update ``scale * U D`` that can be merged.

The low-rank adapter shared by the parameter-efficient baselines and ablations (SeqLoRA,
InfLoRA). Pure torch: no Avalanche, no open_clip.

For a token ``x``: ``y = W x + b + scale * U (D x)`` with the down-projection ``D``
``[rank, d_in]`` and the up-projection ``U`` ``[d_out, rank]``. Initialisation follows LoRA
(Hu et al., 2021; peft's default): ``D`` Kaiming-uniform with ``a = sqrt(5)`` like
``nn.Linear.weight``, ``U`` zero, so the layer starts equal to the base. Either factor can be
frozen (InfLoRA freezes a designed ``D`` and trains ``U`` only) or replaced
(:meth:`set_down`). :meth:`merge` folds the update into the base weight and restarts ``U``
at zero (InfLoRA's merge after each task; baselines reference, section 3.2 step 5); only a
layer built ``mergeable=True`` merges, and its declared state (what a checkpoint keeps) then
includes the base weight it changes: ``down``, ``up`` and ``base.weight``. A plain layer
declares ``down`` and ``up`` only.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ..utils.checks import check_positive_int
from .base import LinearWrapper


class LoRALinear(LinearWrapper):
    """``W x + b + scale * up(down(x))`` over a frozen base ``nn.Linear``.

    Args:
        base: the pre-trained linear; frozen and kept as ``self.base``.
        rank: the rank ``r`` of the update.
        scale: the factor of the update (peft: ``alpha / r``; 1 here unless stated).
        mergeable: whether :meth:`merge` may fold the update into the base weight (InfLoRA);
            the base weight is then part of the layer's declared state.
    """

    def __init__(self, base: nn.Linear, rank: int, scale: float = 1.0, mergeable: bool = False) -> None:
        super().__init__(base)
        check_positive_int("rank", rank)
        self.rank = rank
        self.scale = float(scale)
        self.mergeable = bool(mergeable)
        like = self.template
        self.down = nn.Parameter(like.new_empty(rank, base.in_features))
        self.up = nn.Parameter(like.new_zeros(base.out_features, rank))
        self.reset_down()

    @property
    def state_keys(self):
        return ("down", "up", "base.weight") if self.mergeable else ("down", "up")

    @torch.no_grad()
    def reset_down(self) -> None:
        """``D`` Kaiming-uniform (``a = sqrt(5)``), as ``nn.Linear`` and LoRA initialise it."""
        nn.init.kaiming_uniform_(self.down, a=math.sqrt(5))

    @torch.no_grad()
    def set_down(self, down: torch.Tensor) -> None:
        """Replace ``D`` by ``down`` ``[rank, in_features]`` (in place: optimizers keep it)."""
        if tuple(down.shape) != tuple(self.down.shape):
            raise ValueError(f"down must be {tuple(self.down.shape)}, got {tuple(down.shape)}")
        self.down.copy_(down)

    def delta_weight(self) -> torch.Tensor:
        """The update as a dense ``[d_out, d_in]`` matrix: ``scale * U D``."""
        return self.scale * (self.up @ self.down)

    @torch.no_grad()
    def merge(self) -> torch.Tensor:
        """Add ``scale * U D`` to the base weight and set ``U`` to zero; returns the added matrix.

        The layer computes the same function before and after (up to rounding). Only a layer
        built ``mergeable=True`` merges: a plain layer's checkpoint does not hold the base weight.
        """
        if not self.mergeable:
            raise RuntimeError("this LoRALinear was built with mergeable=False, so its checkpoints "
                               "keep only the factors; build it with mergeable=True to merge")
        delta = self.delta_weight().detach()
        self.base.weight.add_(delta.to(self.base.weight.dtype))
        self.up.zero_()
        return delta

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.base(x)
        update = nn.functional.linear(nn.functional.linear(x, self.down.to(x.dtype)), self.up.to(x.dtype))
        return out + self.scale * update

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, rank={self.rank}, "
                f"scale={self.scale}" + (", mergeable=True" if self.mergeable else ""))


__all__ = ["LoRALinear"]
