"""Names chosen by the user (``--strategy``, ``--benchmark``, encoders, targets): one error format."""

from __future__ import annotations

from typing import Mapping, Sequence, Tuple, TypeVar

T = TypeVar("T")


def lookup(table: Mapping[str, T], name: str, kind: str) -> T:
    """``table[name.lower()]``, or a ValueError listing what is available."""
    try:
        return table[name.lower()]
    except KeyError:
        raise ValueError(f"unknown {kind} {name!r}; available: {', '.join(sorted(table))}") from None


def check_names(given: str | Sequence[str], valid: Sequence[str], kind: str) -> Tuple[str, ...]:
    """``given`` (one name or several) as a tuple, each one of ``valid``; else a ValueError.

    A single string counts as one name (``"visual"``, not five letters).
    """
    names = (given,) if isinstance(given, str) else tuple(given)
    unknown = [name for name in names if name not in valid]
    if unknown or not names:
        raise ValueError(f"unknown {kind}(s) {unknown or list(names)!r}; expected a non-empty subset "
                         f"of {tuple(valid)}")
    return names
