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
import sys
from pathlib import Path

import griffe

sys.path.insert(0, str(Path(__file__).resolve().parent))
from house_comments import comment_above, plain_roles, split_grouped_parameters  # a sibling file, not a package


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
