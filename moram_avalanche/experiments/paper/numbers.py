"""The numbers of the MoRAM paper's tables, as data shipped with the package.

One CSV file per table under ``moram_avalanche/experiments/paper/`` (package data), transcribed
from the paper's LaTeX source (ICML 2026): ``block, method, <columns...>, note``. A cell is a
number, ``mean ± std`` (the robustness, TRACE and order-robustness tables) or empty (the paper's
"--": no value, e.g. the Transfer of the first domain). ``note`` flags a row the reader must know
about (an erratum of the paper is carried and flagged, never silently copied; a row the paper
quotes from another paper says so).

The CLIP tables (ViT-B/16): ``xtail`` (``tab:few_xtail``), ``xtail_order2``
(``tab:few_xtail_order_2``), ``mtil`` (``tab:few_mtil_full``), ``routing`` (``tab:mix_strategy``),
``additional_baselines`` (``tab:additional_baselines``), ``robustness`` (``tab:supp_robustness``),
``pruning`` (``tab:prune``), ``load_balance`` (``tab:load_balance``, X-TAIL column only; its T5
columns are the language models' ``t5_load_balance``). Domain columns use this package's domain
names (``Caltech`` -> ``Caltech101``, ``OxPet`` -> ``OxfordPet``, ``Cars`` -> ``StanfordCars``); the
paper's "Average" column is ``Average``. The robustness and pruning files hold their values under
the **order-1** domain names: the paper prints order-2 names over order-1 values (see
:mod:`~moram_avalanche.experiments.clip.paper_tables`).

The language-model tables, every cell of each (:mod:`~moram_avalanche.experiments.text.paper_tables`):
``t5_standard`` (``tab:llm_cl_main``), ``t5_long`` (``tab:supp_llm_cl_long``), ``llama_standard``
(``tab:llama``), ``trace`` (``tab:llm_cl``), ``t5_order_robustness`` (``tab:order_robustness``),
``t5_load_balance`` (``tab:load_balance``'s T5 columns), ``superni`` (``tab:sapt``) and
``codealpaca`` (``tab:llm_ood_main`` with ``tab:supp_humaneval``'s pass@1 / 5 / 10). Order columns
are ``Order <k>``; a percentage of parameters is stored without its "%".
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Dict, Optional, Tuple

#: the package folder holding the CSV files
DATA_PACKAGE = "moram_avalanche.experiments"
DATA_FOLDER = "paper"

_CELL = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*(?:±\s*(\d+(?:\.\d+)?))?\s*$")


@dataclass(frozen=True)
class PaperCell:
    """One number of the paper: a mean and, where printed, its standard deviation."""

    mean: float
    std: Optional[float] = None

    def __str__(self) -> str:
        return f"{self.mean:g}" if self.std is None else f"{self.mean:g} ± {self.std:g}"


@dataclass(frozen=True)
class PaperRow:
    """A row of a paper table: its block (e.g. "Transfer"), method label, cells by column, note."""

    block: str
    method: str
    cells: Tuple[Tuple[str, Optional[PaperCell]], ...]
    note: str = ""

    def cell(self, column: str) -> Optional[PaperCell]:
        return dict(self.cells).get(column)


@dataclass(frozen=True)
class PaperNumbers:
    """A paper table as data: its columns and rows, in the paper's order."""

    name: str
    columns: Tuple[str, ...]
    rows: Tuple[PaperRow, ...]

    def row(self, block: str, method: str) -> PaperRow:
        for row in self.rows:
            if row.block == block and row.method == method:
                return row
        raise KeyError(f"the paper's {self.name} table has no row {method!r} in block {block!r}; "
                       f"rows: {[(r.block, r.method) for r in self.rows]}")

    def blocks(self) -> Tuple[str, ...]:
        return tuple(dict.fromkeys(row.block for row in self.rows))


def parse_cell(text: str) -> Optional[PaperCell]:
    """``"63.3"`` -> 63.3; ``"72.26 ± 0.56"`` -> (72.26, 0.56); ``""`` or ``"--"`` -> None."""
    text = text.strip()
    if text in ("", "--", "–", "—"):
        return None
    match = _CELL.match(text)
    if match is None:
        raise ValueError(f"not a number of the paper: {text!r} (expected e.g. '63.3' or '72.26 ± 0.56')")
    mean, std = match.groups()
    return PaperCell(float(mean), None if std is None else float(std))


def paper_files() -> Tuple[str, ...]:
    """The names of the shipped tables (file names without ``.csv``)."""
    folder = resources.files(DATA_PACKAGE) / DATA_FOLDER
    return tuple(sorted(p.name[:-4] for p in folder.iterdir() if p.name.endswith(".csv")))


@lru_cache(maxsize=None)
def load_paper_numbers(name: str) -> PaperNumbers:
    """The table shipped as ``paper/<name>.csv``."""
    if name not in paper_files():
        raise ValueError(f"no paper table {name!r}; shipped: {', '.join(paper_files())}")
    text = (resources.files(DATA_PACKAGE) / DATA_FOLDER / f"{name}.csv").read_text(encoding="utf-8")
    reader = csv.reader(io.StringIO(text))
    header = next(reader)
    if header[:2] != ["block", "method"] or header[-1] != "note":
        raise ValueError(f"paper/{name}.csv: header must be block, method, <columns>, note; got {header}")
    columns = tuple(header[2:-1])
    rows = []
    for line, cells in enumerate(reader, start=2):
        if len(cells) != len(header):
            raise ValueError(f"paper/{name}.csv line {line}: {len(cells)} cells, expected {len(header)}")
        values = tuple((column, parse_cell(text)) for column, text in zip(columns, cells[2:-1]))
        rows.append(PaperRow(cells[0], cells[1], values, cells[-1]))
    return PaperNumbers(name, columns, tuple(rows))


def as_dict(numbers: PaperNumbers) -> Dict[str, Dict[str, Dict[str, Optional[float]]]]:
    """``{block: {method: {column: mean or None}}}`` (convenience for scripts and tests)."""
    out: Dict[str, Dict[str, Dict[str, Optional[float]]]] = {}
    for row in numbers.rows:
        out.setdefault(row.block, {})[row.method] = {
            column: None if cell is None or math.isnan(cell.mean) else cell.mean for column, cell in row.cells}
    return out


__all__ = ["DATA_FOLDER", "DATA_PACKAGE", "PaperCell", "PaperNumbers", "PaperRow", "as_dict",
           "load_paper_numbers", "paper_files", "parse_cell"]
