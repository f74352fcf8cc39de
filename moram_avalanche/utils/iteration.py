"""Endless iteration over a finite loader: fixed iteration budgets over small datasets."""

from __future__ import annotations

from typing import Iterable, Iterator, TypeVar

T = TypeVar("T")


def cycle(loader: Iterable[T], what: str) -> Iterator[T]:
    """Yield ``loader``'s items forever, re-iterating it (a shuffling loader reshuffles).

    Unlike :func:`itertools.cycle` nothing is cached, so every pass draws anew. An empty
    loader raises ``ValueError("<what> is empty")`` (the user's data) instead of looping forever.
    """
    while True:
        empty = True
        for item in loader:
            empty = False
            yield item
        if empty:
            raise ValueError(f"{what} is empty")
