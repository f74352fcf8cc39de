"""The one run path: one strategy, one benchmark, one folder.

Every entry point runs strategies through :func:`run_one`: ``run`` (one strategy, its
``--log-dir``: :func:`run_single`), ``compare`` and the demo (each strategy in ``OUT/<name>``:
:func:`~moram_avalanche.experiments.compare.run_comparison`) and ``reproduce`` (a comparison per
table row). A run folder gets, from here alone:

* its one record ``run.json`` (:mod:`~moram_avalanche.experiments.record`): what made it,
  checked before anything runs when the folder already holds a run;
* ``checkpoint.pt`` after every experience, ``results.json`` and the accuracy matrix
  (:func:`~moram_avalanche.experiments.runner.run_stream`, :class:`~.metrics.AccuracyMatrix`);
* ``memory.json`` (:class:`~moram_avalanche.strategies.plugins.memory.PeakMemory`) and
  ``time.json`` (:class:`~moram_avalanche.strategies.plugins.timing.RunTime`), and what the
  strategy's plugins add through the hooks they declare
  (:class:`~moram_avalanche.strategies.plugins.run_hooks.RunHooks`: each plugin's ``run_pictures()``,
  drawn as heatmaps -- MoRAM's ``atom_usage.png`` -- and ``run_reports()``, written as JSON);
  the run path knows no method;
* the Avalanche TensorBoard log in ``tb_dir``.

:func:`prepare_runs` checks every strategy's options and builds the part of each record that
is known before a strategy is built (one model load gives the options their transform), so a
comparison refuses a bad option or a folder of another run before the first strategy runs.
Under ``torchrun`` every process runs data-parallel and rank 0 alone writes.
"""

from __future__ import annotations

import json
import logging
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, Mapping, NamedTuple, Optional, Sequence

from ..algorithms.data_parallel import barrier, is_main_process, world_size
from ..utils.files import atomic_write_text
from ..utils.memory import check_atom_banks_fit
from .fingerprints import model_fingerprints
from .record import CHECKED_BEFORE_BUILDING, contents_of, describe_benchmark, make_record, weights_checksum
from .run_folder import RunFolder, run_folder
from .seeding import RELEASE_SEED, seed_everything
from .tables import PAPER_TABLES, Tables

logger = logging.getLogger(__name__)


@dataclass
class Setup:
    """What every run of an entry point shares.

    Attributes:
        make_model: ``() -> (model, train_transform, eval_transform, tokenizer)``; called once
            per strategy (after seeding), so every strategy starts from the same weights.
        make_benchmark: ``(train_transform, eval_transform) -> benchmark``.
        options: ``(strategy name, eval_transform) -> keyword arguments`` of that strategy
            (the shared budget and any per-strategy settings). Called once per strategy,
            before any strategy runs; its values are checked and recorded.
        settings: JSON-able description of the shared settings (benchmark, model, budget,
            seed, ...): the ``run`` part of every record, checked when a run resumes.
        strategy_settings: ``strategy name -> JSON-able description`` of that strategy's own
            settings (e.g. its ``--set`` values), recorded as ``run.set``.
        seed: Python's, NumPy's and torch's generators are seeded with it before each
            strategy's model and benchmark are built (:func:`~moram_avalanche.experiments.seeding.seed_everything`;
            default 42, the release's).
        device: where the strategies run.
        num_workers: DataLoader worker processes.
        environment: facts recorded but never checked (the cache folder, the device asked for).
        family: the model family of the benchmark ("clip", "text"): whose strategies the names
            are (:data:`~moram_avalanche.strategies.registry.FAMILIES`). A text family's
            ``make_model`` returns ``(LanguageModel, None, None, tokenizer)``.
        data_roots: the folders the runs read data from, which no output folder may be, hold or
            lie inside (``--data-root``, ``--ref-images``).
        options_checked: whether :attr:`options` were checked where they were given (the command
            line checks them once, naming each ``--set`` value); the run path checks any other
            setup's once (:func:`prepare_runs`).
        tables: what a comparison of these runs writes (:class:`~.tables.Tables`; the family's:
            the paper-style CLIP tables by default, OP / BWT per strategy for language models).
        plugins: ``() -> plugins`` added to every strategy it builds, fresh for each (the command
            line's speed switches: :func:`~.from_arguments.switch_plugins`).
    """

    make_model: Callable[[], tuple]
    make_benchmark: Callable[[object, object], object]
    options: Callable[[str, object], dict] = lambda name, eval_transform: {}
    settings: dict = field(default_factory=dict)
    strategy_settings: Callable[[str], dict] = lambda name: {}
    seed: int = RELEASE_SEED
    device: str = "cpu"
    num_workers: int = 0
    environment: dict = field(default_factory=dict)
    family: str = "clip"
    data_roots: tuple = ()
    options_checked: bool = False
    tables: Tables = PAPER_TABLES
    plugins: Callable[[], list] = list

    def run_settings(self, name: str) -> dict:
        """The ``run`` part of strategy ``name``'s record: the shared settings, the seed, the
        strategy's registry name and its own settings."""
        return {**self.settings, "seed": self.seed, "strategy": name, "set": dict(self.strategy_settings(name))}


class Prepared(NamedTuple):
    """A strategy ready to run: its checked options and the record known before it is built."""

    options: dict
    record: dict


def prepare_runs(setup: Setup, names: Sequence[str]) -> Dict[str, Prepared]:
    """``{name: Prepared}``: every strategy's options, given the eval transform of one model
    load, checked without building any strategy; the records' parts known before building.
    Before the model loads, a MoRAM path forced by ``MORAM_AVALANCHE_PATH`` that the setup's
    device cannot run is refused when a strategy runs MoRAM's layers (its ``needs.atoms``;
    :func:`~moram_avalanche.strategies.forced_path.check_forced_path`)."""
    from ..strategies.forced_path import check_forced_path
    from ..strategies.options import check_strategy_options
    from ..strategies.registry import get_strategy

    if any(get_strategy(name, setup.family).needs.atoms for name in names):  # they run MoRAM's layers
        check_forced_path(setup.device)  # before the model loads: a forced path this device cannot run
    seed_everything(setup.seed)
    model, train_tf, eval_tf, _ = setup.make_model()
    built = setup.make_benchmark(train_tf, eval_tf)
    benchmark = describe_benchmark(built)
    shapes = linear_shapes(model)
    environment = {**setup.environment, "weights_checksum": weights_checksum(model)}
    fingerprints = model_fingerprints(model)
    del model
    prepared = {}
    for name in names:
        cls = get_strategy(name, setup.family)
        options = dict(setup.options(name, eval_tf))
        if not setup.options_checked:
            check_strategy_options(cls, options)
        check = getattr(cls, "check_benchmark", None)
        if callable(check):  # the options against the stream they will train on
            check(options, built)
        per_task = options.get(cls.needs.atoms) if cls.needs.atoms else None
        if per_task is not None:  # banks that grow with every task: will they fit?
            check_atom_banks_fit(shapes, int(per_task), len(built.train_stream), setup.device)
        record = make_record(setup.run_settings(name), strategy=cls.__name__, options=options,
                             environment=environment)
        record["benchmark"] = benchmark
        record["contents"] = contents_of(built, environment, fingerprints)
        prepared[name] = Prepared(options, record)
    return prepared


def linear_shapes(model) -> list:
    """``(in_features, out_features)`` of every linear map an adapter can wrap: each
    ``nn.Linear`` and the three projections of each ``nn.MultiheadAttention`` (an upper bound
    of what an injection adapts, for :func:`~moram_avalanche.utils.memory.check_atom_banks_fit`)."""
    from torch import nn

    shapes = []
    for module in model.modules():
        if isinstance(module, nn.Linear):
            shapes.append((module.in_features, module.out_features))
        elif isinstance(module, nn.MultiheadAttention):
            shapes += [(module.embed_dim, module.embed_dim)] * 3
    return shapes


def run_one(setup: Setup, name: str, prepared: Prepared, folder, *, tb_dir, resume: bool = True,
            progress: bool = True) -> dict:
    """Run strategy ``name`` (registry name, ``prepared`` by :func:`prepare_runs`) on the setup's
    benchmark into ``folder`` (a path, or the caller's checked
    :class:`~moram_avalanche.experiments.run_folder.RunFolder`); returns ``results.json``'s
    content plus ``memory`` and ``time``."""
    folder, tb_dir = run_folder(folder), Path(tb_dir)
    main = is_main_process()
    # one process owns the folder from before its TensorBoard log is touched to the last file
    with folder.owned(main):
        return _run_one(setup, name, prepared, folder, tb_dir, resume, progress, main)


def _run_one(setup: Setup, name: str, prepared: Prepared, folder: RunFolder, tb_dir: Path, resume: bool,
             progress: bool, main: bool) -> dict:
    from avalanche.logging import TensorboardLogger
    from avalanche.training.plugins import EvaluationPlugin

    from ..strategies.plugins.data_parallel import DataParallel
    from ..strategies.plugins.divergence import StopOnDivergence
    from ..strategies.plugins.memory import PeakMemory
    from ..strategies.plugins.timing import RunTime
    from ..strategies.registry import get_strategy
    from .metrics import AccuracyMatrix, accuracy_matrix_of
    from .runner import run_stream

    if not resume and main:
        shutil.rmtree(tb_dir, ignore_errors=True)
    seed_everything(setup.seed)
    model, train_tf, eval_tf, tokenizer = setup.make_model()
    environment = {**setup.environment, "weights_checksum": weights_checksum(model)}
    fingerprints = model_fingerprints(model)
    benchmark = setup.make_benchmark(train_tf, eval_tf)
    matrix = AccuracyMatrix(out_dir=folder.path)
    options = dict(prepared.options)
    parallel = [DataParallel()] if world_size() > 1 else []
    plugins = [PeakMemory(), RunTime(), StopOnDivergence(), *parallel, *setup.plugins(), *options.pop("plugins", [])]
    loggers = (lambda: [TensorboardLogger(tb_dir)]) if main else list  # rank 0 logs (Avalanche's rule)
    # the evaluator (and its TensorBoard folder) is made once the strategy passed its checks
    evaluator = lambda: EvaluationPlugin(matrix, loggers=loggers())  # noqa: E731
    strategy = get_strategy(name, setup.family)(model=model, tokenizer=tokenizer, evaluator=evaluator, device=setup.device,
                                  progress=progress and main, plugins=plugins, **options)
    run_stream(strategy, benchmark, folder, resume=resume, progress=progress and main,
               num_workers=setup.num_workers, settings=prepared.record["run"], environment=environment,
               fingerprints=fingerprints)
    # a whole-strategy resume (Avalanche's strategies) replaced the metric and plugins
    peak, clock = (next(p for p in strategy.plugins if isinstance(p, kind)) for kind in (PeakMemory, RunTime))
    report = {**accuracy_matrix_of(strategy).report(), "memory": peak.report(), "time": clock.report()}
    if main:
        atomic_write_text(folder / "memory.json", json.dumps(report["memory"], indent=2) + "\n")
        atomic_write_text(folder / "time.json", json.dumps(report["time"], indent=2) + "\n")
        write_plugin_pictures(strategy, folder.path)
        write_plugin_reports(strategy, folder.path)
    barrier()
    return report


def write_plugin_pictures(strategy, folder: Path) -> None:
    """Draw what the strategy's plugins add to a run folder: each plugin's
    :meth:`~moram_avalanche.strategies.plugins.run_hooks.RunHooks.run_pictures`,
    ``{file name: keyword arguments of} :func:`~moram_avalanche.experiments.viz.heatmap``; a
    TypeError naming the plugin when a picture's arguments are not heatmap's."""
    import inspect

    from .runner import run_hooks
    from .viz import heatmap, save_png

    for hooks in run_hooks(strategy):
        for file_name, picture in hooks.run_pictures().items():
            try:
                inspect.signature(heatmap).bind(**picture)
            except TypeError as error:
                raise TypeError(f"{type(hooks.plugin).__name__}.run_pictures() gave {file_name!r} arguments "
                                f"heatmap does not take ({error}): expected {inspect.signature(heatmap)}") from None
            save_png(heatmap(**picture), folder / file_name)


def write_plugin_reports(strategy, folder: Path) -> None:
    """Write what the strategy's plugins report to a run folder: each plugin's
    :meth:`~moram_avalanche.strategies.plugins.run_hooks.RunHooks.run_reports`,
    ``{file name: JSON-able content}`` (HumanEval's sampled pass@k), atomically; a TypeError
    naming the plugin when a report is not JSON-able."""
    from .runner import run_hooks

    for hooks in run_hooks(strategy):
        for file_name, content in hooks.run_reports().items():
            try:
                text = json.dumps(content, indent=2) + "\n"
            except (TypeError, ValueError) as error:
                raise TypeError(f"{type(hooks.plugin).__name__}.run_reports() gave {file_name!r} content that "
                                f"is not JSON-able ({error}): report numbers, strings, lists and dicts") from None
            atomic_write_text(folder / file_name, text)


def run_single(setup: Setup, name: str, folder, *, resume: bool = True, progress: bool = True,
               what: str = "log_dir") -> dict:
    """``run``: strategy ``name`` into ``folder`` (TensorBoard in ``folder/tb``), after the same
    checks a comparison makes (the folder, named ``what`` in messages; the options; the folder's
    record when it holds a run)."""
    folder = RunFolder(folder, what, data_roots=setup.data_roots)
    prepared = prepare_runs(setup, [name])[name]
    if resume:
        folder.compare(prepared.record, CHECKED_BEFORE_BUILDING)
    return run_one(setup, name, prepared, folder, tb_dir=folder / "tb", resume=resume, progress=progress)


def recorded_runs(out_dir, names: Optional[Sequence[str]] = None) -> Dict[str, Mapping]:
    """``{strategy: record}`` of the runs an output folder of a comparison holds."""
    from .record import read_record

    out_dir = Path(out_dir)
    found = {}
    if not out_dir.is_dir():
        return found
    for folder in sorted(p for p in out_dir.iterdir() if p.is_dir()):
        if names is not None and folder.name not in names:
            continue
        record = read_record(folder, f"{folder.name} in {out_dir}")
        if record is not None:
            found[folder.name] = record
    return found


__all__ = ["Prepared", "Setup", "linear_shapes", "prepare_runs", "recorded_runs", "run_one", "run_single",
           "write_plugin_pictures", "write_plugin_reports"]
