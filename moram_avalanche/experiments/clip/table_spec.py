"""A CLIP table of the paper (:class:`TableSpec`): its rows run on one stream, and its cells read
the runs' accuracy matrices -- a per-domain table's blocks (the diagonal, Transfer, Average,
Last per domain and their mean) or a summary table's columns (:func:`cell_value`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..paper.numbers import PaperRow
from ..paper.results import mean_over_seeds, paper_cell
from ..paper.spec import MEAN_COLUMN, PaperTable
from .protocols import Protocol, shown_setting

#: the blocks of a per-domain table and what each reads from a run
BLOCK_METRICS = {"CLIP": "diagonal", "Transfer": "transfer", "Average": "average", "Last": "last"}
#: the summary columns of the routing / load-balancing / sweep tables -> report keys
SUMMARY_METRICS = {"Transfer": "transfer", "Average": "average", "Last": "last"}


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


@dataclass(frozen=True, kw_only=True)
class TableSpec(PaperTable):
    """One CLIP table of the paper and how to regenerate it (the attributes of
    :class:`~moram_avalanche.experiments.paper.spec.PaperTable`, and):

    Attributes:
        protocol: the stream its rows run on (:class:`~.protocols.Protocol`).
        columns: the columns of a summary table (a per-domain table's are its protocol's
            domains and their mean).
    """

    protocol: Protocol
    columns: Tuple[str, ...] = ()

    def table_columns(self) -> Tuple[str, ...]:
        """The value columns: the protocol's domains and the mean, or :attr:`columns`."""
        if self.layout == "domains":
            return (*self.protocol.domains, MEAN_COLUMN)
        return self.columns

    def metric(self, block: str, column: str) -> str:
        """The report key a cell reads (``diagonal``, ``transfer``, ``average``, ``last``)."""
        return BLOCK_METRICS[block] if self.layout == "domains" else SUMMARY_METRICS[column]

    def run_protocols(self, settings, block: Optional[str] = None) -> Tuple[Protocol, ...]:
        """The table's one stream: every block of a row reads the same runs."""
        return (self.protocol,)

    def cells(self, block: str, paper_row: Optional[PaperRow], runs: Sequence[Any],
              reports: Optional[Dict[Any, dict]], settings) -> Dict[str, Any]:
        """Per column the mean over seeds of what the block reads (:meth:`metric`, :func:`cell_value`)."""
        cells = {}
        for column in self.table_columns():
            cell = cells[column] = paper_cell(paper_row, column)
            if reports is not None:
                mean_over_seeds(cell, [cell_value(reports[run], self.metric(block, column), column) for run in runs])
        return cells

    def plan_lines(self, settings) -> List[str]:
        """Each method with the blocks it fills and how it runs; the table's erratum."""
        blocks: Dict[str, List[str]] = {}
        for block, label in self.table_rows():
            blocks.setdefault(label, []).append(block)
        lines = []
        for label, in_blocks in blocks.items():
            method = self.method(label)
            what = (f"{method.strategy}" + "".join(f" {k}={shown_setting(v)}" for k, v in method.options)
                    if method.strategy else f"not run: {method.reason}")
            lines.append(f"  {label} [{', '.join(in_blocks)}]: {what}")
        if self.erratum:
            lines.append(f"  {self.erratum}")
        return lines


__all__ = ["BLOCK_METRICS", "SUMMARY_METRICS", "TableSpec", "cell_value"]
