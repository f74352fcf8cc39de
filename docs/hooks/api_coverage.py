"""The API reference's strict check: every public name has a docstring and is rendered.

A module is public when it is the package or one of its sub-packages and defines ``__all__``
(:func:`public_modules`). Each name of each such ``__all__`` must be rendered by a ``:::``
directive of an API page (``docs/api/*.md``; a directive names an object, or a module with an
explicit ``members:`` list) and what is rendered must carry a docstring as griffe reads it: a
class's or a function's own docstring, a constant's string literal right below its assignment or
its ``#:`` comment lines right above it (the house's Sphinx-style comments, which
``docs/hooks/griffe_comments.py`` hands to mkdocstrings). Dunder names (``__version__``) are
metadata and exempt.

As a MkDocs hook it runs before the build and aborts it with the list of failures (one line
each: what is missing, where to add it); as a script (``python docs/hooks/api_coverage.py``) it
prints the same and exits 1. Read without mkdocs: ``tests/docs/test_docs_hooks.py`` plants an
undocumented name in a fake module.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import pkgutil
import re
import sys
from pathlib import Path
from typing import Dict, Iterable, List, NamedTuple, Optional, Tuple

from house_comments import comment_above

ROOT = Path(__file__).resolve().parents[2]
API_PAGES = ROOT / "docs" / "api"
PACKAGE = "moram_avalanche"

#: a ``:::`` directive and the YAML lines indented below it (mkdocstrings' syntax)
DIRECTIVE = re.compile(r"^::: *(?P<path>[\w.]+) *$")
MEMBERS = re.compile(r"^\s+members:\s*\[(?P<names>[^\]]*)\]\s*$")


class Rendered(NamedTuple):
    """One object an API page renders: its dotted path as written and the page that writes it."""

    path: str
    page: str


def public_modules(package: str = PACKAGE) -> List[str]:
    """The package and every sub-package (not plain modules) that defines ``__all__``, by name."""
    root = importlib.import_module(package)
    names = [package]
    for info in pkgutil.walk_packages(root.__path__, prefix=package + "."):
        if info.ispkg and "__all__" in vars(importlib.import_module(info.name)):
            names.append(info.name)
    return names


def rendered_paths(pages: Iterable[Path]) -> List[Rendered]:
    """Every object the ``:::`` directives of ``pages`` render: a directive's path, or, for a
    directive with ``members: [a, b]``, ``path.a`` and ``path.b`` (the module itself too)."""
    rendered = []
    for page in pages:
        lines = Path(page).read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines):
            match = DIRECTIVE.match(line)
            if not match:
                continue
            path = match["path"]
            rendered.append(Rendered(path, Path(page).name))
            for option in lines[number + 1:]:
                if not option.startswith((" ", "\t")):
                    break
                members = MEMBERS.match(option)
                if members:
                    rendered.extend(Rendered(f"{path}.{name.strip()}", Path(page).name)
                                    for name in members["names"].split(",") if name.strip())
    return rendered


def resolve(path: str) -> Tuple[object, str, str]:
    """``(object, module name, attribute name)`` of a dotted ``path``: the longest importable
    module prefix, then attributes; for a module, attribute name ``""``."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            module = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        value = module
        for part in parts[cut:]:
            value = getattr(value, part)
        return value, module.__name__, ".".join(parts[cut:])
    raise ImportError(f"{path}: no importable module in this path")


def defines_itself(value) -> bool:
    """Whether ``value`` knows where it is defined (a module, class or function)."""
    return inspect.ismodule(value) or inspect.isclass(value) or inspect.isroutine(value)


def same_object(public: object, name: str, rendered: object, rendered_name: str) -> bool:
    """Whether a rendered object is the public one: the same object, and for a number, string or
    ``None`` (which Python shares between unrelated names) the same name too."""
    if public is not rendered:
        return False
    shared = public is None or isinstance(public, (bool, int, float, str, bytes))
    return not shared or name == rendered_name.rpartition(".")[2]


def locate(module_name: str, name: str, seen: Optional[set] = None):
    """Where ``name`` is defined at the top level of ``module_name``'s source: ``(module name,
    statement, following statement, source lines)``, following ``from ... import name`` to the
    defining module; ``None`` when it is not found there. ``name`` may be ``Class.member``."""
    seen = set() if seen is None else seen
    if (module_name, name) in seen:
        return None
    seen.add((module_name, name))
    module = importlib.import_module(module_name)
    try:
        source = inspect.getsource(module)
    except (OSError, TypeError):
        return None
    body = ast.parse(source).body
    head, _, member = name.partition(".")
    if member:
        owners = [node for node in body if isinstance(node, ast.ClassDef) and node.name == head]
        if not owners:
            return None
        body, head = owners[0].body, member
    for index, node in enumerate(body):
        following = body[index + 1] if index + 1 < len(body) else None
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == head:
            return module_name, node, following, source.splitlines()
        if head in assigned_names(node):
            return module_name, node, following, source.splitlines()
        if isinstance(node, ast.ImportFrom) and not member:
            for alias in node.names:
                if (alias.asname or alias.name) == head:
                    package = module.__name__ if hasattr(module, "__path__") else module.__package__
                    origin = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
                    return locate(origin, alias.name, seen)
    return None


def docstring_of(module_name: str, name: str) -> Optional[str]:
    """The docstring griffe reads for ``name`` of ``module_name`` (:func:`locate`): a ``def`` or
    ``class`` docstring, an attribute's string literal right below it or its ``#:`` comments
    right above it; ``None`` when there is none."""
    found = locate(module_name, name)
    if found is None:
        return None
    _, node, following, lines = found
    if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
        return ast.get_docstring(node)
    if (isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)):
        return following.value.value
    return comment_above(lines, node.lineno)[0] or None


def assigned_names(node: ast.stmt) -> List[str]:
    """The plain names a top-level assignment binds (``A = ...``, ``A: T = ...``, ``A = B = ...``)."""
    if isinstance(node, ast.Assign):
        return [target.id for target in node.targets if isinstance(target, ast.Name)]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [node.target.id]
    return []


def rendered_docstring(path: str) -> Optional[str]:
    """The docstring of what ``:::`` ``path`` renders."""
    value, module_name, attribute = resolve(path)
    if inspect.ismodule(value):
        return inspect.getdoc(value)
    if inspect.isclass(value) or inspect.isroutine(value):
        defining = getattr(value, "__module__", None) or module_name
        qualname = getattr(value, "__qualname__", attribute)
        if "<locals>" not in qualname and qualname.count(".") <= 1:
            found = docstring_of(defining, qualname)
            if found is not None:
                return found
    return docstring_of(module_name, attribute)


def suggestion(module_name: str, name: str, value) -> str:
    """The ``:::`` path to add for a public name: where a class or function is defined, else
    where its assignment is (:func:`locate`), else the public module's own path."""
    if inspect.isclass(value) or inspect.isroutine(value):
        if "<locals>" not in getattr(value, "__qualname__", "<locals>"):
            return f"{value.__module__}.{value.__qualname__}"
    found = locate(module_name, name)
    return f"{found[0] if found else module_name}.{name}"


def check(modules: Iterable[str], pages: Iterable[Path]) -> Tuple[List[str], Dict[str, int]]:
    """``(failures, counts)``: one line per public name not rendered, per rendered object without
    a docstring and per directive that does not resolve; counts of modules, public names and
    rendered objects checked."""
    failures = []
    rendered = []
    for entry in rendered_paths(pages):
        try:
            rendered.append((entry, *resolve(entry.path)))
        except (ImportError, AttributeError) as error:
            failures.append(f"{entry.page}: ::: {entry.path} does not resolve ({error})")
    names = 0
    modules = list(modules)
    for module_name in modules:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            if name.startswith("__") and name.endswith("__"):
                continue
            names += 1
            value = getattr(module, name)
            if not any(same_object(value, name, obj, f"{mod}.{attr}" if attr else mod)
                       for _, obj, mod, attr in rendered):
                failures.append(f"{module_name}.{name} is in __all__ but no API page renders it: add "
                                f"'::: {suggestion(module_name, name, value)}' to a page of docs/api/")
    for entry, _, _, _ in rendered:
        if not (rendered_docstring(entry.path) or "").strip():
            value = resolve(entry.path)[0]
            how = "a docstring" if defines_itself(value) else "a '#:' comment line above its assignment"
            failures.append(f"{entry.page}: {entry.path} has no docstring: write {how}")
    return failures, {"modules": len(modules), "names": names, "rendered": len(rendered)}


def run_check(pages_dir: Path = API_PAGES) -> Tuple[List[str], str]:
    """Check the package against ``pages_dir``; ``(failures, one-line summary)``."""
    failures, counts = check(public_modules(), sorted(Path(pages_dir).glob("*.md")))
    summary = (f"API reference: {counts['names']} public names of {counts['modules']} modules' __all__, "
               f"{counts['rendered']} rendered objects with docstrings")
    return failures, summary


def on_pre_build(config, **kwargs) -> None:
    """MkDocs hook: abort the build with every failure."""
    import logging

    from mkdocs.exceptions import Abort

    failures, summary = run_check()
    if failures:
        raise Abort("API reference incomplete:\n  " + "\n  ".join(failures))
    logging.getLogger("mkdocs.hooks.api_coverage").info(summary)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))  # the checkout's package, as mkdocstrings reads it
    problems, line = run_check()
    print("\n".join(problems) if problems else line)
    sys.exit(1 if problems else 0)
