"""The model families as the app reads them: one record per family, registered here.

A :class:`~.family.Family` carries everything of a model family that ``run``, ``compare``, the demo,
``reproduce`` and the tables read: how its model is loaded from the command line, how its
benchmarks are built, its comparison tables, its demo (:class:`~.family.Demo`) and its paper tables
(:class:`~.family.Reproduction`). The generic code above this registry (the run path, the comparison,
the demo and reproduce drivers, the command line's handlers) asks the record and never names a
family, a benchmark or a table (an import-linter contract keeps it from importing a concrete
family or strategy). A protocol of a family -- X-TAIL order 1 of the CLIP family, TRACE of the
text family -- is a record too (:mod:`~moram_avalanche.experiments.clip.protocols`,
:data:`~moram_avalanche.experiments.text.streams.TEXT_STREAMS`), read by the one reproduce
pipeline (:mod:`~moram_avalanche.experiments.paper`).

The records: :data:`~moram_avalanche.experiments.clip.family.FAMILY` (CLIP on X-TAIL, MTIL and
the synthetic stream) and :data:`~moram_avalanche.experiments.text.family.FAMILY` (language
models on the standard CL benchmark, TRACE and the synthetic text stream). A benchmark names
its family (:data:`~moram_avalanche.benchmarks.BENCHMARK_FAMILIES`); a paper table belongs to the
family whose :attr:`~.family.Reproduction.tables` lists it. Nothing is imported before a record is asked
for.
"""

from __future__ import annotations

from typing import Dict

from ..utils.names import lookup
from .family import Family


def families() -> Dict[str, Family]:
    """Every family record, by name (their modules are imported here, on first use)."""
    from .clip.family import FAMILY as CLIP
    from .text.family import FAMILY as TEXT

    return {family.name: family for family in (CLIP, TEXT)}


def family(name: str) -> Family:
    """The record of family ``name``; a clear error for unknown names."""
    return lookup(families(), name, "model family")


def family_of_benchmark(benchmark: str) -> Family:
    """The record of the family ``--benchmark`` is for (:data:`~moram_avalanche.benchmarks.BENCHMARK_FAMILIES`)."""
    from ..benchmarks import benchmark_family

    return family(benchmark_family(benchmark))


def family_of_table(table: str) -> Family:
    """The record of the family whose paper tables include ``table``; a ValueError listing every
    family's tables otherwise."""
    for record in families().values():
        if table in record.reproduction.tables:
            return record
    known = "; ".join(f"{name}: {', '.join(record.reproduction.tables)}" for name, record in families().items())
    raise ValueError(f"unknown table {table!r}; the paper's tables by model family -- {known}")


__all__ = ["families", "family", "family_of_benchmark", "family_of_table"]
