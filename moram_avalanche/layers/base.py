"""LinearWrapper: what every adapter over a frozen ``nn.Linear`` shares (MoRAM, LoRA, MoE-LoRA).

The adapter keeps the pre-trained layer by composition as ``self.base`` (frozen, untouched;
peft's ``base_layer`` pattern) and exposes its shape and parameters under the names code
written for ``nn.Linear`` reads: open_clip, for one, reads ``c_fc.weight.dtype``.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import nn


class LinearWrapper(nn.Module):
    """Base class of the adapters: holds ``base`` frozen; ``in_features``, ``out_features``,
    ``weight`` and ``bias`` are the base layer's."""

    def __init__(self, base: nn.Linear) -> None:
        super().__init__()
        if not isinstance(base, nn.Linear):
            raise TypeError(
                f"{type(self).__name__} wraps an nn.Linear, got {type(base).__name__}. "
                "Replace only linear layers (see moram_avalanche.clip.inject)."
            )
        self.base = base
        base.requires_grad_(False)

    @property
    def in_features(self) -> int:
        return self.base.in_features

    @property
    def out_features(self) -> int:
        return self.base.out_features

    @property
    def weight(self) -> torch.Tensor:
        """The base weight (with any update merged into it)."""
        return self.base.weight

    @property
    def bias(self) -> Optional[torch.Tensor]:
        return self.base.bias


def check_positive_int(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
