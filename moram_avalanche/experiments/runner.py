"""Run a strategy over a benchmark: train each domain, evaluate the whole test stream, checkpoint.

The loop of every experiment in the paper, resumable: after each experience the run state is
written to ``<out_dir>/checkpoint.pt``; started again with the same output folder, the run
continues after the last completed experience and ends with the same accuracy matrix as an
uninterrupted run.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Optional

from tqdm.auto import tqdm

from .checkpoint import load_run_state, save_run_state

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
    path = Path(out_dir) / CHECKPOINT_NAME
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    if getattr(benchmark, "bad_images", None) is not None:
        benchmark.bad_images.redirect(Path(out_dir) / BAD_IMAGES_NAME)
    loader = {"num_workers": num_workers}
    train_loader = dict(loader, persistent_workers=num_workers > 0)
    done = 0
    if resume and path.exists():
        done = load_run_state(strategy, path)
        logger.info("resuming %s after %d experience(s) from %s", type(strategy).__name__, done, path)
    stream = benchmark.train_stream
    stop = len(stream) if max_experiences is None else min(len(stream), max_experiences)
    bar = tqdm(total=len(stream), initial=done, desc=type(strategy).__name__, disable=not progress)
    try:
        for index in range(done, stop):
            strategy.train(stream[index], **train_loader)
            strategy.eval(benchmark.test_stream, **loader)
            save_run_state(strategy, path)
            done = index + 1
            bar.update()
    except KeyboardInterrupt:
        logger.warning("interrupted after %d experience(s); run again with the same output "
                       "folder to resume from %s", done, path)
        raise
    finally:
        bar.close()
    return done


__all__ = ["BAD_IMAGES_NAME", "CHECKPOINT_NAME", "run_stream"]
