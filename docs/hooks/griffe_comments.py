"""A griffe extension for mkdocstrings: the house's docstring habits, as griffe reads them.

* a constant documented by ``#:`` comment lines right above its assignment (Sphinx's habit, the
  house's) gets them as its docstring, so the API reference shows it (and
  ``docs/hooks/api_coverage.py`` counts it documented);
* a Google-style ``Args:`` item naming several parameters at once (``train_limit, test_limit:
  at most ...``, as numpydoc allows) is given to each of them, so griffe neither warns that
  ``train_limit, test_limit`` is no parameter nor leaves them undocumented;
* Sphinx roles in docstrings (``:class:`~.loop.CLIPStrategy```, ``:func:`run_one```) are
  written as code (`` `CLIPStrategy` ``, `` `run_one` ``: a ``~`` keeps the last name), since
  the site renders Markdown, not reStructuredText.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import griffe

sys.path.insert(0, str(Path(__file__).resolve().parent))
from house_comments import comment_above  # noqa: E402  (a sibling file, not a package)

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


class HouseDocstrings(griffe.Extension):
    """``#:`` comments become attribute docstrings; grouped parameters are split; Sphinx roles
    become code spans."""

    def on_instance(self, *, node, obj, agent, **kwargs) -> None:
        if obj.docstring is not None:
            obj.docstring.value = split_grouped_parameters(plain_roles(obj.docstring.value))

    def on_attribute_instance(self, *, node, attr, agent, **kwargs) -> None:
        if attr.docstring is not None or not isinstance(node, ast.AST):
            return
        text, first = comment_above(attr.module.lines, node.lineno)
        if text:
            attr.docstring = griffe.Docstring(plain_roles(text), lineno=first, endlineno=node.lineno - 1,
                                              parent=attr)
