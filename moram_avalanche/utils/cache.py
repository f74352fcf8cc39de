"""The package's own cache folder: the weights it makes itself (the demos' pre-trained tiny models)."""

from __future__ import annotations

import os
from pathlib import Path

#: the environment variable that moves the cache
CACHE_VARIABLE = "MORAM_AVALANCHE_CACHE"


def default_cache_dir() -> Path:
    """Where the package caches the weights it makes (the demos' pre-trained tiny CLIP and T5):
    ``$MORAM_AVALANCHE_CACHE``, else ``~/.cache/moram-avalanche``."""
    return Path(os.environ.get(CACHE_VARIABLE, Path.home() / ".cache" / "moram-avalanche"))


__all__ = ["CACHE_VARIABLE", "default_cache_dir"]
