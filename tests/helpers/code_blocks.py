"""The fenced code blocks of the project's Markdown pages, and how each kind is checked.

The rule (README.md, ``docs/**/*.md``, ``examples/README.md``): every fence names its language.
``python`` blocks of one page run in order in one fresh interpreter (like a notebook); a block
preceded by ``<!-- not-run: <reason> -->`` is only compiled. ``bash`` lines that call
``moram-avalanche`` (or ``python -m moram_avalanche``, ``torchrun ... -m moram_avalanche``) must
parse with the real argument parser; ``python scripts/X.py`` and ``python examples/X.py`` must name
files that exist. ``yaml``, ``json`` and ``toml`` blocks must parse; ``text`` is not code.
"""

from __future__ import annotations

import re
import shlex
import textwrap
from pathlib import Path
from typing import List, NamedTuple, Optional

__all__ = ["LANGUAGES", "Block", "blocks_of", "command_lines", "moram_argv", "pages", "python_script"]

#: the fence languages a page may use
LANGUAGES = ("python", "bash", "text", "yaml", "json", "toml", "bibtex")

_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_NOT_RUN = re.compile(r"^\s*<!--\s*not-run:\s*(?P<why>\S.*?)\s*-->\s*$")


class Block(NamedTuple):
    """One fenced block: its page, the line of its opening fence (1-based), language, text."""

    page: Path
    line: int
    language: str
    text: str
    not_run: Optional[str]  # the reason given in a ``<!-- not-run: ... -->`` line before it


def pages(root: Path) -> List[Path]:
    """The Markdown pages whose blocks are checked (CHANGELOG.md is history: not checked)."""
    found = [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    found += [p for p in [root / "examples" / "README.md"] if p.exists()]
    return [p for p in found if p.exists()]


def blocks_of(page: Path) -> List[Block]:
    """Every fenced block of ``page``, in order; an unclosed fence is an error naming its line."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks: List[Block] = []
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if match is None:
            i += 1
            continue
        indent, fence = match["indent"], match["fence"]
        language = (match["info"].strip().split() or [""])[0].strip("{}.")
        start = i
        body: List[str] = []
        i += 1
        while i < len(lines) and not (lines[i].strip().startswith(fence) and lines[i].strip().strip(fence[0]) == ""):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i].lstrip())
            i += 1
        if i == len(lines):
            raise ValueError(f"{page}:{start + 1}: the fence opened here is never closed")
        previous = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        not_run = _NOT_RUN.match(previous)
        blocks.append(Block(page, start + 1, language, textwrap.dedent("\n".join(body)) + "\n",
                            not_run["why"] if not_run else None))
        i += 1
    return blocks


def command_lines(text: str) -> List[str]:
    """The commands of a ``bash`` block: comments dropped, ``\\`` continuations joined, ``&&``, ``;``
    and ``|`` split into separate commands."""
    joined = re.sub(r"\s*\\\n\s*", " ", text)
    commands: List[str] = []
    for line in joined.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        for part in re.split(r"\s(?:&&|\|\||;|\|)\s", line):
            part = part.strip()
            if part:
                commands.append(part)
    return commands


def moram_argv(command: str) -> Optional[List[str]]:
    """The arguments after the program when ``command`` runs the ``moram-avalanche`` command line
    (directly, as ``python -m moram_avalanche`` or under ``torchrun ... -m moram_avalanche``), after
    leading ``VAR=value`` assignments; None for any other command."""
    words = shlex.split(command, comments=True)
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
        words = words[1:]
    if not words:
        return None
    if words[0] == "moram-avalanche":
        return words[1:]
    if words[0] in ("python", "python3", "torchrun") and "-m" in words:
        at = words.index("-m")
        if at + 1 < len(words) and words[at + 1] == "moram_avalanche":
            return words[at + 2:]
    return None


def python_script(blocks: List[Block]) -> str:
    """One program running the page's runnable ``python`` blocks in order in one namespace; each block
    is compiled under a name giving its page and line, so a traceback points at the page."""
    parts = ["import sys", "namespace = {'__name__': '__main__'}"]
    for block in blocks:
        if block.language != "python" or block.not_run:
            continue
        name = f"{block.page.name}:{block.line}"
        parts.append(f"print('--- block', {name!r}, flush=True)")
        parts.append(f"exec(compile({block.text!r}, {name!r}, 'exec'), namespace)")
    return "\n".join(parts) + "\n"
