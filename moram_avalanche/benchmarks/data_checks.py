"""What ``moram-avalanche check-data --benchmark NAME`` checks, read from the benchmark registry.

Every registered benchmark with a :class:`~.registry.DataCheck` is a choice (X-TAIL's split files,
torchvision's MTIL -- what ``mtil-5shot`` reads too --, the language models' 15 classification
tasks, TRACE's 8 tasks, SAPT's 15 SuperNI tasks, CodeAlpaca with HumanEval; a user's registered
benchmark too), and ``all`` (the default) is every image layout, in registration order. Each
check is ``(root, verify_images=False, progress=True) -> (reports, text)``.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Tuple

from ..utils.names import lookup
from .deprecated import warn_deprecated
from .registry import DataCheck, benchmarks

#: ``check-data --benchmark``'s default: every image layout (the checks marked ``images``)
ALL = "all"


def _layouts() -> dict:
    return {name: entry.check for name, entry in benchmarks().items() if entry.check is not None}


def data_check_names() -> Tuple[str, ...]:
    """``check-data --benchmark``'s choices: the image layouts, :data:`ALL` (which stands for them), then
    the other layouts, each in registration order."""
    layouts = _layouts()
    return (*(n for n, c in layouts.items() if c.images), ALL, *(n for n, c in layouts.items() if not c.images))


def data_checks(name: str) -> Tuple[DataCheck, ...]:
    """The checks ``check-data --benchmark name`` runs, in the order they are reported; a clear error
    for a name without a check."""
    layouts = _layouts()
    table = {layout: (check,) for layout, check in layouts.items()}
    table[ALL] = tuple(check for check in layouts.values() if check.images)
    return lookup(table, name, "check-data layout")


def describe_data_checks() -> str:
    """``check-data --benchmark``'s help: what each layout is, and what the default checks."""
    layouts = _layouts()
    images = [name for name, check in layouts.items() if check.images]
    return (f"which layout to check (default: {ALL}, every image layout: {', '.join(images)}): "
            + "; ".join(f"{name}: {check.layout}" for name, check in layouts.items()))


def __getattr__(name: str):
    """0.6's ``DATA_CHECKS`` (layout -> its checks' functions), a read-only view of the registry for
    one version, with a DeprecationWarning (:mod:`.deprecated`)."""
    if name != "DATA_CHECKS":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warn_deprecated("benchmarks.data_checks.DATA_CHECKS", "moram_avalanche.benchmarks.data_checks.data_checks(name) "
                    "(the checks) or data_check_names() (the choices)", stacklevel=2)
    return MappingProxyType({layout: tuple(check.run for check in data_checks(layout)) for layout in data_check_names()})


__all__ = ["ALL", "data_check_names", "data_checks", "describe_data_checks"]
