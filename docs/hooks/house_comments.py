"""The house's ``#:`` comments above a constant, read as its docstring (pure Python: shared by
the griffe extension ``griffe_comments.py`` and the check ``api_coverage.py``)."""

from __future__ import annotations

from typing import Sequence, Tuple


def comment_above(lines: Sequence[str], lineno: int) -> Tuple[str, int]:
    """``(text, first line)`` of the ``#:`` comment lines right above line ``lineno`` (1-based),
    joined without their ``#:``; ``("", lineno)`` when there are none."""
    comments = []
    number = lineno - 2
    while number >= 0 and lines[number].strip().startswith("#:"):
        comments.append(lines[number].strip()[2:].strip())
        number -= 1
    return " ".join(reversed(comments)), number + 2
