"""Atomic file writes: a reader never sees a half-written file, a crash never loses the old one."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Callable


def atomic_write(path, write: Callable[[Any], None], mode: str = "w") -> Path:
    """Call ``write(file)`` on a temporary file next to ``path``, then rename it over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, mode) as file:
            write(file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_text(path, text: str) -> Path:
    return atomic_write(path, lambda f: f.write(text))


def atomic_write_bytes(path, data: bytes) -> Path:
    return atomic_write(path, lambda f: f.write(data), mode="wb")
