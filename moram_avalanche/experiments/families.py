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
its family in its registered entry (:func:`~moram_avalanche.benchmarks.benchmark_family`); a paper
table belongs to the family whose :attr:`~.family.Reproduction.tables` lists it; a run folder to the
family its record names (:func:`family_of_record`). ``analyze`` and ``cost`` are tools a family
offers (:attr:`~.family.Family.analysis`, :attr:`~.family.Family.cost`). Nothing is imported before
a record is asked for.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Dict, Mapping, Optional

from ..utils.names import lookup
from .family import Family, Tool


def families() -> Dict[str, Family]:
    """Every family record, by name (their modules are imported here, on first use)."""
    from .clip.family import FAMILY as CLIP
    from .text.family import FAMILY as TEXT

    return {family.name: family for family in (CLIP, TEXT)}


def family(name: str) -> Family:
    """The record of family ``name``; a clear error for unknown names."""
    return lookup(families(), name, "model family")


def family_of_benchmark(benchmark: str) -> Family:
    """The record of the family benchmark ``benchmark`` is for (its registered family,
    :func:`~moram_avalanche.benchmarks.benchmark_family`); a clear error for unknown names."""
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


def family_of_record(record: Mapping) -> Optional[Family]:
    """The family a run folder's record (:mod:`~.record`) names: the family whose demo made it
    (the demo's settings under its key, ``run.<key>``), else the family of its ``run.benchmark``;
    None when it names neither (a 0.2 comparison's run)."""
    from ..benchmarks import benchmarks

    run = record.get("run") or {}
    for candidate in families().values():
        if candidate.demo.key in run:
            return candidate
    entry = benchmarks().get(run.get("benchmark")) if isinstance(run.get("benchmark"), str) else None
    return family(entry.family) if entry is not None else None


def offering(tool: Callable[[Family], Optional[Tool]]) -> Dict[str, Tool]:
    """``{family name: its tool}`` of the families that offer ``tool`` (e.g. ``lambda f: f.cost``)."""
    return {name: tool(record) for name, record in families().items() if tool(record) is not None}


def analysis_of_run(log_dir, benchmark: Optional[str] = None) -> Tool:
    """The ``analyze`` of the run in ``log_dir``: its family's (:func:`family_of_record`; a folder
    whose record names none: ``benchmark``'s, else the one family that offers an analysis). A
    ValueError saying what ``analyze`` supports when that family offers none."""
    from .record import read_record

    record = read_record(log_dir) or {}
    found = family_of_record(record) or (family_of_benchmark(benchmark) if benchmark else None)
    offered = offering(lambda f: f.analysis)
    supported = " and ".join(tool.about for tool in offered.values()) or "no family's runs"
    if found is None:
        if len(offered) == 1:
            return next(iter(offered.values()))
        raise ValueError(f"{log_dir} does not record which model family made its run: give its --benchmark "
                         f"(analyze draws {supported})")
    if found.analysis is None:
        run = record.get("run") or {}
        made = f" on --benchmark {run['benchmark']}" if run.get("benchmark") else ""
        raise ValueError(f"{log_dir} holds a {record.get('strategy') or 'strategy'} run{made} (the {found.name} "
                         f"family): analyze draws {supported} and supports no other family; read this run's "
                         f"{Path(log_dir) / 'results.json'}, or compare runs with `moram-avalanche compare`")
    return found.analysis


def cost_family() -> Family:
    """The family whose strategies ``cost`` measures: the one that offers a cost tool
    (:attr:`~.family.Family.cost`); a ValueError when none or several do."""
    offered = offering(lambda f: f.cost)
    if len(offered) != 1:
        raise ValueError(f"cost measures the strategies of the one model family that offers it; "
                         f"{len(offered)} do ({', '.join(offered) or 'none'}): say which in the family records")
    return family(next(iter(offered)))


__all__ = ["analysis_of_run", "cost_family", "families", "family", "family_of_benchmark", "family_of_record",
           "family_of_table", "offering"]
