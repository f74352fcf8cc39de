"""The per-iteration learning-rate schedule of the CLIP continual-learning codebases."""

from __future__ import annotations

import math
from collections.abc import Mapping


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


def quarter_cosine_lr_factor(step: int, *, warmup: int, total: int) -> float:
    """InfLoRA's schedule, per step: ``cos(99 pi s / (200 (S - 1)))`` over the ``S`` steps after warm-up.

    InfLoRA's ``CosineSchedule`` sets ``lr * cos(99 pi e / (200 (K - 1)))`` at epoch ``e`` of
    ``K`` [liangyanshuo/InfLoRA utils/schedulers.py; methods/inflora.py]: a quarter cosine
    that starts at 1, ends at ``cos(0.495 pi) ~ 0.0157`` on the last epoch, never reaches 0,
    and averages ~0.64 (the half cosine of :func:`cosine_lr_factor` ends at 0 and averages
    0.5). Here ``e / (K - 1)`` becomes ``s / (S - 1)`` for step ``s`` of ``S = total - warmup``
    (1 throughout when ``S <= 1``), after the same linear warm-up as :func:`cosine_lr_factor`.
    """
    if step < warmup:
        return (step + 1) / warmup
    span = total - warmup - 1
    if span < 1:
        return 1.0
    return math.cos(99 * math.pi * min(step - warmup, span) / (200 * span))


#: the per-step learning-rate factors a strategy may pick by name (``lr_schedule``)
LR_SCHEDULES = {"cosine": cosine_lr_factor, "quarter_cosine": quarter_cosine_lr_factor}


def _key(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


class DomainLR:
    """A learning rate chosen by the domain being learned: ``overrides`` by name, else ``default``.

    Domain names match case-insensitively and ignoring everything but letters and digits
    ("FGVC-Aircraft" matches a key "fgvcaircraft"). ZSCL's MTIL scripts set the learning rate
    per dataset this way (:data:`ZSCL_MTIL_LR`).
    """

    def __init__(self, default: float, overrides: Mapping[str, float] | None = None) -> None:
        self.default = float(default)
        self.overrides = {_key(k): float(v) for k, v in (overrides or {}).items()}
        if self.default <= 0 or any(v <= 0 for v in self.overrides.values()):
            raise ValueError(f"learning rates must be positive, got {self!r}")

    def __call__(self, domain: str) -> float:
        return self.overrides.get(_key(domain), self.default)

    def __repr__(self) -> str:
        return f"DomainLR({self.default:g}, {self.overrides})"


#: ZSCL's MTIL learning rates: 1e-5, and 5e-5 for Aircraft and MNIST (the per-dataset ``lr``
#: arrays of ZSCL.sh, lwf.sh, lwf_vr.sh and WiSE_finetune.sh [ZSCL mtil/scripts/*.sh]).
ZSCL_MTIL_LR = DomainLR(1e-5, {"aircraft": 5e-5, "fgvcaircraft": 5e-5, "mnist": 5e-5})

#: the names and aliases of the MTIL domains (:data:`moram_avalanche.benchmarks.images.domains.SPECS`),
#: as :class:`DomainLR` keys, in the release's order I
_MTIL_KEYS = {
    "aircraft": ("aircraft", "fgvcaircraft"),
    "caltech101": ("caltech101", "caltech"),
    "cifar100": ("cifar100",),
    "dtd": ("dtd", "describabletextures"),
    "eurosat": ("eurosat",),
    "flowers": ("flowers", "flowers102", "oxfordflowers"),
    "food": ("food", "food101"),
    "mnist": ("mnist",),
    "pets": ("oxfordpet", "oxfordpets", "pets"),
    "cars": ("stanfordcars", "cars"),
    "sun397": ("sun397", "sun"),
}


def _mtil_lr(values) -> DomainLR:
    """A :class:`DomainLR` from the 11 rates of an MTIL order-I ``lr=(...)`` script array."""
    if len(values) != len(_MTIL_KEYS):
        raise ValueError(f"expected {len(_MTIL_KEYS)} learning rates, got {len(values)}")
    return DomainLR(1e-3, {key: lr for keys, lr in zip(_MTIL_KEYS.values(), values) for key in keys})


#: MoE-Adapters' few-shot (5-shot) MTIL learning rates, order I: Aircraft 8e-3, Caltech101 5e-4,
#: CIFAR100 2e-4, DTD 5e-3, EuroSAT 1e-3, Flowers 1e-3, Food 1e-2, MNIST 1e-4, Pets 1e-2,
#: Cars 1e-2, SUN397 1e-2 (the ``lr`` array of
#: ``mtil/scripts/train/train_few_shot_router11_experts22_1000iters.sh`` [MoE-Adapters4CL];
#: baselines reference, section 2.2). Keys cover the names and aliases of
#: :data:`moram_avalanche.benchmarks.images.domains.SPECS`. Other domains (e.g. the synthetic
#: stream): 1e-3, the list's most common value -- our choice.
MOE_FEWSHOT_MTIL_LR = _mtil_lr((8e-3, 5e-4, 2e-4, 5e-3, 1e-3, 1e-3, 1e-2, 1e-4, 1e-2, 1e-2, 1e-2))

#: MoE-Adapters' full-shot MTIL learning rates, order I: Aircraft 5e-3, Caltech101 1e-3,
#: CIFAR100 5e-3, DTD 1e-3, EuroSAT 1e-4, Flowers 1e-3, Food 1e-3, MNIST 1e-4, Pets 1e-3,
#: Cars 1e-3, SUN397 1e-3 (the ``lr`` array of
#: ``mtil/scripts/train/train_full_shot_router11_experts22_1000iters.sh`` [MoE-Adapters4CL];
#: baselines reference, section 2.2). Same keys as :data:`MOE_FEWSHOT_MTIL_LR`; other
#: domains: 1e-3, the list's most common value -- our choice.
MOE_FULLSHOT_MTIL_LR = _mtil_lr((5e-3, 1e-3, 5e-3, 1e-3, 1e-4, 1e-3, 1e-3, 1e-4, 1e-3, 1e-3, 1e-3))


__all__ = ["LR_SCHEDULES", "MOE_FEWSHOT_MTIL_LR", "MOE_FULLSHOT_MTIL_LR", "ZSCL_MTIL_LR", "DomainLR",
           "cosine_lr_factor", "quarter_cosine_lr_factor"]
