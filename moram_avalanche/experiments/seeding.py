"""Seed every random number generator a run draws from: Python's, NumPy's and torch's.

The MoRAM release seeds all three with 42 before anything else (``seed_all`` of the ZSCL /
MoE-Adapters lineage [MoE-Adapters4CL mtil/src/utils.py]; [Artificer-AI-Lab/MoRAM XTAIL/main.py]
``--seed 42``); ``run``, ``compare`` and ``reproduce`` do the same, with the same default.
"""

from __future__ import annotations

import random

import numpy as np
import torch

#: the release's seed (``--seed`` default of ``run``, ``compare`` and ``reproduce``)
RELEASE_SEED = 42


def seed_everything(seed: int = RELEASE_SEED) -> int:
    """Seed Python's ``random``, NumPy's global generator and torch (CPU and every CUDA
    device); returns ``seed``."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < 2 ** 32:
        raise ValueError(f"seed must be an integer in [0, 2**32), got {seed!r}")
    random.seed(int(seed))
    np.random.seed(int(seed))
    torch.manual_seed(int(seed))  # seeds every CUDA device too
    return int(seed)


__all__ = ["RELEASE_SEED", "seed_everything"]
