"""Notes a host library logs that say nothing to a user of this package, dropped by their exact
opening words on the one logger that logs them (every other record of that logger still passes).

One filter, used where the package imports the library that logs the note (bitsandbytes' CPU
note on import: :mod:`moram_avalanche.text.host_notes`), around the call that logs it (open_clip's
random-weights note in the demo) or for one import (torch's CUDA-runtime note when the CPU kernel
builds).
"""

from __future__ import annotations

import contextlib
import logging
from typing import Iterator

__all__ = ["DropNote", "drop_note", "note_dropped"]


class DropNote(logging.Filter):
    """A logging filter that drops the records whose message starts with ``opening``."""

    def __init__(self, opening: str) -> None:
        super().__init__()
        if not opening:
            raise ValueError("DropNote needs the opening words of the note to drop, got an empty string "
                             "(which would drop every record of the logger)")
        self.opening = opening

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(self.opening)


def drop_note(logger: str, opening: str) -> None:
    """Drop ``logger``'s records that start with ``opening`` from now on (once per pair: calling
    again adds no second filter)."""
    target = logging.getLogger(logger)
    if not any(isinstance(f, DropNote) and f.opening == opening for f in target.filters):
        target.addFilter(DropNote(opening))


@contextlib.contextmanager
def note_dropped(logger: str, opening: str) -> Iterator[None]:
    """Drop ``logger``'s records that start with ``opening`` inside the ``with`` block only
    (``logger=""``: the root logger)."""
    note, target = DropNote(opening), logging.getLogger(logger)
    target.addFilter(note)
    try:
        yield
    finally:
        target.removeFilter(note)
