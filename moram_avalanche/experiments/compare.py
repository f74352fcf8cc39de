"""Compare strategies on one benchmark: same model, data, seed and budget; one table.

:func:`run_comparison` runs each strategy through the one run path
(:func:`~moram_avalanche.experiments.run.run_one`) from a freshly loaded model and a freshly
built benchmark (the same seed before each), and writes, under ``out_dir``:

* ``<strategy>/``: the run folder of :mod:`~moram_avalanche.experiments.run` (its record
  ``run.json``, ``results.json``, ``accuracy_matrix.csv`` / ``.png``, ``checkpoint.pt``,
  ``memory.json``, ``time.json``, and its plugins' pictures: MoRAM's ``atom_usage.png``);
* ``tensorboard/<strategy>/``: each run's Avalanche TensorBoard log, and
  ``tensorboard/comparison/``: the table (text) and the side-by-side matrices (image), so
  ``tensorboard --logdir <out_dir>/tensorboard`` overlays every strategy's curves
  (``AccMatrix/<domain>``, ``/Transfer``, ``/Average``, ``/Last``) next to the comparison;
* ``table.md`` / ``table.csv``: the paper-style Transfer / Average / Last table per domain
  (:mod:`moram_avalanche.experiments.tables`), ``summary.md``: one line per strategy with peak memory and
  training time, ``accuracy_matrices.png``: the matrices side by side.

The comparison keeps no record of its own: the shared settings are in every strategy's record
(``run``), and a folder whose runs were made with other shared settings is refused (their
numbers would not be comparable), and so is a strategy already run there with other settings
or options of its own (delete its folder to run it again). Everything is checked before
anything runs or is written. (0.2's ``compare.json`` is read through the strategies' migrated
records and removed when the comparison is written again.)

Resumable per strategy: a strategy whose ``results.json`` holds a complete matrix is not run
again; an interrupted one continues from its checkpoint; one added later joins the table; a
finished one whose result files went missing or were damaged writes them again.

Strategies are the registry's (:func:`~moram_avalanche.strategies.registry.get_strategy`):
the package's and Avalanche's own (``avalanche.naive``, ...). Under ``torchrun`` every
process runs every strategy data-parallel and rank 0 alone writes.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import Dict, Optional, Sequence

import numpy as np

from ..algorithms.data_parallel import barrier, is_main_process
from ..utils.files import atomic_write_text, remove_temporaries
from ..utils.lock import RunFolderLock
from ..utils.paths import check_compare_path
from .record import CHECKED_BEFORE_BUILDING, LEGACY_COMPARE_NAME, as_stored, differences
from .run import Setup, prepare_runs, recorded_runs, run_one
from .run_folder import RunFolder

logger = logging.getLogger(__name__)

#: what a run's record holds beside the shared settings of its comparison
OWN_SETTINGS = ("strategy", "set")


def shared_settings(setup: Setup) -> dict:
    """The settings every run of a comparison records alike (its ``run`` minus :data:`OWN_SETTINGS`)."""
    return {k: v for k, v in setup.run_settings("").items() if k not in OWN_SETTINGS}


def check_comparison(out_dir, setup: Setup, *, what: Optional[str] = None, fix: Optional[str] = None) -> None:
    """Refuse ``out_dir`` when a run it holds was made with other shared settings than ``setup``'s."""
    out_dir = Path(out_dir)
    now = as_stored(shared_settings(setup))
    for name, record in recorded_runs(out_dir).items():
        there = {k: v for k, v in dict(record.get("run") or {}).items() if k not in OWN_SETTINGS}
        changed = differences(there, now)
        if changed:
            raise ValueError(
                f"{what or f'the comparison in {out_dir}'} was made with other settings ({'; '.join(changed)}; "
                f"as its run {name} records): "
                f"{fix or 'use another output folder, or start it over (--no-resume, resume=False)'}")


def run_comparison(setup: Setup, strategies: Sequence[str], out_dir, *, resume: bool = True,
                   progress: bool = True, tables=None, what: str = "out_dir") -> Dict[str, dict]:
    """Run ``strategies`` (registry names) under ``setup``; returns ``{name: report}``.

    A report is ``results.json``'s content plus ``memory`` and ``time``. ``tables``: what
    :func:`write_comparison` writes (default: the setup's, :attr:`~.run.Setup.tables`: the
    paper-style CLIP tables, or OP / BWT per strategy for language models). ``what``: how the user named ``out_dir``
    (``--out``), for messages.
    """
    from ..strategies.registry import get_strategy

    names = _strategy_names(strategies, lambda name: get_strategy(name, setup.family))
    out_dir = check_compare_path(out_dir, names, what, data_roots=setup.data_roots)
    folders = {name: RunFolder(out_dir / name) for name in names}
    prepared = _checked(setup, folders, out_dir, resume)  # before anything is written, the folder included
    lock = RunFolderLock(out_dir, "the comparison folder").acquire() if is_main_process() else None
    try:
        _checked(setup, folders, out_dir, resume, prepared)  # again, now that no other process writes here
        return _run_comparison(setup, folders, out_dir, resume, progress, prepared, tables)
    finally:
        if lock is not None:
            lock.release()


def _checked(setup: Setup, folders: Dict[str, RunFolder], out_dir: Path, resume: bool, prepared=None) -> dict:
    """Every strategy prepared (:func:`~moram_avalanche.experiments.run.prepare_runs`) and, when
    resuming, the folder's runs checked against the setup."""
    if resume:
        check_comparison(out_dir, setup)
    prepared = prepared or prepare_runs(setup, list(folders))
    if resume:
        for name, folder in folders.items():
            folder.compare(prepared[name].record, CHECKED_BEFORE_BUILDING, what=f"{name} in {out_dir}",
                           fix=f"delete {folder.path} to run it again with these, or start the "
                               "comparison over (--no-resume, resume=False)")
    return prepared


def _run_comparison(setup: Setup, folders: Dict[str, RunFolder], out_dir: Path, resume: bool, progress: bool,
                    prepared: dict, tables=None) -> Dict[str, dict]:
    main = is_main_process()  # rank 0 of a data-parallel run writes; the others only train
    barrier()  # every process has checked the stored records before rank 0 writes
    if main:
        remove_temporaries(out_dir)
        (out_dir / LEGACY_COMPARE_NAME).unlink(missing_ok=True)
    results = {}
    for name, folder in folders.items():
        if not resume and main:
            shutil.rmtree(folder.path, ignore_errors=True)
        barrier()
        done = _complete_report(folder.path) if resume else None
        if done is not None:
            logger.info("%s: complete in %s, not run again", name, folder.path)
            results[name] = done
            continue
        results[name] = run_one(setup, name, prepared[name], folder, tb_dir=out_dir / "tensorboard" / name,
                                resume=resume, progress=progress)
    if main:
        write_comparison(results, out_dir, tables or setup.tables)
    return results


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


def write_comparison(results: Dict[str, dict], out_dir, tables=None) -> None:
    """Write ``table.md``, ``table.csv``, ``summary.md``, ``accuracy_matrices.png`` and the
    comparison's TensorBoard entry; print the summary and the table.

    ``tables``: a :class:`~moram_avalanche.experiments.tables.Tables` (default
    :data:`~moram_avalanche.experiments.tables.PAPER_TABLES`, the CLIP tables)."""
    from .tables import PAPER_TABLES
    from .viz import accuracy_heatmaps, save_png

    out_dir = Path(out_dir)
    tables = tables or PAPER_TABLES
    table, summary = tables.markdown(results), tables.summary(results)
    atomic_write_text(out_dir / "table.md", table + "\n")
    atomic_write_text(out_dir / "table.csv", tables.csv(results))
    atomic_write_text(out_dir / "summary.md", summary + "\n")
    domains = next(iter(results.values()))["domains"]
    image = accuracy_heatmaps({n: r["matrix"] for n, r in results.items()}, domains)
    save_png(image, out_dir / "accuracy_matrices.png")
    _write_tensorboard(out_dir / "tensorboard" / "comparison", table, summary, image)
    print(summary + "\n\n" + table)


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


__all__ = ["Setup", "check_comparison", "run_comparison", "shared_settings", "write_comparison"]
