"""The per-iteration learning-rate schedule of the CLIP continual-learning codebases."""

from __future__ import annotations

import math


def cosine_lr_factor(step: int, *, warmup: int, total: int) -> float:
    """Multiplier of the base learning rate at optimizer step ``step`` (0-based).

    Linear warm-up ``(step + 1) / warmup`` for ``warmup`` steps, then a cosine decay from 1
    towards 0 over the remaining ``total - warmup`` steps (``cosine_lr`` of the wise-ft /
    ZSCL / MoRAM code, set every iteration; baselines reference section 0).
    """
    if step < warmup:
        return (step + 1) / warmup
    span = max(total - warmup, 1)
    return 0.5 * (1 + math.cos(math.pi * (step - warmup) / span))
