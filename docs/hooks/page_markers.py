"""A marker line of a page (``<!-- name -->``, alone on its line) that a hook replaces with
generated Markdown; shared by the hooks of ``docs/hooks/``.

A build whose pages hold a hook's marker nowhere is warned (so a strict build fails): the
generated text cannot drop out of the site unnoticed.
"""

from __future__ import annotations

import logging
from typing import Callable, List


class MarkerLine:
    """The line ``<!-- name -->`` and the pages of the current build that held it."""

    def __init__(self, name: str):
        self.line = f"<!-- {name} -->"
        self.pages: List[str] = []

    def holds(self, markdown: str) -> bool:
        """Whether ``markdown`` has the marker alone on a line."""
        return any(line.strip() == self.line for line in markdown.splitlines())

    def replace(self, markdown: str, page: str, generate: Callable[[], str]) -> str:
        """``markdown`` with each marker line replaced by ``generate()`` (called only when the
        page holds the marker; ``page`` is remembered for :meth:`warn_if_unused`)."""
        if not self.holds(markdown):
            return markdown
        self.pages.append(page)
        text = generate().rstrip("\n")
        return "\n".join(text if line.strip() == self.line else line for line in markdown.splitlines()) + "\n"

    def start(self) -> None:
        """Forget the pages of an earlier build (``mkdocs serve`` rebuilds in one process)."""
        self.pages = []

    def warn_if_unused(self, logger: logging.Logger) -> None:
        """Warn when no page of this build held the marker."""
        if not self.pages:
            logger.warning("no page holds the line %s: its generated text is missing from the site", self.line)
