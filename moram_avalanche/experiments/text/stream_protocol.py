"""How a language-model table's runs read their stream: a protocol of the text family
(:class:`TextStream`, one per ``--benchmark``: :mod:`.streams`), and the protocol of one run
(:class:`TextRunProtocol`: a table's stream on one order with one model).

A table, its plan and its report ask the stream, so no code branches on the stream's name. A
run's folder is ``<out>/runs/<stream key>/seed<seed>/<strategy>[-<option><value>...]``
(``lm-cl-order1-t5-large/seed42/seq-lora-rank4``); its options are its stream's and its
table's settings with their sources (:mod:`~.recipes`, printed by ``--dry-run``) and what the
stream finds beside the data.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..paper.protocol import PaperProtocol
from .rehearsal import REHEARSAL_TEST, REHEARSAL_TRAIN


@dataclass(frozen=True)
class TextProtocol:
    """The stream of a text table, as its report prints it."""

    key: str
    description: str


def cell_of(report: dict) -> Optional[float]:
    """A run's cell: the mean accuracy over every task after the last one (``last``)."""
    value = report.get("last")
    return None if value is None or (isinstance(value, float) and np.isnan(value)) else float(value)


def model_slug(model: str) -> str:
    """A model's name in folder names: ``meta-llama/Llama-2-7b-hf`` -> ``llama-2-7b-hf``."""
    return Path(model.rstrip("/")).name.lower().replace("_", "-")


class TextStream:
    """How a language-model table's runs read their stream (module docstring): the hooks its
    table (:class:`~.table_spec.TextTableSpec`), its runs (:class:`TextRunProtocol`) and the
    family's settings (:class:`~.reproduce.TextReproduceSettings`) ask."""

    #: the ``--benchmark`` name of the stream
    benchmark = ""
    #: whether the data has a layout to choose (``--layout``)
    has_layout = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.benchmark!r})"

    # ------------------------------------------------------------------ a table on it
    def columns(self, spec) -> Tuple[str, ...]:
        raise NotImplementedError

    def protocol(self, spec) -> TextProtocol:
        raise NotImplementedError

    def orders(self, spec) -> Tuple[Optional[int], ...]:
        """The orders a method runs on, one run each (None: the stream's one order)."""
        return (None,)

    def plan_lines(self, spec) -> List[str]:
        """What ``--dry-run`` says of the stream of ``spec``."""
        return []

    def task_reports(self, specs, settings) -> list:
        """``check-data``'s reports of every task ``specs`` read."""
        raise NotImplementedError

    def problems(self, specs, settings) -> List[str]:
        """What the runs of ``specs`` need beyond the stream's data (packages); [] by default."""
        return []

    def cells(self, spec, paper_row, runs, reports, settings=None) -> Dict[str, Any]:
        """``{column: Cell}`` of a row: the paper's numbers, and ours from ``reports`` (``{run:
        results.json}``; None when the row did not run); ``settings``: the reproduction's."""
        raise NotImplementedError

    # ------------------------------------------------------------------ a run on it
    def run_key(self, protocol: "TextRunProtocol") -> str:
        """The folder name of a run's protocol."""
        raise NotImplementedError

    def where(self, protocol: "TextRunProtocol") -> str:
        """A run's order, in words."""
        raise NotImplementedError

    def record(self, run, settings) -> Dict[str, Any]:
        """The stream part of a run's record."""
        raise NotImplementedError

    def build(self, run, settings):
        """The run's benchmark (capped in a rehearsal)."""
        raise NotImplementedError

    def plugins(self, run, settings) -> list:
        """Fresh plugins every run of the stream carries (its extra evaluations); none by default."""
        return []

    def strategy_options(self, run, settings) -> Dict[str, Any]:
        """Options the stream gives a run's strategy from the reproduction's settings (a path found
        beside the data); {} by default."""
        return {}


@dataclass(frozen=True)
class TextRunProtocol(PaperProtocol):
    """The protocol of one language-model run: ``stream`` on ``order`` (None: its one order) with
    ``model`` (a Hugging Face name or folder; a rehearsal's tiny model has its ``architecture``,
    "t5" or "llama") in ``dtype``, for the settings of ``table`` (the table whose runs these are:
    another table reading them, its ``runs_of``, runs them the same)."""

    stream: TextStream
    table: str
    model: str
    architecture: str
    dtype: str
    order: Optional[int]

    @property
    def key(self) -> str:
        return self.stream.run_key(self)

    @property
    def builder(self) -> str:
        return self.stream.benchmark

    def run_name(self, strategy: str, options: Tuple[Tuple[str, Any], ...]) -> str:
        """The strategy, then its row's options (``seq-lora-rank4``)."""
        return "-".join([strategy, *(f"{key.replace('_', '-')}{value}" for key, value in options)])

    def paper_options(self, run, settings) -> Dict[str, Any]:
        """The run's stream's settings (TRACE's setting on ``trace``; none on ``lm-cl``, whose
        defaults are the strategies') then its table's (O-LoRA's long-sequence lambdas on
        ``t5-long``), :mod:`~.recipes`; and what the stream finds beside the data (SAPT's
        pseudo-samples)."""
        from .recipes import as_options, stream_settings, table_settings

        options = as_options(stream_settings(self.builder, run.strategy) + table_settings(self.table, run.strategy))
        options.update(self.stream.strategy_options(run, settings))
        return options

    def stream_record(self, run, settings) -> Dict[str, Any]:
        stream = self.stream.record(run, settings)
        if settings.rehearse:
            stream.update(train_limit=REHEARSAL_TRAIN, test_limit=REHEARSAL_TEST)
        return stream

    def make_benchmark(self, run, settings) -> Callable[[Any, Any], Any]:
        return lambda train_tf, eval_tf: self.stream.build(run, settings)

    def run_arguments(self, run, settings, options: Dict[str, Any], eval_transform) -> Dict[str, Any]:
        """``options`` and fresh plugins of the stream's (for every strategy built)."""
        plugins = self.stream.plugins(run, settings)
        return {**options, "plugins": plugins} if plugins else dict(options)

    def plan_lines(self, run, used_by: Sequence[str], settings) -> List[str]:
        return [f"  {run.name}, {self.stream.where(self)}, seed {run.seed} -> {run.folder(settings.root / 'runs')}"
                f"  (used by {'; '.join(used_by)})"]


__all__ = ["TextProtocol", "TextRunProtocol", "TextStream", "cell_of", "model_slug"]
