"""A table of the paper as the one ``reproduce`` pipeline reads it, whatever its family.

A table (:class:`PaperTable`) is data: its paper label and caption, the shipped numbers
(:mod:`.numbers`), the method of each row (:class:`Method`: the registered strategy that runs it,
or why none does), its seeds, errata and notes. A family's tables subclass it with what only
the family knows -- the stream its runs read and how a cell is read from a finished run
(:class:`~moram_avalanche.experiments.clip.table_spec.TableSpec`,
:class:`~moram_avalanche.experiments.text.table_spec.TextTableSpec`) -- through the hooks below;
the pipeline (:mod:`.runs`, :mod:`.results`, :mod:`.plan_text`) asks nothing else of a table.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ..seeding import RELEASE_SEED
from .numbers import PaperNumbers, PaperRow, load_paper_numbers

#: the mean column of a per-domain table (the paper's "Average")
MEAN_COLUMN = "Average"
#: the start of the reason of a row this library cannot run
NOT_IN_LIBRARY = "not implemented in this library"


@dataclass(frozen=True)
class Method:
    """A method label of a paper table and how this package runs it.

    Attributes:
        label: the paper's label.
        strategy: the registered strategy that runs it; None: not run (``reason`` says why).
        options: keyword arguments on top of the strategy's paper settings.
        reason: why it is not run.
    """

    label: str
    strategy: Optional[str]
    options: Tuple[Tuple[str, Any], ...] = ()
    reason: str = ""


def find_method(methods: Sequence[Method], label: str, table: str) -> Method:
    """The :class:`Method` of ``label`` among a table's ``methods``."""
    for method in methods:
        if method.label == label:
            return method
    raise KeyError(f"table {table!r} does not say how to run {label!r}")


def table_named(tables: Mapping[str, Any], name: str, kind: str = "paper table") -> Any:
    """The table ``name`` of ``tables`` (a family's, :class:`PaperTable`); a ValueError naming them
    all for an unknown one."""
    if name not in tables:
        raise ValueError(f"unknown {kind} {name!r}; the paper's: {', '.join(tables)}")
    return tables[name]


@dataclass(frozen=True, kw_only=True)
class PaperTable(ABC):
    """One table of the paper and how to regenerate it: what every family's table has.

    Attributes:
        name: the ``reproduce`` name. label: the paper's LaTeX label. title: its caption.
        paper: the shipped numbers (:func:`~.numbers.load_paper_numbers`), None for a figure
            without numbers (its rows are then :attr:`rows`).
        methods: how each method label is run.
        seeds: the default seeds (``--seeds`` overrides them): the release's 42.
        erratum: an error of the paper this table carries, said wherever it is shown.
        notes: anything else the reader must know.
        decimals: digits after the point, as the paper prints them.
        layout: ``"domains"`` (blocks x methods x per-domain columns and their mean,
            :data:`MEAN_COLUMN`) or ``"summary"`` (methods x a few columns): how it is drawn.
        rows: ``(block, method label)`` of a table without paper numbers.

    A family's table also has ``protocol``, what the report says of the stream its runs read
    (``key``: the folder name of its runs; ``description``: in words).
    """

    name: str
    label: str
    title: str
    paper: Optional[str]
    methods: Tuple[Method, ...]
    seeds: Tuple[int, ...] = (RELEASE_SEED,)
    erratum: str = ""
    notes: Tuple[str, ...] = ()
    decimals: int = 1
    layout: str = "summary"
    rows: Tuple[Tuple[str, str], ...] = ()

    def paper_numbers(self) -> Optional[PaperNumbers]:
        return load_paper_numbers(self.paper) if self.paper else None

    def table_rows(self) -> Tuple[Tuple[str, str], ...]:
        """``(block, method label)`` in the paper's order."""
        numbers = self.paper_numbers()
        return tuple((r.block, r.method) for r in numbers.rows) if numbers else self.rows

    def method(self, label: str) -> Method:
        return find_method(self.methods, label, self.name)

    # ------------------------------------------------------------------ what a family says
    @abstractmethod
    def table_columns(self) -> Tuple[str, ...]:
        """The value columns, in the paper's order."""

    @abstractmethod
    def run_protocols(self, settings, block: Optional[str] = None) -> Sequence[Any]:
        """The protocols (:class:`~.protocol.PaperProtocol`) a method of ``block`` runs on, one run
        each per seed (a per-domain table: its one stream; a language-model table: each order)."""

    def row_name(self, block: str, label: str) -> str:
        """How the plan names the row a run serves (``used by``): its label, when every block of
        the table reads the same runs."""
        return label

    @abstractmethod
    def cells(self, block: str, paper_row: Optional[PaperRow], runs: Sequence[Any],
              reports: Optional[Dict[Any, dict]], settings) -> Dict[str, Any]:
        """``{column: Cell}`` of a row (:class:`~.results.Cell`): the paper's number (``paper_row``,
        None for a table without numbers) and ours from ``reports`` (``{run: results.json}``; None when
        the row is not run or not finished)."""

    def plan_heading(self, settings) -> str:
        """What the plan adds to the table's heading before its seeds (the model it loads)."""
        return ""

    @abstractmethod
    def plan_lines(self, settings) -> List[str]:
        """What ``--dry-run`` says of the table under its heading: how each row runs."""


__all__ = ["MEAN_COLUMN", "Method", "NOT_IN_LIBRARY", "PaperTable", "find_method", "table_named"]
