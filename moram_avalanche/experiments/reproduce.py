"""``moram-avalanche reproduce TABLE``: the paper's CLIP tables, from one command.

For each table (:mod:`.paper_tables`), every row the library can run is run with the paper's
settings (:mod:`.reproduce_plan`) on top of :func:`~moram_avalanche.experiments.compare.run_comparison`
-- one resumable comparison folder per run, shared by every table that needs it -- and the
table is written beside the paper's numbers (:mod:`.reproduce_report`).

Before anything runs, everything the plan reads is checked (the datasets of each protocol,
the reference data, DDAS's AlexNet weights, a local weights file) and every missing item is
named at once. ``paper_only`` prints the paper's tables (no data needed); ``dry_run`` the plan;
``settings.rehearse`` runs the whole plan at real model size with 2 iterations per experience
on 2 test images per class (under ``<out>/rehearsal``), so a missing file or a crash shows in
minutes rather than after a GPU-day.

From Python::

    from moram_avalanche.experiments.reproduce import ReproduceSettings, reproduce
    results = reproduce("xtail", ReproduceSettings(data_root="~/data", device="cuda"))
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

from ..benchmarks import get_benchmark
from ..strategies.registry import get_strategy
from ..utils.files import atomic_write_text
from .paper_tables import TABLE_NAMES, TableSpec, resolve_tables
from .reproduce_plan import (PlannedRun, ReproduceSettings, Run, files_needed, format_plan, plan,
                             reference_sources, run_options, run_settings)
from .reproduce_report import TableResult, paper_markdown, table_result, write_table

logger = logging.getLogger(__name__)

#: the values ``reproduce``'s TABLE takes
TABLE_CHOICES = (*TABLE_NAMES, "all")


def paper_text(table: str) -> str:
    """The paper's table(s) alone, as Markdown (no data needed)."""
    return "\n".join(paper_markdown(spec) for spec in resolve_tables(table))


def plan_text(table: str, settings: ReproduceSettings) -> str:
    """The plan of ``reproduce table``: every run with its settings and what it needs on disk."""
    specs = resolve_tables(table)
    return format_plan(specs, settings, plan(specs, settings))


def parse_seeds(text: str) -> Tuple[int, ...]:
    """``"42,43,44"`` -> ``(42, 43, 44)``; a clear error for anything else."""
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if not parts or not all(part.isdigit() for part in parts):
        raise ValueError(f"--seeds must be comma-separated non-negative integers, e.g. 42,43,44; got {text!r}")
    return tuple(int(part) for part in parts)


def resolve_device(device: str) -> str:
    """``"auto"``: CUDA when available, else the CPU; anything else as given."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def check_needs(specs: Sequence[TableSpec], settings: ReproduceSettings, planned: Sequence[PlannedRun]) -> None:
    """Raise one ValueError naming everything the plan needs that is not on disk."""
    from ..benchmarks.check import check_data

    if settings.data_root is None:
        raise ValueError("reproduce needs the datasets: give --data-root DIR (or --paper for the "
                         "paper's numbers alone, --dry-run for the plan)")
    root = Path(settings.data_root).expanduser()
    if not root.is_dir():
        raise ValueError(f"--data-root {root} is not a folder")
    problems: List[str] = _model_problems(settings)
    for kind in dict.fromkeys(entry.run.protocol.benchmark for entry in planned):
        reports = check_data(root, kind, progress=settings.progress)
        problems += [f"{kind} domain {r.name}: {r.status} -- {r.message.splitlines()[0] if r.message else ''}"
                     for r in reports if not r.usable]
    for entry in planned:
        for what, path in files_needed(entry.run, settings).items():
            if not Path(path).expanduser().exists():
                problems.append(f"{what}: {path} does not exist")
    problems = list(dict.fromkeys(problems))
    if problems:
        raise ValueError(
            f"cannot reproduce {', '.join(s.name for s in specs)}: {len(problems)} thing(s) missing; "
            "nothing was run.\n  " + "\n  ".join(problems) +
            f"\n`moram-avalanche check-data --root {root}` details the datasets; `reproduce --dry-run` "
            "lists everything each run reads (--ref-images / --ref-sentences give the reference "
            "data elsewhere).")


def _model_problems(settings: ReproduceSettings) -> List[str]:
    """The model name and its weights: a known name; a known tag or an existing file."""
    import open_clip

    if settings.model not in open_clip.list_models():
        return [f"model {settings.model!r} is not an open_clip model name (the paper: ViT-B-16)"]
    pretrained = settings.pretrained
    if not pretrained or pretrained.lower() == "none" or open_clip.get_pretrained_cfg(settings.model, pretrained):
        return []
    if not Path(pretrained).expanduser().is_file():
        return [f"--pretrained {pretrained}: neither a tag of {settings.model} "
                f"({', '.join(open_clip.list_pretrained_tags_by_model(settings.model)) or 'none'}) "
                "nor an existing file"]
    return []


def _setup(run: Run, settings: ReproduceSettings):
    """The :class:`~moram_avalanche.experiments.compare.Setup` of one run."""
    from ..benchmarks.reference_sets import reference_data
    from ..clip.load import load_clip
    from .compare import Setup

    needs = get_strategy(run.strategy).needs
    builder = get_benchmark(run.protocol.builder)
    stream = {**run.protocol.stream_options(), "seed": run.seed}
    if settings.test_shots is not None:
        stream["test_shots"] = settings.test_shots
    options, sources = run_options(run, settings), reference_sources(run, settings)
    pretrained = None if not settings.pretrained or settings.pretrained.lower() == "none" else settings.pretrained

    def make_options(name, eval_transform):
        kwargs = dict(options)
        if sources:
            kwargs.update(needs.reference_arguments(**reference_data(eval_transform, **sources)))
        return kwargs

    return Setup(
        make_model=lambda: load_clip(settings.model, pretrained=pretrained, device=settings.device,
                                     weights_origin=settings.weights_origin),
        make_benchmark=lambda train_tf, eval_tf: builder(settings.data_root, train_transform=train_tf,
                                                         eval_transform=eval_tf, **stream),
        options=make_options, settings=run_settings(run, settings), seed=run.seed,
        device=settings.device, num_workers=settings.num_workers)


def reproduce(table: str, settings: ReproduceSettings) -> Dict[str, TableResult]:
    """Run every run of ``table`` (a name of :data:`TABLE_CHOICES`) not finished yet, and write
    each table under ``settings.root / <table>``; returns ``{table: result}``.

    Resumable: a finished run is read back, an interrupted one continues from its checkpoint.
    Everything the plan needs is checked first (:func:`check_needs`).
    """
    from .compare import run_comparison

    specs = resolve_tables(table)
    planned = plan(specs, settings)
    check_needs(specs, settings, planned)
    runs_root = settings.root / "runs"
    for index, entry in enumerate(planned, start=1):
        run = entry.run
        logger.info("run %d of %d: %s, seed %d, %s", index, len(planned), run.run_id, run.seed,
                    run.protocol.key)
        run_comparison(_setup(run, settings), [run.strategy], run.folder(runs_root), resume=True,
                       progress=settings.progress)
    results = {}
    for spec in specs:
        results[spec.name] = result = table_result(spec, settings)
        write_table(result, settings.root / spec.name)
    write_index(settings.root)
    return results


def write_index(root) -> Path:
    """``<root>/index.md``: every table written under ``root`` so far, in the paper's order."""
    root = Path(root)
    parts = [(root / name / "table.md").read_text() for name in TABLE_NAMES if (root / name / "table.md").exists()]
    text = "# The MoRAM paper's CLIP tables, reproduced\n\n" + "\n".join(parts)
    return atomic_write_text(root / "index.md", text)


__all__ = ["ReproduceSettings", "TABLE_CHOICES", "check_needs", "paper_text", "parse_seeds", "plan_text",
           "reproduce", "resolve_device", "write_index"]
