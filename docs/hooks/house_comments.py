"""The house's docstring habits read as mkdocstrings' Markdown and Google style (pure Python,
shared by the griffe extension ``griffe_comments.py`` and the check ``api_coverage.py``; tested
without MkDocs): ``#:`` comments above a constant as its docstring, Sphinx roles as code spans,
an ``Args:`` item naming several parameters given to each."""

from __future__ import annotations

import re
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


#: a Sphinx cross-reference role: ``:class:`target```, ``:py:func:`~a.b```
ROLE = re.compile(r":(?:py:)?(?:mod|class|func|meth|data|attr|obj|exc|const|pep):`(~?)([^`]+)`")


def plain_roles(text: str) -> str:
    """``text`` with each Sphinx role written as a code span (``~``: its last dotted name)."""
    def code(match: re.Match) -> str:
        target = match[2].split(".")[-1] if match[1] else match[2].lstrip(".")
        return f"`{target}`"

    return ROLE.sub(code, text)


#: a section header of a Google-style docstring that lists parameters
PARAMETER_SECTIONS = ("Args:", "Arguments:", "Parameters:", "Params:", "Keyword Args:", "Keyword Arguments:",
                      "Other Parameters:", "Attributes:")
GROUPED_ITEM = re.compile(r"^(?P<indent>\s+)(?P<names>\*{0,2}\w+(?:,\s*\*{0,2}\w+)+):(?P<text>.*)$")


def split_grouped_parameters(text: str) -> str:
    """``text`` with each parameter item naming several (``a, b: what``, and its indented
    continuation lines) repeated once per name (``a: what``, ``b: what``)."""
    lines = text.split("\n")
    out = []
    in_section = False
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.strip() in PARAMETER_SECTIONS:
            in_section = True
        elif line.strip() and not line.startswith((" ", "\t")):
            in_section = False
        match = GROUPED_ITEM.match(line) if in_section else None
        if not match:
            out.append(line)
            index += 1
            continue
        indent = match["indent"]
        following = index + 1
        while following < len(lines) and lines[following].strip() and \
                len(lines[following]) - len(lines[following].lstrip()) > len(indent):
            following += 1
        for name in match["names"].split(","):
            out.append(f"{indent}{name.strip()}:{match['text']}")
            out.extend(lines[index + 1:following])
        index = following
    return "\n".join(out)
