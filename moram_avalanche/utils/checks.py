"""Argument checks shared by every room: a clear ValueError that names the argument."""

from __future__ import annotations


def check_positive_int(name: str, value) -> int:
    """``value`` if it is an int >= 1 (bools refused); else a ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value
