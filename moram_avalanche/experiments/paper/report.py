"""The tables of ``moram-avalanche reproduce``: ours beside the paper's, cell by cell.

:func:`table_result` reads the finished runs of a table and pairs each cell with the paper's;
:func:`write_table` writes, under ``<out>/<table>/``:

* ``table.md``: the paper's layout -- per method three lines, ``ours`` (``mean ± std`` when
  several seeds ran), ``paper`` and ``Δ`` (ours minus the paper's) -- with the protocol, the
  seeds, the paper's errata and notes; rows the library cannot run show the paper's numbers
  and "not run" with the reason;
* ``table.csv``: the same rows with full precision, one line per (block, method, value) where
  value is ``ours``, ``ours_std``, ``paper``, ``paper_std`` or ``difference``;
* ``table.png``: ours against the paper's (means; error bars over seeds), or the sweep curves;
* ``reproduction.json``: everything above as data; ``tensorboard/``: the table as text and the
  picture as an image.

:func:`paper_markdown` is the paper's table alone (``reproduce --paper``).
"""

from __future__ import annotations

import csv
import io
import json
import math
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np

from ...utils.files import atomic_write_bytes, atomic_write_text
from ..clip.paper_tables import MEAN_COLUMN, TableSpec
from ..clip.reproduce import ReproduceSettings, method_runs, table_seeds

#: what a CSV line of a table holds
CSV_VALUES = ("ours", "ours_std", "paper", "paper_std", "difference")
FLAG = "†"


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

    spec: TableSpec
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


def cell_value(report: dict, metric: str, column: str) -> Optional[float]:
    """One number of a run: ``metric`` ("diagonal", "transfer", "average", "last") of the domain
    ``column``, or the table's mean column / a summary column (``column`` not a domain)."""
    domains = list(report["domains"])
    if column in domains:
        index = domains.index(column)
        value = (report["matrix"][index][index] if metric == "diagonal"
                 else report["per_domain"][metric][index])
    elif metric == "diagonal":
        value = float(np.mean([report["matrix"][i][i] for i in range(len(domains))]))
    else:
        value = report[metric]
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def table_result(spec: TableSpec, settings: ReproduceSettings) -> TableResult:
    """The table's rows from the runs under ``settings.root`` (rows whose runs are not all
    finished are "incomplete") paired with the paper's numbers."""
    numbers = spec.paper_numbers()
    runs_root = settings.root / "runs"
    rows = []
    for block, label in spec.table_rows():
        method = spec.method(label)
        paper_row = numbers.row(block, label) if numbers else None
        row = Row(block, label, "run", note=paper_row.note if paper_row else "")
        runs = method_runs(spec, label, settings)
        reports = [read_report(run.folder(runs_root), run.strategy) for run in runs]
        row.runs = [str(run.folder(runs_root)) for run in runs]
        if method.strategy is None:
            row.status, row.reason = "not run", method.reason
        elif any(report is None for report in reports):
            row.status = "incomplete"
            row.reason = f"{sum(r is None for r in reports)} of {len(reports)} runs not finished"
        for column in spec.table_columns():
            cell = Cell()
            paper = paper_row.cell(column) if paper_row else None
            if paper is not None:
                cell.paper, cell.paper_std = paper.mean, paper.std
            if row.status == "run":
                values = [cell_value(report, spec.metric(block, column), column) for report in reports]
                if all(v is not None for v in values):
                    cell.ours, cell.seeds = float(np.mean(values)), len(values)
                    cell.ours_std = float(np.std(values, ddof=1)) if len(values) > 1 else None
            row.cells[column] = cell
        rows.append(row)
    return TableResult(spec, rows, table_seeds(spec, settings), settings.rehearse, settings.budget)


# ---------------------------------------------------------------------------------------- text
def _number(value: Optional[float], decimals: int, std: Optional[float] = None, signed: bool = False) -> str:
    if value is None:
        return "–"
    text = f"{value:+.{decimals}f}" if signed else f"{value:.{decimals}f}"
    text = text.replace("-", "−") if signed else text
    return text if std is None else f"{text} ± {std:.{decimals}f}"


def _header(spec: TableSpec) -> List[str]:
    columns = spec.table_columns()
    return ["| Block | Method | | " + " | ".join(columns) + " |",
            "|---|---|---|" + "---:|" * len(columns)]


def _context(spec: TableSpec, seeds: Optional[Sequence[int]] = None, rehearsal: bool = False,
             budget: Optional[int] = None) -> List[str]:
    lines = [f"## {spec.title}", "", f"Paper: `{spec.label}`. Protocol: {spec.protocol.description}."]
    if seeds is not None:
        lines.append(f"Seeds: {', '.join(map(str, seeds))}"
                     + (" (cells: mean ± sample std over the seeds)." if len(seeds) > 1 else "."))
    if rehearsal:
        lines.append(f"**REHEARSAL**: {budget} iterations per experience and a few test images per "
                     "class; the numbers mean nothing -- this only shows that every run starts and ends.")
    elif budget is not None:
        lines.append(f"**NOT the paper's budget**: {budget} iterations per experience (a smoke run); "
                     "the numbers are not comparable with the paper's.")
    if spec.erratum:
        lines += ["", f"**{spec.erratum}**"]
    lines += [""] + [f"- {note}" for note in spec.notes] if spec.notes else []
    return lines


def _footnotes(rows) -> List[str]:
    flagged = [f"- {FLAG} {row.block} / {row.method}: {row.note}" for row in rows if row.note]
    return ["", *flagged] if flagged else []


def table_markdown(result: TableResult) -> str:
    """The reproduced table in the paper's layout: ours, paper and Δ per method."""
    spec, digits = result.spec, result.spec.decimals
    columns = result.columns
    lines = _context(spec, result.seeds, result.rehearsal, result.budget) + [""] + _header(spec)
    previous = None
    for row in result.rows:
        block = row.block if row.block != previous else ""
        previous = row.block
        method = row.method + (f" {FLAG}" if row.note else "")
        cells = [row.cells[c] for c in columns]
        if row.status == "run":
            ours = [_number(c.ours, digits, c.ours_std) for c in cells]
        else:
            ours = [f"{row.status}" if i == 0 else "" for i in range(len(cells))]
        lines.append(f"| {block} | {method} | ours | " + " | ".join(ours) + " |")
        if spec.paper is not None:  # a figure without numbers has no paper line
            lines.append("|  |  | paper | " + " | ".join(_number(c.paper, digits, c.paper_std) for c in cells)
                         + " |")
        if row.status == "run" and any(c.paper is not None for c in cells):
            lines.append("|  |  | Δ | " + " | ".join(_number(c.difference, digits, signed=True) for c in cells) + " |")
    lines += _footnotes(result.rows)
    not_run = [f"- {row.block} / {row.method}: {row.status} -- {row.reason}" for row in result.rows
               if row.status != "run"]
    if not_run:
        lines += ["", "Not run:", *dict.fromkeys(not_run)]
    runs = sorted({run for row in result.rows for run in row.runs})
    if runs:
        lines += ["", "Runs (results.json, accuracy matrices, TensorBoard logs):", *[f"- `{r}`" for r in runs]]
    return "\n".join(lines) + "\n"


def paper_markdown(spec: TableSpec) -> str:
    """The paper's table alone (no data needed)."""
    lines = _context(spec) + [""]
    numbers = spec.paper_numbers()
    if numbers is None:
        return "\n".join(lines + ["The paper gives no numbers for this table (a figure); `reproduce "
                                  f"{spec.name}` runs the grid above."]) + "\n"
    columns = spec.table_columns()
    lines.append("| Block | Method | " + " | ".join(columns) + " |")
    lines.append("|---|---|" + "---:|" * len(columns))
    previous = None
    for row in numbers.rows:
        block = row.block if row.block != previous else ""
        previous = row.block
        cells = [row.cell(c) for c in columns]
        shown = ["–" if c is None else _number(c.mean, spec.decimals, c.std) for c in cells]
        flag = f" {FLAG}" if row.note else ""
        lines.append(f"| {block} | {row.method}{flag} | " + " | ".join(shown) + " |")
    lines += _footnotes(numbers.rows)
    return "\n".join(lines) + "\n"


def table_csv(result: TableResult) -> str:
    """One line per (block, method, value) with the table's columns (full precision)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    columns = list(result.columns)
    writer.writerow(["block", "method", "value", *columns, "seeds", "status", "note"])
    for row in result.rows:
        cells = [row.cells[c] for c in columns]
        seeds = max((c.seeds for c in cells), default=0)
        status = row.status if not row.reason else f"{row.status}: {row.reason}"
        for value in CSV_VALUES:
            numbers = [getattr(c, value) for c in cells]
            writer.writerow([row.block, row.method, value,
                             *["" if v is None else f"{v:.4f}" for v in numbers], seeds, status, row.note])
    return buffer.getvalue()


# ---------------------------------------------------------------------------------------- picture
def table_figure(result: TableResult):
    """Ours against the paper's: per block, the mean column of each method (bars, error bars
    over seeds); for the sweeps, Transfer / Average / Last against each parameter."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    from ..viz import figure_to_image

    spec = result.spec
    if spec.paper is None:  # the sweeps: curves per parameter
        return _sweep_figure(result, Figure, figure_to_image)
    if spec.layout == "summary":
        return _summary_figure(result, Figure, figure_to_image)
    blocks = list(dict.fromkeys(row.block for row in result.rows))
    panels = [(block, [(r.method, r.cells[MEAN_COLUMN]) for r in result.rows if r.block == block])
              for block in blocks]
    width = max(6.0, 0.55 * max(len(items) for _, items in panels) + 2)
    fig = Figure(figsize=(width, 2.6 * len(panels)), layout="constrained")
    title = f"{spec.label}: ours vs the paper" + _caveat(result)
    fig.suptitle(title)
    for index, (name, items) in enumerate(panels):
        ax = fig.add_subplot(len(panels), 1, index + 1)
        x = np.arange(len(items))
        ours = [np.nan if c.ours is None else c.ours for _, c in items]
        errors = [0 if c.ours_std is None else c.ours_std for _, c in items]
        paper = [np.nan if c.paper is None else c.paper for _, c in items]
        ax.bar(x - 0.2, ours, 0.4, yerr=errors, label="ours", color="#3b75af")
        ax.bar(x + 0.2, paper, 0.4, label="paper", color="#b8b8b8")
        for position, value in zip(x, ours):
            if np.isnan(value):
                ax.text(position - 0.2, 2, "not run", rotation=90, fontsize=7, ha="center", va="bottom")
        ax.set_xticks(x, labels=[label for label, _ in items], rotation=30, ha="right", fontsize=8)
        ax.set_xlim(-0.6, max(len(items), 4) - 0.4)
        ax.set_ylabel(f"{name}, mean (%)")
        ax.set_ylim(0, 100)
        if index == 0:
            ax.legend(fontsize=8, loc="lower right")
    return figure_to_image(fig)


def _summary_figure(result: TableResult, Figure, figure_to_image):
    """One panel per column (Transfer / Average / Last), one pair of horizontal bars per row."""
    rows = result.rows
    fig = Figure(figsize=(4 + 3 * len(result.spec.columns), 1.4 + 0.42 * len(rows)), layout="constrained")
    fig.suptitle(f"{result.spec.label}: ours vs the paper" + _caveat(result))
    y = np.arange(len(rows))[::-1]
    for index, column in enumerate(result.spec.columns):
        ax = fig.add_subplot(1, len(result.spec.columns), index + 1)
        cells = [row.cells[column] for row in rows]
        ours = [np.nan if c.ours is None else c.ours for c in cells]
        ax.barh(y + 0.2, ours, 0.4, xerr=[0 if c.ours_std is None else c.ours_std for c in cells],
                label="ours", color="#3b75af")
        ax.barh(y - 0.2, [np.nan if c.paper is None else c.paper for c in cells], 0.4, label="paper",
                color="#b8b8b8")
        for position, value in zip(y, ours):
            if np.isnan(value):
                ax.text(1, position + 0.2, "not run", fontsize=7, va="center")
        ax.set_yticks(y, labels=[row.method for row in rows] if index == 0 else [], fontsize=8)
        ax.set_xlim(0, 100)
        ax.set_xlabel(f"{column} (%)")
        if index == 0:
            ax.legend(fontsize=8, loc="lower right")
    return figure_to_image(fig)


def _sweep_figure(result: TableResult, Figure, figure_to_image):
    blocks = list(dict.fromkeys(row.block for row in result.rows))
    fig = Figure(figsize=(4.2 * len(blocks), 3.4), layout="constrained")
    fig.suptitle(f"{result.spec.label}: Transfer / Average / Last" + _caveat(result))
    for index, block in enumerate(blocks):
        ax = fig.add_subplot(1, len(blocks), index + 1)
        rows = [r for r in result.rows if r.block == block]
        labels = [r.method.split("=")[-1].strip() for r in rows]
        for column in result.spec.columns:
            values = [np.nan if r.cells[column].ours is None else r.cells[column].ours for r in rows]
            errors = [0 if r.cells[column].ours_std is None else r.cells[column].ours_std for r in rows]
            ax.errorbar(range(len(rows)), values, yerr=errors, marker="o", label=column, capsize=3)
        ax.set_xticks(range(len(rows)), labels=labels)
        ax.set_xlabel(block)
        ax.set_ylabel("accuracy (%)")
        ax.legend(fontsize=8)
    return figure_to_image(fig)


def _caveat(result: TableResult) -> str:
    if result.rehearsal:
        return " (REHEARSAL: the numbers mean nothing)"
    return "" if result.budget is None else f" (smoke run: {result.budget} iterations per task)"


# ---------------------------------------------------------------------------------------- files
def write_table(result: TableResult, out_dir) -> str:
    """Write ``table.md``, ``table.csv``, ``table.png``, ``reproduction.json`` and the TensorBoard
    entry under ``out_dir``; returns the Markdown."""
    out_dir = Path(out_dir)
    markdown = table_markdown(result)
    atomic_write_text(out_dir / "table.md", markdown)
    atomic_write_text(out_dir / "table.csv", table_csv(result))
    image = table_figure(result)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    atomic_write_bytes(out_dir / "table.png", buffer.getvalue())
    data = {"table": result.spec.name, "label": result.spec.label, "protocol": result.spec.protocol.key,
            "seeds": list(result.seeds), "rehearsal": result.rehearsal, "iterations": result.budget,
            "erratum": result.spec.erratum, "notes": list(result.spec.notes),
            "rows": [{**{k: v for k, v in asdict(row).items() if k != "cells"},
                      "cells": {c: {**asdict(cell), "difference": cell.difference}
                                for c, cell in row.cells.items()}} for row in result.rows]}
    atomic_write_text(out_dir / "reproduction.json", json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    _write_tensorboard(out_dir / "tensorboard", result.spec.name, markdown, image)
    return markdown


def _write_tensorboard(tb_dir: Path, name: str, markdown: str, image) -> None:
    """One event file with the table (text) and the picture, replacing an earlier one."""
    from torch.utils.tensorboard import SummaryWriter

    staging = tb_dir.with_name(tb_dir.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    writer = SummaryWriter(str(staging))
    writer.add_text(f"reproduce/{name}", markdown, 0)
    writer.add_image(f"reproduce/{name}", np.asarray(image), 0, dataformats="HWC")
    writer.close()
    shutil.rmtree(tb_dir, ignore_errors=True)
    staging.rename(tb_dir)


__all__ = ["CSV_VALUES", "Cell", "Row", "TableResult", "cell_value", "paper_markdown", "read_report",
           "table_csv", "table_figure", "table_markdown", "table_result", "write_table"]
