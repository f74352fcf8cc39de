"""Compare strategies on one benchmark: same model, data, seed and budget; one table.

:func:`run_comparison` runs each strategy with :func:`~moram_avalanche.experiments.runner.run_stream`
from a freshly loaded model and a freshly built benchmark (the same seed before each), and
writes, under ``out_dir``:

* ``<strategy>/``: ``results.json``, ``accuracy_matrix.csv`` / ``.png``, ``checkpoint.pt``,
  ``memory.json`` (peak memory and its breakdown), ``time.json`` (training / evaluation
  seconds), ``atom_usage.png`` for strategies with a MoRAM plugin;
* ``tensorboard/<strategy>/``: each run's Avalanche TensorBoard log, and
  ``tensorboard/comparison/``: the table (text) and the side-by-side matrices (image), so
  ``tensorboard --logdir <out_dir>/tensorboard`` overlays every strategy's curves
  (``AccMatrix/<domain>``, ``/Transfer``, ``/Average``, ``/Last``) next to the comparison;
* ``table.md`` / ``table.csv``: the paper-style Transfer / Average / Last table per domain
  (:mod:`moram_avalanche.experiments.tables`), ``summary.md``: one line per strategy with peak memory and
  training time, ``accuracy_matrices.png``: the matrices side by side;
* ``compare.json``: the settings every strategy shares, and ``<strategy>/settings.json``:
  the run's record (:mod:`~moram_avalanche.experiments.settings`): the shared settings, the
  strategy's own (its ``--set`` options), the options it was built with, the benchmark.

Resumable per strategy: a strategy whose ``results.json`` holds a complete matrix is not run
again; an interrupted one continues from its checkpoint; one added later joins the table; a
finished one whose result files went missing or were damaged writes them again.
A folder holding a comparison made with other shared settings is refused (its numbers would
not be comparable), and so is a strategy already run there with other settings or options of
its own (delete its folder to run it again). Everything is checked before anything runs or
is written: the model is loaded once to give every strategy's options (:attr:`Setup.options`)
their transform, and each strategy's options are checked
(:func:`~moram_avalanche.strategies.options.check_strategy_options`) and compared with its
record.

Strategies are the registry's (:func:`~moram_avalanche.strategies.registry.get_strategy`):
the package's and Avalanche's own (``avalanche.naive``, ...). Under ``torchrun`` every
process runs every strategy data-parallel and rank 0 alone writes.
"""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Optional, Sequence

import numpy as np

from ..algorithms.data_parallel import barrier, is_main_process, world_size
from ..utils.files import atomic_write_bytes, atomic_write_text, check_output_folder, remove_temporaries
from .seeding import RELEASE_SEED, seed_everything
from .settings import RUN_SETTINGS_NAME, check_settings, describe_benchmark, describe_options, write_settings

logger = logging.getLogger(__name__)

SETTINGS_NAME = "compare.json"
#: a strategy's record, in its run folder (the runner's :data:`~.settings.RUN_SETTINGS_NAME`)
STRATEGY_SETTINGS_NAME = RUN_SETTINGS_NAME
#: the parts of a run's record known before its strategy is built (its model is not)
CHECKED_BEFORE_RUNNING = ("run", "strategy", "options", "benchmark")


@dataclass
class Setup:
    """What every strategy of a comparison shares.

    Attributes:
        make_model: ``() -> (model, train_transform, eval_transform, tokenizer)``; called once
            per strategy (after seeding), so every strategy starts from the same weights.
        make_benchmark: ``(train_transform, eval_transform) -> benchmark``.
        options: ``(strategy name, eval_transform) -> keyword arguments`` of that strategy
            (the shared budget and any per-strategy settings). Called once per strategy,
            before any strategy runs; its values are checked and recorded.
        settings: JSON-able description of the shared settings (benchmark, model, budget,
            seed, ...), stored in ``compare.json`` and checked when a comparison resumes.
        strategy_settings: ``strategy name -> JSON-able description`` of that strategy's own
            settings (e.g. how its options were given), stored in ``<strategy>/settings.json``
            with the options themselves and checked when it resumes.
        seed: Python's, NumPy's and torch's generators are seeded with it before each
            strategy's model and benchmark are built (:func:`~moram_avalanche.experiments.seeding.seed_everything`;
            default 42, the release's).
        device: where the strategies run.
        num_workers: DataLoader worker processes.
    """

    make_model: Callable[[], tuple]
    make_benchmark: Callable[[object, object], object]
    options: Callable[[str, object], dict] = lambda name, eval_transform: {}
    settings: dict = field(default_factory=dict)
    strategy_settings: Callable[[str], dict] = lambda name: {}
    seed: int = RELEASE_SEED
    device: str = "cpu"
    num_workers: int = 0


def run_comparison(setup: Setup, strategies: Sequence[str], out_dir, *, resume: bool = True,
                   progress: bool = True) -> Dict[str, dict]:
    """Run ``strategies`` (registry names) under ``setup``; returns ``{name: report}``.

    A report is ``results.json``'s content plus ``memory`` and ``time``.
    """
    from ..strategies.registry import get_strategy

    names = _strategy_names(strategies, get_strategy)
    out_dir = check_output_folder(out_dir, "out_dir")
    if resume:
        check_settings(out_dir / SETTINGS_NAME, setup.settings, what=f"the comparison in {out_dir}",
                       fix="use another output folder, or start it over (--no-resume, resume=False)")
    prepared = _prepare(setup, names, get_strategy)
    if resume:
        for name in names:
            check_settings(out_dir / name / STRATEGY_SETTINGS_NAME, prepared[name][1],
                           what=f"{name} in {out_dir}", keys=CHECKED_BEFORE_RUNNING,
                           fix=f"delete {out_dir / name} to run it again with these, or start the "
                               "comparison over (--no-resume, resume=False)")
    main = is_main_process()  # rank 0 of a data-parallel run writes; the others only train
    barrier()  # every process has checked the stored settings before rank 0 rewrites them
    if main:
        remove_temporaries(out_dir)
        write_settings(out_dir / SETTINGS_NAME, setup.settings)
    results = {}
    for name in names:
        run_dir = out_dir / name
        if not resume and main:
            shutil.rmtree(run_dir, ignore_errors=True)
        barrier()
        done = _complete_report(run_dir) if resume else None
        if done is not None:
            logger.info("%s: complete in %s, not run again", name, run_dir)
            results[name] = done
            continue
        options, record = prepared[name]
        results[name] = _run_one(setup, name, get_strategy(name), run_dir, out_dir / "tensorboard" / name,
                                 resume, progress, options, record["run"])
    if main:
        write_comparison(results, out_dir)
    return results


def _prepare(setup: Setup, names: Sequence[str], get_strategy) -> Dict[str, tuple]:
    """``{name: (options, the record checked before running)}``: every strategy's options,
    given the eval transform of one model load, checked without building any strategy."""
    from ..strategies.options import check_strategy_options

    seed_everything(setup.seed)
    model, train_tf, eval_tf, _ = setup.make_model()
    benchmark = describe_benchmark(setup.make_benchmark(train_tf, eval_tf))
    del model
    prepared = {}
    for name in names:
        cls = get_strategy(name)
        options = dict(setup.options(name, eval_tf))
        check_strategy_options(cls, options)
        run = {"comparison": setup.settings, "strategy_settings": setup.strategy_settings(name),
               "seed": setup.seed}
        prepared[name] = (options, {"run": run, "strategy": cls.__name__,
                                    "options": describe_options(options), "benchmark": benchmark})
    return prepared


def _strategy_names(strategies: Sequence[str], get_strategy) -> list:
    names = [s.strip().lower() for s in strategies if s.strip()]
    if not names:
        raise ValueError("no strategies to compare: give at least one name, e.g. moram,zeroshot")
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"strategies listed twice: {duplicates}")
    for name in names:
        get_strategy(name)  # unknown names fail before anything runs
    return names


def _complete_report(run_dir: Path) -> Optional[dict]:
    """The stored report of a finished run, or None (not finished, or a file missing or
    damaged: the run is resumed from its checkpoint, which writes them again)."""
    try:
        report = json.loads((run_dir / "results.json").read_text())
        memory = json.loads((run_dir / "memory.json").read_text())
        time = json.loads((run_dir / "time.json").read_text())
        matrix = report.get("matrix") or []
        if len(matrix) != len(report.get("domains", ())) or "per_domain" not in report:
            return None
    except (OSError, ValueError, AttributeError, TypeError):
        return None
    return {**report, "memory": memory, "time": time}


def _run_one(setup: Setup, name: str, strategy_class, run_dir: Path, tb_dir: Path, resume: bool,
             progress: bool, options: dict, settings: dict) -> dict:
    from avalanche.logging import TensorboardLogger
    from avalanche.training.plugins import EvaluationPlugin

    from ..strategies.plugins.data_parallel import DataParallel
    from ..strategies.plugins.memory import PeakMemory
    from ..strategies.plugins.moram import MoRAMPlugin
    from ..strategies.plugins.timing import RunTime
    from .metrics import AccuracyMatrix, accuracy_matrix_of
    from .runner import run_stream

    main = is_main_process()
    if not resume and main:
        shutil.rmtree(tb_dir, ignore_errors=True)
    seed_everything(setup.seed)
    model, train_tf, eval_tf, tokenizer = setup.make_model()
    benchmark = setup.make_benchmark(train_tf, eval_tf)
    matrix = AccuracyMatrix(out_dir=run_dir)
    options = dict(options)
    parallel = [DataParallel()] if world_size() > 1 else []
    plugins = [PeakMemory(), RunTime(), *parallel, *options.pop("plugins", [])]
    loggers = (lambda: [TensorboardLogger(tb_dir)]) if main else list  # rank 0 logs (Avalanche's rule)
    # the evaluator (and its TensorBoard folder) is made once the strategy passed its checks
    evaluator = lambda: EvaluationPlugin(matrix, loggers=loggers())  # noqa: E731
    strategy = strategy_class(model=model, tokenizer=tokenizer, evaluator=evaluator,
                              device=setup.device, progress=progress and main, plugins=plugins, **options)
    run_stream(strategy, benchmark, run_dir, resume=resume, progress=progress and main,
               num_workers=setup.num_workers, settings=settings)
    # a whole-strategy resume (Avalanche's strategies) replaced the metric and plugins
    peak, clock = (next(p for p in strategy.plugins if isinstance(p, kind)) for kind in (PeakMemory, RunTime))
    report = {**accuracy_matrix_of(strategy).report(), "memory": peak.report(), "time": clock.report()}
    history = [entry for plugin in strategy.plugins if isinstance(plugin, MoRAMPlugin)
               for entry in plugin.history]
    if main:
        atomic_write_text(run_dir / "memory.json", json.dumps(report["memory"], indent=2) + "\n")
        atomic_write_text(run_dir / "time.json", json.dumps(report["time"], indent=2) + "\n")
        if history:
            from .viz import atom_usage_heatmap

            _save_png(atom_usage_heatmap(history[-1]), run_dir / "atom_usage.png")
    barrier()
    return report


def write_comparison(results: Dict[str, dict], out_dir) -> None:
    """Write ``table.md``, ``table.csv``, ``summary.md``, ``accuracy_matrices.png`` and the
    comparison's TensorBoard entry; print the summary and the table."""
    from .tables import paper_table_csv, paper_table_markdown, summary_table
    from .viz import accuracy_heatmaps

    out_dir = Path(out_dir)
    table, summary = paper_table_markdown(results), summary_table(results)
    atomic_write_text(out_dir / "table.md", table + "\n")
    atomic_write_text(out_dir / "table.csv", paper_table_csv(results))
    atomic_write_text(out_dir / "summary.md", summary + "\n")
    domains = next(iter(results.values()))["domains"]
    image = accuracy_heatmaps({n: r["matrix"] for n, r in results.items()}, domains)
    _save_png(image, out_dir / "accuracy_matrices.png")
    _write_tensorboard(out_dir / "tensorboard" / "comparison", table, summary, image)
    print(summary + "\n\n" + table)


def _save_png(image, path: Path) -> None:
    import io

    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    atomic_write_bytes(path, buffer.getvalue())


def _write_tensorboard(tb_dir: Path, table: str, summary: str, image) -> None:
    """One event file with the tables and the matrices (replacing an earlier one)."""
    from torch.utils.tensorboard import SummaryWriter

    staging = tb_dir.with_name(tb_dir.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    writer = SummaryWriter(str(staging))
    writer.add_text("comparison/table", table, 0)
    writer.add_text("comparison/summary", summary, 0)
    writer.add_image("comparison/accuracy_matrices", np.asarray(image), 0, dataformats="HWC")
    writer.close()
    shutil.rmtree(tb_dir, ignore_errors=True)
    staging.rename(tb_dir)


__all__ = ["SETTINGS_NAME", "STRATEGY_SETTINGS_NAME", "Setup", "run_comparison", "write_comparison"]
