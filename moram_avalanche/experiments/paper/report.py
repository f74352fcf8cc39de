"""The tables of ``moram-avalanche reproduce``: ours beside the paper's, cell by cell.

:func:`write_table` writes a table read back from its runs (:func:`~.results.table_result`)
under ``<out>/<table>/``:

* ``table.md``: the paper's layout -- per method three lines, ``ours`` (``mean ± std`` when
  several seeds ran), ``paper`` and ``Δ`` (ours minus the paper's) -- with the protocol, the
  seeds, the paper's errata and notes; rows the library cannot run show the paper's numbers
  and "not run" with the reason;
* ``table.csv``: the same rows with full precision, one line per (block, method, value) where
  value is ``ours``, ``ours_std``, ``paper``, ``paper_std`` or ``difference``;
* ``table.png``: ours against the paper's (:func:`~.figure.table_figure`);
* ``reproduction.json``: everything above as data; ``tensorboard/``: the table as text and the
  picture as an image.

:func:`paper_markdown` is the paper's table alone, :func:`paper_text` several (``reproduce --paper``).
"""

from __future__ import annotations

import csv
import io
import json
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import List, Optional, Sequence

import numpy as np

from ...utils.files import atomic_write_bytes, atomic_write_text
from .figure import table_figure
from .results import TableResult
from .spec import PaperTable

#: what a CSV line of a table holds
CSV_VALUES = ("ours", "ours_std", "paper", "paper_std", "difference")
FLAG = "†"


# ---------------------------------------------------------------------------------------- text
def _number(value: Optional[float], decimals: int, std: Optional[float] = None, signed: bool = False) -> str:
    if value is None:
        return "–"
    text = f"{value:+.{decimals}f}" if signed else f"{value:.{decimals}f}"
    text = text.replace("-", "−") if signed else text
    return text if std is None else f"{text} ± {std:.{decimals}f}"


def _header(spec: PaperTable) -> List[str]:
    columns = spec.table_columns()
    return ["| Block | Method | | " + " | ".join(columns) + " |",
            "|---|---|---|" + "---:|" * len(columns)]


def _context(spec: PaperTable, seeds: Optional[Sequence[int]] = None, rehearsal: bool = False,
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


def paper_markdown(spec: PaperTable) -> str:
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


def paper_text(specs: Sequence[PaperTable]) -> str:
    """The paper's tables alone, one after the other (``reproduce --paper``)."""
    return "\n".join(paper_markdown(spec) for spec in specs)


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


__all__ = ["CSV_VALUES", "FLAG", "paper_markdown", "paper_text", "table_csv", "table_markdown", "write_table"]
