"""GatedLoRALinear: a frozen ``nn.Linear`` plus a LoRA update whose rank-1 components are gated.

CoDyRA's layer [Artificer-AI-Lab/CoDyRA ``loralib/codyra.py`` ``codyra_Linear``; commit
c1691e4]: ``y = W x + b + ((x D^T) * g) U^T`` with the down-projection ``D`` ``[rank, d_in]``
(Kaiming-uniform, ``a = sqrt(5)``), the up-projection ``U`` ``[d_out, rank]`` (zero) and one
gate per component ``g`` ``[rank]`` (standard normal), scale 1. Rank selection drives gates to
zero (:mod:`moram_avalanche.algorithms.rank_selection`); :attr:`active_rank` counts the rest.
:meth:`merge` folds ``(U * g) D`` into the base weight and :meth:`restart` draws fresh
factors for the next task (the official ``increment_task``). The declared state (what a
checkpoint keeps) is ``down``, ``up``, ``gate`` and the merged ``base.weight``.

Pure torch: no Avalanche, no open_clip.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ..utils.checks import check_positive_int
from .base import LinearWrapper


class GatedLoRALinear(LinearWrapper):
    """``W x + b + up((down x) * gate)`` over a frozen base ``nn.Linear``; mergeable.

    Args:
        base: the pre-trained linear; frozen and kept as ``self.base``.
        rank: the number of gated components per task (CoDyRA: 16).
    """

    STATE_KEYS = ("down", "up", "gate", "base.weight")

    def __init__(self, base: nn.Linear, rank: int) -> None:
        super().__init__(base)
        check_positive_int("rank", rank)
        self.rank = rank
        like = self.template
        self.down = nn.Parameter(like.new_empty(rank, base.in_features))
        self.up = nn.Parameter(like.new_zeros(base.out_features, rank))
        self.gate = nn.Parameter(like.new_empty(rank))
        self.restart()

    @torch.no_grad()
    def restart(self) -> None:
        """Fresh factors: ``D`` Kaiming-uniform (``a = sqrt(5)``), ``U`` zero, ``g`` standard normal."""
        nn.init.kaiming_uniform_(self.down, a=math.sqrt(5))
        self.up.zero_()
        self.gate.normal_()

    @property
    def active_rank(self) -> int:
        """Components whose gate is not zero (the rank the layer adds to the weight)."""
        return int(torch.count_nonzero(self.gate))

    def delta_weight(self) -> torch.Tensor:
        """The update as a dense ``[d_out, d_in]`` matrix: ``(U * g) D``."""
        return (self.up * self.gate) @ self.down

    @torch.no_grad()
    def merge(self) -> torch.Tensor:
        """Add the gated update to the base weight and set ``U`` to zero; returns the added matrix."""
        delta = self.delta_weight().detach()
        self.base.weight.add_(delta.to(self.base.weight.dtype))
        self.up.zero_()
        return delta

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = nn.functional.linear(x, self.down.to(x.dtype)) * self.gate.to(x.dtype)
        return self.base(x) + nn.functional.linear(hidden, self.up.to(x.dtype))

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, rank={self.rank}"


__all__ = ["GatedLoRALinear"]
