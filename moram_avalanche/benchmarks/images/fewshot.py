"""Few-shot sampling of a domain's training split, reproducible per domain.

The reference code samples from Python's / numpy's global RNG, consumed in a code-path
dependent order (MoRAM rebuilds every domain for each evaluation), so its exact subsets cannot
be regenerated [datasets.md §5.1]. Deliberate deviation: every domain gets its own generator
seeded from ``(seed, domain name)``, and classes are sampled in label order -- the subset of a
domain depends only on the seed, not on the stream order or on which other domains exist.
"""

from __future__ import annotations

import zlib
from typing import List, Sequence

import numpy as np


def domain_rng(seed: int, domain: str) -> np.random.Generator:
    """The sampling generator of ``domain`` for ``seed``."""
    return np.random.default_rng([int(seed), zlib.crc32(domain.encode("utf-8"))])


def few_shot_indices(targets: Sequence[int], shots: int, rng: np.random.Generator, *,
                     replace_short: bool) -> List[int]:
    """``shots`` indices per class, classes in label order.

    A class with at least ``shots`` items is sampled without replacement. A shorter class is
    sampled with replacement when ``replace_short`` (X-TAIL: CoOp's ``random.choices``
    [MoRAM scenario_datasets/utils.py generate_fewshot_dataset]) and otherwise keeps all its
    items (MTIL 5-shot: the first 5 seen per class, or fewer [MoE mtil/src/models/finetune.py]).
    """
    if shots < 1:
        raise ValueError(f"shots must be >= 1, got {shots}")
    targets = np.asarray(targets)
    chosen: List[int] = []
    for label in np.unique(targets):
        members = np.flatnonzero(targets == label)
        if len(members) >= shots:
            picks = rng.choice(len(members), size=shots, replace=False)
        elif replace_short:
            picks = rng.choice(len(members), size=shots, replace=True)
        else:
            picks = np.arange(len(members))
        chosen += members[picks].tolist()
    return chosen
