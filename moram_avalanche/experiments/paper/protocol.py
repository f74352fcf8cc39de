"""The protocol of a run: what a family says of the stream one run reads, and of how that run is
set up (:class:`PaperProtocol`).

A run (:class:`~.runs.Run`) is one strategy on one protocol with one seed. The protocol is the
family's record, hashable: the CLIP tables' are their streams (X-TAIL order 1, 5-shot MTIL, ...:
:class:`~moram_avalanche.experiments.clip.protocols.Protocol`); a language-model table's are its
stream on one order with one model, for one table's settings
(:class:`~moram_avalanche.experiments.text.stream_protocol.TextRunProtocol`). Runs on equal
protocols with equal strategies, options and seeds are one run, run once, whichever tables
read it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable, Dict, List, Sequence, Tuple


class PaperProtocol(ABC):
    """What the pipeline asks of a run's protocol (module docstring).

    Attributes (each protocol has them):
        key: the folder name of its runs (``<out>/runs/<key>/seed<seed>/<run name>``).
        builder: the ``--benchmark`` name of its stream (recorded with every run).
    """

    key: str
    builder: str

    @abstractmethod
    def run_name(self, strategy: str, options: Tuple[Tuple[str, Any], ...]) -> str:
        """The folder name of a run of ``strategy`` with its row's ``options``."""

    def own_options(self, strategy: str, options: Tuple[Tuple[str, Any], ...]) -> Tuple[Tuple[str, Any], ...]:
        """The options of a row that make its run one of its own (by default all of them)."""
        return tuple(options)

    @abstractmethod
    def paper_options(self, run, settings) -> Dict[str, Any]:
        """The keyword arguments of ``run``'s strategy on this protocol, as the paper (or the
        strategy's own paper) sets them, before the row's options and any shorter budget."""

    @abstractmethod
    def stream_record(self, run, settings) -> Dict[str, Any]:
        """The stream part of a run's record (JSON-able; checked when the run resumes)."""

    def record_extras(self, run, settings) -> Dict[str, Any]:
        """What else the family records of a run (its reference data); {} by default."""
        return {}

    @abstractmethod
    def make_benchmark(self, run, settings) -> Callable[[Any, Any], Any]:
        """``(train_transform, eval_transform) -> benchmark`` of the run's stream."""

    def run_arguments(self, run, settings, options: Dict[str, Any], eval_transform) -> Dict[str, Any]:
        """The keyword arguments the strategy of ``run`` is built with: ``options`` and what the
        protocol adds once the model's ``eval_transform`` is known (reference data, fresh
        evaluation plugins); a new dict, ``options`` untouched."""
        return dict(options)

    def files_needed(self, run, settings) -> Dict[str, str]:
        """``{what: path}`` of every file or folder ``run`` reads besides its stream's data; {} by
        default."""
        return {}

    @abstractmethod
    def plan_lines(self, run, used_by: Sequence[str], settings) -> List[str]:
        """What ``--dry-run`` says of one planned run and the rows it serves."""


__all__ = ["PaperProtocol"]
