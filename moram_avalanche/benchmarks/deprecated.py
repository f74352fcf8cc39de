"""0.6's benchmark tables, read-only views of the registry (:mod:`.registry`) for one version.

0.6 kept a benchmark in four parallel tables (``BENCHMARKS``, ``TEXT_BENCHMARKS``,
``BENCHMARK_PROTOCOLS``, ``BENCHMARK_FAMILIES``) and ``check-data``'s in a fifth
(``data_checks.DATA_CHECKS``, served by that module); 0.7 registers one
:class:`~.registry.Benchmark` entry per benchmark. The old names are looked up by the room's
``__getattr__`` and built here, on each use, from the registry, with a ``DeprecationWarning``
naming what to read instead; they go in :data:`~moram_avalanche.utils.moved.REMOVED_IN`.
"""

from __future__ import annotations

import warnings
from types import MappingProxyType
from typing import Callable, Dict, Mapping, Tuple

from ..utils.moved import REMOVED_IN
from .registry import Benchmark, benchmarks

#: 0.6's table -> (what to read instead, its view of the registry's entries); 0.6's builders were
#: per family: BENCHMARKS the CLIP family's, TEXT_BENCHMARKS the language models'
_TABLES: Dict[str, Tuple[str, Callable[[Mapping[str, Benchmark]], dict]]] = {
    "BENCHMARKS": ("moram_avalanche.benchmarks.get_benchmark(name), or benchmarks() (every entry)",
                   lambda entries: {n: e.build for n, e in entries.items() if e.family == "clip"}),
    "TEXT_BENCHMARKS": ("moram_avalanche.benchmarks.get_benchmark(name), or benchmarks() (every entry)",
                        lambda entries: {n: e.build for n, e in entries.items() if e.family == "text"}),
    "BENCHMARK_PROTOCOLS": ("moram_avalanche.benchmarks.benchmark_entry(name).protocol",
                            lambda entries: {n: e.protocol for n, e in entries.items()}),
    "BENCHMARK_FAMILIES": ("moram_avalanche.benchmarks.benchmark_family(name)",
                           lambda entries: {n: e.family for n, e in entries.items()}),
}
#: the names :func:`benchmark_table` serves
TABLES = tuple(_TABLES)


def warn_deprecated(old: str, instead: str, stacklevel: int) -> None:
    """The DeprecationWarning of 0.6's name ``old`` (under the package): read ``instead``. ``stacklevel``
    counts from the caller, as :func:`warnings.warn`'s: the warning names the line that read the old name."""
    warnings.warn(f"moram_avalanche.{old} is deprecated since moram-avalanche 0.7 and goes in {REMOVED_IN}: "
                  f"read {instead}", DeprecationWarning, stacklevel=stacklevel + 1)


def benchmark_table(name: str) -> Mapping[str, object]:
    """0.6's ``moram_avalanche.benchmarks.<name>`` (``name`` one of :data:`TABLES`), with a DeprecationWarning."""
    instead, view = _TABLES[name]
    warn_deprecated(f"benchmarks.{name}", instead, stacklevel=3)  # this, the room's __getattr__, its reader
    return MappingProxyType(view(benchmarks()))


__all__ = ["TABLES", "benchmark_table", "warn_deprecated"]
