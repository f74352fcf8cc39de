"""Name -> object lookups for ``--strategy`` / ``--benchmark``, with one error format."""

from __future__ import annotations

from typing import Mapping, TypeVar

T = TypeVar("T")


def lookup(table: Mapping[str, T], name: str, kind: str) -> T:
    """``table[name.lower()]``, or a ValueError listing what is available."""
    try:
        return table[name.lower()]
    except KeyError:
        raise ValueError(f"unknown {kind} {name!r}; available: {', '.join(sorted(table))}") from None
