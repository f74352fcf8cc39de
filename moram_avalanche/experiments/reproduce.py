"""``moram-avalanche reproduce TABLE``: the paper's tables, from one command, written once for every family.

A table belongs to a model family, whose record holds its tables as data
(:class:`~moram_avalanche.experiments.family.Reproduction`: the CLIP tables of
:mod:`.clip.paper_tables`, the language-model tables of :mod:`.text.paper_tables`) and whose
settings say what its model and budget mean for a run. :func:`reproduce` does the same for
every table, through the one pipeline of :mod:`.paper`: every run the table needs
(:func:`~.paper.runs.plan`) is run with the paper's settings through
:func:`~moram_avalanche.experiments.compare.run_comparison` -- one resumable comparison folder
per run, shared by every table that needs it -- and the table is read back
(:func:`~.paper.results.table_result`) and written beside the paper's numbers
(:mod:`.paper.report`), with an index of the tables written under the same root.

Before anything runs, everything the plan reads is checked (the datasets, the reference data,
the model's weights) and every missing item is named at once (:func:`~.paper.needs.check_needs`).
:func:`paper_text` prints the paper's tables (no data needed); :func:`plan_text` the plan; a
settings' ``rehearse`` runs the whole plan at a tiny budget (under ``<out>/rehearsal``), so a
missing file or a crash shows in minutes rather than after a GPU-day.

From Python::

    from moram_avalanche.experiments.reproduce import reproduce
    from moram_avalanche.experiments.clip.reproduce import ReproduceSettings
    results = reproduce("xtail", ReproduceSettings(data_root="~/data", device="cuda"))
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Dict

from ..utils.files import atomic_write_text
from .families import family_of_table
from .family import Reproduction

logger = logging.getLogger(__name__)


def reproduction_of(table: str) -> Reproduction:
    """The record of the family whose paper tables include ``table``."""
    return family_of_table(table).reproduction


def paper_text(table: str) -> str:
    """The paper's table(s) alone, as Markdown (no data needed)."""
    from .paper.report import paper_text as text_of_tables

    return text_of_tables(reproduction_of(table).resolve(table))


def plan_text(table: str, settings) -> str:
    """The plan of ``reproduce table``: every run with its settings and what it needs on disk."""
    from .paper.plan_text import plan_text as text_of_plan

    return text_of_plan(reproduction_of(table).resolve(table), settings)


def reproduce(table: str, settings) -> Dict[str, object]:
    """Run every run of ``table`` not finished yet, and write each table under
    ``settings.root / <table>``; returns ``{table: TableResult}``.

    ``settings``: the table's family's (:class:`~.clip.reproduce.ReproduceSettings`,
    :class:`~.text.reproduce.TextReproduceSettings`). Resumable: a finished run is read back, an
    interrupted one continues from its checkpoint. Everything the plan needs is checked first.
    """
    from .compare import run_comparison
    from .paper.needs import check_needs
    from .paper.report import write_table
    from .paper.results import table_result
    from .paper.runs import plan
    from .paper.setup import run_setup

    record = reproduction_of(table)
    specs = record.resolve(table)
    planned = plan(specs, settings)
    check_needs(specs, settings, planned)
    for index, (run, _) in enumerate(planned, start=1):
        logger.info("run %d of %d: %s, seed %d", index, len(planned), run.folder(settings.root / "runs"), run.seed)
        run_comparison(run_setup(run, settings), [run.strategy], run.folder(settings.root / "runs"), resume=True,
                       progress=settings.progress)
    results = {}
    for spec in specs:
        results[spec.name] = result = table_result(spec, settings)
        write_table(result, settings.root / spec.name)
    write_index(settings.root, record)
    return results


def write_index(root, record: Reproduction) -> Path:
    """The index of a family's tables written under ``root`` so far, in the paper's order
    (``record.index``: its file name and title)."""
    root = Path(root)
    name, title = record.index
    parts = [(root / table / "table.md").read_text() for table in record.tables
             if (root / table / "table.md").exists()]
    return atomic_write_text(root / name, f"# {title}\n\n" + "\n".join(parts))


__all__ = ["paper_text", "plan_text", "reproduce", "reproduction_of", "write_index"]
