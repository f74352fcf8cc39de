"""The runs of ``reproduce``: every run a set of tables needs, each once, with its settings.

A run is one strategy on one protocol with one seed (:class:`Run`); tables share runs (MoRAM on
X-TAIL order 1 with seed 42 serves seven CLIP tables; ``t5-order-robustness`` reads
``t5-standard``'s), so each runs once, in its own folder
``<out>/runs/<protocol>/seed<seed>/<run name>`` -- a
:func:`~moram_avalanche.experiments.compare.run_comparison` folder, resumable.

A run's keyword arguments (:func:`run_options`) are its strategy's paper settings on its
protocol (the family's recipes), then, for smoke runs and rehearsals only, what a shorter budget
sets (the settings' :meth:`~.settings.ReproductionSettings.budget_options`), then the row's own
options (:attr:`~.spec.Method.options`). The seed sets both the training (Python, NumPy and
torch generators) and the stream's draws (few-shot subsets, example order), as the release's
single ``--seed`` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple


@dataclass(frozen=True)
class Run:
    """One strategy on one protocol (:class:`~.protocol.PaperProtocol`) with one seed;
    ``options``: the row's own options."""

    protocol: Any
    strategy: str
    options: Tuple[Tuple[str, Any], ...]
    seed: int

    @property
    def name(self) -> str:
        """The run's folder name: its strategy and its row's options, in the family's words."""
        return self.protocol.run_name(self.strategy, self.options)

    def folder(self, runs_root) -> Path:
        return Path(runs_root) / self.protocol.key / f"seed{self.seed}" / self.name


class PlannedRun(NamedTuple):
    """A run and the table rows it serves."""

    run: Run
    used_by: List[str]


def table_seeds(spec, settings) -> Tuple[int, ...]:
    """The seeds of ``spec``'s runs: ``--seeds``, else the table's own."""
    return settings.seeds if settings.seeds is not None else spec.seeds


def method_runs(spec, label: str, settings, block: Optional[str] = None) -> List[Run]:
    """The runs of one method (of one block) of a table: one per protocol and seed ([] when the
    method is not run)."""
    method = spec.method(label)
    if method.strategy is None:
        return []
    return [Run(protocol, method.strategy, protocol.own_options(method.strategy, method.options), seed)
            for protocol in spec.run_protocols(settings, block) for seed in table_seeds(spec, settings)]


def plan(specs: Sequence[Any], settings) -> List[PlannedRun]:
    """Every distinct run of ``specs``, in table order, with the rows each serves."""
    planned: Dict[Run, PlannedRun] = {}
    for spec in specs:
        for block, label in spec.table_rows():
            row = f"{spec.name}: {spec.row_name(block, label)}"
            for run in method_runs(spec, label, settings, block):
                entry = planned.setdefault(run, PlannedRun(run, []))
                if row not in entry.used_by:
                    entry.used_by.append(row)
    return list(planned.values())


def run_options(run: Run, settings) -> Dict[str, Any]:
    """The keyword arguments of ``run``'s strategy (module docstring), what the protocol adds once
    the model is loaded aside (:meth:`~.protocol.PaperProtocol.run_arguments`)."""
    options = run.protocol.paper_options(run, settings)
    if settings.budget is not None:
        options.update(settings.budget_options(run, options))
    options.update(dict(run.options))
    return options


def run_settings(run: Run, settings) -> Dict[str, Any]:
    """What made the run, as stored in its folder and checked when it resumes (JSON-able)."""
    return {
        "reproduce": 1, "protocol": run.protocol.key, "benchmark": run.protocol.builder,
        "stream": run.protocol.stream_record(run, settings),
        "data_root": str(Path(settings.data_root).expanduser().resolve()) if settings.data_root else None,
        **settings.model_record(run), "strategy": run.strategy, "seed": run.seed,
        "options": {k: repr(v) for k, v in sorted(run_options(run, settings).items())},
        **run.protocol.record_extras(run, settings),
    }


__all__ = ["PlannedRun", "Run", "method_runs", "plan", "run_options", "run_settings", "table_seeds"]
