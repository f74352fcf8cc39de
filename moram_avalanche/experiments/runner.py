"""Run a strategy over a benchmark: train each domain, evaluate the whole test stream, checkpoint.

The loop of every experiment in the paper, resumable: after each experience the run state is
written to ``<out_dir>/checkpoint.pt``; started again with the same output folder, the run
continues after the last completed experience and ends with the same accuracy matrix as an
uninterrupted run.

The folder (:class:`~moram_avalanche.experiments.run_folder.RunFolder`: checked, owned by one
process, its record compared once) records what made it (its one record ``run.json``,
:mod:`~moram_avalanche.experiments.record`, written here once the checks passed) and a run with
other settings is refused there; what a killed process leaves behind is
cleared or survived: temporaries of interrupted writes are removed, a damaged checkpoint
falls back to the previous one (:func:`~moram_avalanche.experiments.checkpoint.load_latest_run_state`),
a torn last line of ``bad_images.jsonl`` is ignored, TensorBoard hides the points logged after
the checkpoint it resumes from, and a finished run rewrites results files that went missing.

The package's strategies write the lean run state of :mod:`~moram_avalanche.experiments.checkpoint`
(adapters, clock, plugin and metric state, RNGs); any other strategy -- Avalanche's own,
``avalanche.naive``, ..., on CLIP or on the text loop -- Avalanche's whole-strategy checkpoint (``save_checkpoint`` /
``maybe_load_checkpoint``, with the package's torch 2.15 fix), which holds their replay
buffers, importances and teachers too. In a data-parallel run (``torchrun``) every process
trains and evaluates its share, rank 0 alone writes the folder's files, and every process
resumes from rank 0's checkpoint.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import time
from pathlib import Path
from typing import Any, Mapping, Optional

from tqdm.auto import tqdm

from ..algorithms.data_parallel import barrier, is_main_process
from ..utils.checks import check_nonnegative_int, check_positive_int
from ..utils.random_state import kept_rng_state
from .checkpoint import load_latest_run_state, previous_path, read_latest_run_state, save_checkpoint, save_run_state
from .record import CHECKED, RECORD_NAME, make_record
from .run_folder import BAD_IMAGES_NAME, CHECKPOINT_NAME, RUN_FILES, RunFolder, run_folder

logger = logging.getLogger(__name__)


def run_hooks(strategy) -> tuple:
    """The run-path hooks of the strategy's plugins, checked
    (:class:`~moram_avalanche.strategies.plugins.run_hooks.PluginRunHooks`, one per plugin): a
    hook of the wrong kind or a misspelt one is an error naming the plugin and the fix."""
    from ..strategies.plugins.run_hooks import plugin_run_hooks

    return plugin_run_hooks(strategy.plugins)


def prepare_plugins(strategy) -> None:
    """Let the strategy's plugins prepare what a run needs, once, before its first experience and
    outside every timed step: each plugin's
    :meth:`~moram_avalanche.strategies.plugins.run_hooks.RunHooks.prepare_run`
    (:class:`~moram_avalanche.strategies.plugins.moram.MoRAMPlugin` builds the CPU routing kernel
    there, so that no experience's time -- ``Train s / exp.`` of the tables -- includes the build).
    A resumed run prepares after its checkpoint's generators are set, an uninterrupted one before
    its first experience: what a plugin draws here is put back
    (:func:`~moram_avalanche.utils.random_state.kept_rng_state`), so both draw the same numbers after."""
    with kept_rng_state():
        for hooks in run_hooks(strategy):
            hooks.prepare_run(strategy)


def plugin_files(strategy) -> tuple:
    """The files the strategy's plugins add to a run folder (each plugin's
    :attr:`~moram_avalanche.strategies.plugins.run_hooks.RunHooks.run_files`); a ValueError when
    one is a file the run path writes itself (:data:`RUN_FILES`) or two plugins name the same file."""
    files = [name for hooks in run_hooks(strategy) for name in hooks.run_files]
    taken = sorted({name for name in files if name in RUN_FILES or files.count(name) > 1})
    if taken:
        raise ValueError(f"the strategy's plugins add {taken} to the run folder, which the run path or another "
                         f"plugin writes too ({', '.join(RUN_FILES)} are the run's own): give the plugin's files "
                         "names of their own (run_files)")
    return tuple(files)


def run_stream(strategy, benchmark, out_dir, *, resume: bool = True,
               max_experiences: Optional[int] = None, progress: bool = True,
               num_workers: int = 0, settings: Optional[Mapping[str, Any]] = None,
               environment: Optional[Mapping[str, Any]] = None,
               fingerprints: Optional[Mapping[str, Any]] = None) -> int:
    """Train on each experience of ``benchmark.train_stream`` and evaluate ``test_stream`` after each.

    Args:
        strategy: a strategy of the package or Avalanche's (its evaluator holds the metrics and loggers).
        benchmark: a benchmark of :mod:`moram_avalanche.benchmarks`.
        out_dir: where the checkpoint goes (and, typically, the strategy's results): a folder, or
            a :class:`~moram_avalanche.experiments.run_folder.RunFolder` the caller checked (and
            may own) already.
        resume: continue from ``out_dir/checkpoint.pt`` when it exists; False starts over
            (the run's files in ``out_dir`` are removed first).
        max_experiences: stop after this many experiences in total (None: the whole stream).
        progress: a bar over the experiences (and the strategy's own bars) on a terminal;
            elsewhere (a log file, a pipe) one line per experience.
        num_workers: DataLoader worker processes for decoding images (training keeps its
            workers alive while it cycles the data).
        settings: JSON-able description of what else made the run (data, model weights,
            seeds, ...), recorded with the strategy's class and options and the benchmark's
            domains in the folder's record ``out_dir/run.json`` and checked when it resumes.
        environment: facts recorded beside them but never checked (cache folder, device,
            the base weights' checksum).
        fingerprints: the base model's weights and files as hashes, taken before the strategy
            injected its adapters (:func:`~moram_avalanche.experiments.fingerprints.model_fingerprints`),
            recorded and checked when it resumes (None: not known, not compared). The strategy's
            ``decoding_settings`` (a text strategy's) are recorded and checked too.

    The folder is owned while the run goes on (a second process is refused, naming this one).
    Resuming in a folder whose recorded settings differ is a ValueError that lists the
    differences (nothing is run or written). Images skipped as unreadable are recorded in
    ``out_dir/bad_images.jsonl`` (kept across resumes) and counted in ``results.json``.

    The checkpoint carries the checked parts of the record (its identity), compared with this
    run's on every load, so a folder whose record was lost resumes only the same run; results
    files are written after the checkpoint that backs them.

    Returns the number of experiences completed.
    """
    if max_experiences is not None:
        check_positive_int("max_experiences", max_experiences)
    check_nonnegative_int("num_workers", num_workers)
    check_run_arguments(strategy, benchmark)
    folder = run_folder(out_dir)
    record = run_record(strategy, benchmark, settings, environment, fingerprints)
    with folder.owned(is_main_process()):
        return _run(strategy, benchmark, folder, record, resume=resume, max_experiences=max_experiences,
                    progress=progress, num_workers=num_workers)


def _run(strategy, benchmark, folder: RunFolder, record: dict, *, resume: bool, max_experiences: Optional[int],
         progress: bool, num_workers: int) -> int:
    identity = {**{key: record[key] for key in CHECKED}, "contents": record.get("contents")}
    out_dir = folder.path
    if resume:
        folder.compare(record)
        check_unrecorded_checkpoint(strategy, out_dir)
    main = is_main_process()  # rank 0 of a data-parallel run writes; every process reads
    if main:
        folder.start(resume, plugin_files(strategy))
    barrier()
    path = out_dir / CHECKPOINT_NAME
    done, used = _load(strategy, path, identity) if resume else (0, None)
    if used is not None:
        logger.info("resuming %s after %d experience(s) from %s", type(strategy).__name__, done, used)
    barrier()  # every process has read the checkpoint before rank 0 writes again
    if main:
        folder.write_record(record)
    bad_images = getattr(benchmark, "bad_images", None)
    if bad_images is not None:
        bad_images.redirect(out_dir / BAD_IMAGES_NAME)
    if main:
        hide_later_points(strategy, done + 1)
    loader = {"num_workers": num_workers}
    train_loader = dict(loader, persistent_workers=num_workers > 0)
    stream = benchmark.train_stream
    stop = len(stream) if max_experiences is None else min(len(stream), max_experiences)
    name = type(strategy).__name__
    interactive = progress and sys.stderr.isatty()
    prepare_plugins(strategy)
    bar = tqdm(total=len(stream), initial=done, desc=name, disable=not interactive)
    start = done
    try:
        for index in range(done, stop):
            began = time.perf_counter()
            strategy.train(stream[index], **train_loader)
            with results_held(strategy):  # results.json is never ahead of the checkpoint
                strategy.eval(benchmark.test_stream, **loader)
            if main:
                _save(strategy, path, identity)
                rewrite_results(strategy)
            barrier()  # every process resumes from the same checkpoint
            done = index + 1
            bar.update()
            if progress and not interactive:
                print(f"{name}: experience {done}/{len(stream)} ({getattr(stream[index], 'domain', index)}) "
                      f"done in {time.perf_counter() - began:.1f} s", file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        logger.warning("interrupted after %d experience(s); run again with the same output "
                       "folder to resume from %s", done, path)
        raise
    finally:
        bar.close()
    if done == start and done and main:
        rewrite_results(strategy, bad_images)
    return done


@contextlib.contextmanager
def results_held(strategy):
    """Hold back the result files the strategy's :class:`~.metrics.AccuracyMatrix` metrics write at
    the end of an evaluation (their ``out_dir`` is set aside meanwhile): the run loop writes them
    once the checkpoint that backs them is on disk (:func:`rewrite_results`)."""
    from .metrics import AccuracyMatrix

    metrics = [m for m in getattr(getattr(strategy, "evaluator", None), "metrics", ()) or ()
               if isinstance(m, AccuracyMatrix)]
    folders = [m.out_dir for m in metrics]
    for metric in metrics:
        metric.out_dir = None
    try:
        yield
    finally:
        for metric, folder in zip(metrics, folders):
            metric.out_dir = folder


def check_unrecorded_checkpoint(strategy, out_dir: Path) -> None:
    """A folder holding a checkpoint but no record resumes only when the checkpoint says what
    made it (its identity, compared on load); one that cannot say (0.2's, Avalanche's
    whole-strategy checkpoints) is refused rather than mixed with another run."""
    from .record import read_record

    path = out_dir / CHECKPOINT_NAME
    if not (path.exists() or previous_path(path).exists()) or read_record(out_dir) is not None:
        return
    if lean_checkpoints(strategy):
        state, _ = read_latest_run_state(path)
        if state is not None and state.get("identity") is not None:
            return
    raise ValueError(f"{out_dir} holds a checkpoint but no record of the run that made it ({RECORD_NAME}), "
                     "and the checkpoint does not say which run it was: put the record back, use another "
                     "folder, or start over (--no-resume, resume=False)")


def check_run_arguments(strategy, benchmark) -> None:
    """A TypeError that names the fix when ``strategy`` is not an Avalanche strategy or
    ``benchmark`` not a benchmark object (a name is the usual slip: ``run_stream(s, "xtail", ...)``);
    the strategy's plugins' run-path hooks checked (:func:`plugin_files`)."""
    if isinstance(benchmark, (str, bytes)) or not all(hasattr(benchmark, a) for a in ("train_stream", "test_stream")):
        hint = (f": build it first, e.g. moram_avalanche.benchmarks.get_benchmark({benchmark!r})(data_root, ...)"
                if isinstance(benchmark, str) else "")
        raise TypeError(f"run_stream takes a benchmark with train_stream and test_stream (e.g. "
                        f"moram_avalanche.xtail(...)), got {type(benchmark).__name__} {benchmark!r:.60}{hint}")
    if not all(callable(getattr(strategy, a, None)) for a in ("train", "eval")) or not hasattr(strategy, "plugins"):
        raise TypeError(f"run_stream takes an Avalanche strategy (with train, eval and plugins), got "
                        f"{type(strategy).__name__}: build one, e.g. moram_avalanche.MoRAM(model=..., tokenizer=...)")
    plugin_files(strategy)  # the plugins' run-path hooks, checked before anything is written


def lean_checkpoints(strategy) -> bool:
    """Whether ``strategy`` has the package's lean run state (its CLIP strategies do; a strategy
    whose plugins keep state the lean one does not hold -- Avalanche's by name on the text loop,
    :mod:`~moram_avalanche.strategies.text.builtins` -- says ``lean_checkpoints = False``)."""
    return (getattr(strategy, "lean_checkpoints", True) and hasattr(strategy, "checkpoint_model_state")
            and hasattr(strategy, "load_checkpoint_model_state"))


def _save(strategy, path: Path, identity: Optional[dict] = None) -> None:
    if lean_checkpoints(strategy):
        save_run_state(strategy, path, identity=identity)
    else:
        save_checkpoint(strategy, path)


def _load(strategy, path: Path, identity: Optional[dict] = None):
    """``(experiences done, the file used or None)``: the lean run state (with its fallback to
    the previous checkpoint, its identity checked), or Avalanche's whole-strategy checkpoint."""
    if lean_checkpoints(strategy):
        return load_latest_run_state(strategy, path, identity)
    if not path.exists():
        return 0, None
    from avalanche.checkpointing import maybe_load_checkpoint

    _, done = maybe_load_checkpoint(strategy, str(path), map_location=strategy.device)
    return int(done), path


def run_record(strategy, benchmark, settings: Optional[Mapping[str, Any]] = None,
               environment: Optional[Mapping[str, Any]] = None,
               fingerprints: Optional[Mapping[str, Any]] = None) -> dict:
    """The folder's record (:mod:`~moram_avalanche.experiments.record`): ``run`` (the caller's
    ``settings``), the strategy's class and recorded options, the model's class and size, the
    benchmark's description, the unchecked ``environment``, the model's ``fingerprints`` and the
    strategy's ``decoding_settings`` when it has them (a text strategy)."""
    return make_record(settings or {}, strategy=type(strategy).__name__,
                       options=getattr(strategy, "given_options", {}),
                       model=getattr(strategy, "model", None), benchmark=benchmark, environment=environment,
                       fingerprints=fingerprints, decoding=getattr(strategy, "decoding_settings", None))


def hide_later_points(strategy, step: int) -> None:
    """Tell TensorBoard to drop what the strategy's TensorBoard loggers logged at ``step`` and
    after in earlier sessions: the points of an experience a killed run evaluated but did not
    checkpoint, which the resumed run logs again (TensorBoard's ``purge_step``: a session
    start at ``step``). A run that starts over hides everything from step 1."""
    from tensorboard.compat.proto.event_pb2 import Event, SessionLog

    for tb_logger in getattr(getattr(strategy, "evaluator", None), "loggers", ()) or ():
        file_writer = getattr(getattr(tb_logger, "writer", None), "file_writer", None)
        if file_writer is not None and hasattr(file_writer, "add_event"):
            file_writer.add_event(Event(step=step, session_log=SessionLog(status=SessionLog.START)))
            file_writer.flush()


def rewrite_results(strategy, bad_images=None) -> None:
    """Write the files of every :class:`~moram_avalanche.experiments.metrics.AccuracyMatrix`
    with an output folder again (a finished run resumed: files deleted or damaged since)."""
    from .metrics import AccuracyMatrix

    for metric in getattr(getattr(strategy, "evaluator", None), "metrics", ()) or ():
        if isinstance(metric, AccuracyMatrix) and metric.out_dir is not None and metric.result().size:
            if bad_images is not None:
                metric.bad_images = bad_images
            metric.write(metric.out_dir, metric.heatmap())  # the evaluation's picture, not drawn again


__all__ = ["BAD_IMAGES_NAME", "CHECKPOINT_NAME", "RUN_FILES", "check_unrecorded_checkpoint", "hide_later_points",
           "lean_checkpoints", "plugin_files", "prepare_plugins", "results_held", "rewrite_results", "run_hooks",
           "run_record", "run_stream"]
