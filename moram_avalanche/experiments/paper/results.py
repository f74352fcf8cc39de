"""A table's results read back from its finished runs, cell by cell beside the paper's numbers
(:func:`table_result`): what :mod:`.report` writes.

A row whose runs are not all finished is "incomplete"; a row the library cannot run is "not
run", with the reason. A cell holds our mean over the seeds (with the sample standard deviation,
n - 1, when several ran), the paper's number and the difference of the means; which number of a
run a cell reads is the table's (:meth:`~.spec.PaperTable.cells`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np

from .numbers import PaperRow
from .runs import method_runs, table_seeds
from .spec import PaperTable


@dataclass
class Cell:
    """One cell: our mean (and std, n seeds), the paper's number, the difference of the means."""

    ours: Optional[float] = None
    ours_std: Optional[float] = None
    seeds: int = 0
    paper: Optional[float] = None
    paper_std: Optional[float] = None

    @property
    def difference(self) -> Optional[float]:
        return None if self.ours is None or self.paper is None else self.ours - self.paper


@dataclass
class Row:
    """A row of a reproduced table."""

    block: str
    method: str
    status: str  # "run", "not run" or "incomplete"
    reason: str = ""
    note: str = ""
    cells: Dict[str, Cell] = field(default_factory=dict)
    runs: List[str] = field(default_factory=list)


@dataclass
class TableResult:
    """A reproduced table: its spec, its rows, the seeds and whether this was a rehearsal."""

    spec: PaperTable
    rows: List[Row]
    seeds: Sequence[int]
    rehearsal: bool = False
    budget: Optional[int] = None  # iterations per experience when not the paper's

    @property
    def columns(self) -> Sequence[str]:
        return self.spec.table_columns()


def read_report(folder: Path, strategy: str) -> Optional[dict]:
    """``results.json`` of a finished run (a complete accuracy matrix), else None."""
    try:
        report = json.loads((Path(folder) / strategy / "results.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    if "per_domain" not in report or len(report.get("matrix") or []) != len(report.get("domains", ())):
        return None
    return report


def paper_cell(paper_row: Optional[PaperRow], column: str) -> Cell:
    """A :class:`Cell` holding the paper's number of ``column`` (none: an empty cell)."""
    cell, paper = Cell(), paper_row.cell(column) if paper_row is not None else None
    if paper is not None:
        cell.paper, cell.paper_std = paper.mean, paper.std
    return cell


def mean_over_seeds(cell: Cell, values: Sequence[Optional[float]]) -> None:
    """``cell`` holds the mean (and sample std) of ``values``, one per seed, when every one is there."""
    if values and all(v is not None for v in values):
        cell.ours, cell.seeds = float(np.mean(values)), len(values)
        cell.ours_std = float(np.std(values, ddof=1)) if len(values) > 1 else None


def table_result(spec, settings) -> TableResult:
    """The table's rows from the runs under ``settings.root`` (rows whose runs are not all
    finished are "incomplete") paired with the paper's numbers."""
    numbers = spec.paper_numbers()
    runs_root = settings.root / "runs"
    rows = []
    for block, label in spec.table_rows():
        method = spec.method(label)
        paper_row = numbers.row(block, label) if numbers else None
        row = Row(block, label, "run", note=paper_row.note if paper_row else "")
        runs = method_runs(spec, label, settings, block)
        row.runs = [str(run.folder(runs_root)) for run in runs]
        reports = {run: read_report(run.folder(runs_root), run.strategy) for run in runs}
        if method.strategy is None:
            row.status, row.reason = "not run", method.reason
        elif any(report is None for report in reports.values()):
            row.status = "incomplete"
            row.reason = f"{sum(r is None for r in reports.values())} of {len(reports)} runs not finished"
        row.cells = spec.cells(block, paper_row, runs, reports if row.status == "run" else None, settings)
        rows.append(row)
    return TableResult(spec, rows, table_seeds(spec, settings), settings.rehearse, settings.budget)


__all__ = ["Cell", "Row", "TableResult", "mean_over_seeds", "paper_cell", "read_report", "table_result"]
