"""Argument checks shared by every room: a clear ValueError that names the argument."""

from __future__ import annotations

import math
import numbers


def check_positive_int(name: str, value) -> int:
    """``value`` if it is an int >= 1 (bools refused); else a ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


def check_nonnegative_int(name: str, value) -> int:
    """``value`` if it is an int >= 0 (bools refused); else a ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be an int >= 0, got {value!r}")
    return value


def check_int_range(name: str, value, *, low: int = 1, high: int, hint: str = "") -> int:
    """``value`` if it is an int in ``[low, high]`` (bools refused); else a ValueError naming
    ``name``, the range and ``hint`` (why the bound, how to go beyond it). For counts that make
    work or memory grow (``--tasks 1000000`` would run for minutes without a word)."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name} must be an int in [{low}, {high}]{hint and f' ({hint})'}, got {value!r}")
    return value


def check_number(name: str, value, *, low: float = -math.inf, high: float = math.inf,
                 low_open: bool = False, high_open: bool = False, hint: str = "") -> float:
    """``value`` if it is a finite real number in the given range; else a ValueError naming
    ``name``, the range and ``hint`` (e.g. the paper's value). NaN and infinities are refused."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    if ok:
        ok = (value > low if low_open else value >= low) and (value < high if high_open else value <= high)
    if not ok:
        if math.isfinite(low) and math.isfinite(high):
            bounds = f" in {'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
        elif math.isfinite(low):
            bounds = f" {'>' if low_open else '>='} {low:g}"
        elif math.isfinite(high):
            bounds = f" {'<' if high_open else '<='} {high:g}"
        else:
            bounds = ""
        raise ValueError(f"{name} must be a finite number{bounds}{hint and f' ({hint})'}, got {value!r}")
    return value


def check_choice(name: str, value, choices, *, hint: str = ""):
    """``value`` if it is one of ``choices``; else a ValueError naming ``name``, the choices and
    ``hint`` (e.g. which one the published code makes)."""
    if value not in tuple(choices):
        raise ValueError(f"{name} must be one of {tuple(choices)}{hint and f' ({hint})'}, got {value!r}")
    return value


__all__ = ["check_choice", "check_int_range", "check_nonnegative_int", "check_number", "check_positive_int"]
