"""Run a strategy over a benchmark: train each domain, evaluate the whole test stream, checkpoint.

The loop of every experiment in the paper, resumable: after each experience the run state is
written to ``<out_dir>/checkpoint.pt``; started again with the same output folder, the run
continues after the last completed experience and ends with the same accuracy matrix as an
uninterrupted run.

The package's strategies write the lean run state of :mod:`~moram_avalanche.experiments.checkpoint`
(adapters, clock, plugin and metric state, RNGs); any other strategy -- Avalanche's own,
``avalanche.naive``, ... -- Avalanche's whole-strategy checkpoint (``save_checkpoint`` /
``maybe_load_checkpoint``, with the package's torch 2.15 fix), which holds their replay
buffers, importances and teachers too. In a data-parallel run (``torchrun``) every process
trains and evaluates its share, rank 0 alone writes the checkpoint, and every process resumes
from it.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Optional

from tqdm.auto import tqdm

from ..algorithms.data_parallel import barrier, is_main_process, world_size
from ..strategies.plugins.data_parallel import DataParallel
from .checkpoint import load_run_state, save_checkpoint, save_run_state

logger = logging.getLogger(__name__)

CHECKPOINT_NAME = "checkpoint.pt"


BAD_IMAGES_NAME = "bad_images.jsonl"


def run_stream(strategy, benchmark, out_dir, *, resume: bool = True,
               max_experiences: Optional[int] = None, progress: bool = True,
               num_workers: int = 0) -> int:
    """Train on each experience of ``benchmark.train_stream`` and evaluate ``test_stream`` after each.

    Args:
        strategy: a CLIP strategy (its evaluator holds the metrics and loggers).
        benchmark: a benchmark of :mod:`moram_avalanche.benchmarks`.
        out_dir: where the checkpoint goes (and, typically, the strategy's results).
        resume: continue from ``out_dir/checkpoint.pt`` when it exists.
        max_experiences: stop after this many experiences in total (None: the whole stream).
        num_workers: DataLoader worker processes for decoding images (training keeps its
            workers alive while it cycles the data).

    Images skipped as unreadable are recorded in ``out_dir/bad_images.jsonl`` (kept across
    resumes) and counted in ``results.json``.

    Returns the number of experiences completed.
    """
    if world_size() > 1 and not any(isinstance(p, DataParallel) for p in strategy.plugins):
        raise ValueError(f"run_stream runs in a process group of {world_size()} processes but the "
                         "strategy has no DataParallel plugin: every process would train its own "
                         "model. Add plugins=[DataParallel()]")
    path = Path(out_dir) / CHECKPOINT_NAME
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    if getattr(benchmark, "bad_images", None) is not None:
        benchmark.bad_images.redirect(Path(out_dir) / BAD_IMAGES_NAME)
    loader = {"num_workers": num_workers}
    train_loader = dict(loader, persistent_workers=num_workers > 0)
    done = 0
    if resume and path.exists():
        done = _load(strategy, path)
        logger.info("resuming %s after %d experience(s) from %s", type(strategy).__name__, done, path)
    stream = benchmark.train_stream
    stop = len(stream) if max_experiences is None else min(len(stream), max_experiences)
    bar = tqdm(total=len(stream), initial=done, desc=type(strategy).__name__, disable=not progress)
    try:
        for index in range(done, stop):
            strategy.train(stream[index], **train_loader)
            strategy.eval(benchmark.test_stream, **loader)
            if is_main_process():
                _save(strategy, path)
            barrier()  # every process resumes from the same checkpoint
            done = index + 1
            bar.update()
    except KeyboardInterrupt:
        logger.warning("interrupted after %d experience(s); run again with the same output "
                       "folder to resume from %s", done, path)
        raise
    finally:
        bar.close()
    return done


def lean_checkpoints(strategy) -> bool:
    """Whether ``strategy`` has the package's lean run state (its CLIP strategies do)."""
    return hasattr(strategy, "checkpoint_model_state") and hasattr(strategy, "load_checkpoint_model_state")


def _save(strategy, path: Path) -> None:
    if lean_checkpoints(strategy):
        save_run_state(strategy, path)
    else:
        save_checkpoint(strategy, path)


def _load(strategy, path: Path) -> int:
    if lean_checkpoints(strategy):
        return load_run_state(strategy, path)
    from avalanche.checkpointing import maybe_load_checkpoint

    _, done = maybe_load_checkpoint(strategy, str(path), map_location=strategy.device)
    return int(done)


__all__ = ["BAD_IMAGES_NAME", "CHECKPOINT_NAME", "lean_checkpoints", "run_stream"]
