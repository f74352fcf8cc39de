"""The plan of ``moram-avalanche reproduce``: every run a set of tables needs, with its settings.

A run is one strategy on one protocol with one seed (:class:`Run`); tables share runs (MoRAM
on X-TAIL order 1 with seed 42 serves the X-TAIL, routing, robustness, pruning,
load-balancing, sweep and additional-baselines tables), so each runs once, in its own folder
``<out>/runs/<protocol>/seed<seed>/<strategy>[+<option>=<value>...]`` -- a
:func:`~moram_avalanche.experiments.compare.run_comparison` folder, resumable.

A run's keyword arguments are the strategy's own paper settings
(:data:`~moram_avalanche.experiments.clip.recipes.PAPER_OPTIONS`), the row's options
(:class:`~moram_avalanche.experiments.clip.paper_tables.Method`), and, only for rehearsals and smoke
runs, a shorter budget (``iterations`` and what the strategy shortens with it). The seed sets
both the training (Python, NumPy and torch generators) and the few-shot subsets, as the
release's single ``--seed`` does.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

from ...strategies.registry import get_strategy
from .paper_tables import Protocol, TableSpec
from .recipes import PAPER_SOURCES, REFERENCE_PATHS, paper_options, short_budget_options

#: rehearsals (``--rehearse``): optimizer steps per experience and test images per class
REHEARSAL_ITERATIONS = 2
REHEARSAL_TEST_SHOTS = 2
#: the optimisation settings every plan line shows (when the strategy has them)
SHOWN_FIRST = ("iterations", "lr", "train_mb_size", "warmup", "label_smoothing", "betas", "weight_decay")


@dataclass(frozen=True)
class Run:
    """One strategy on one protocol with one seed; ``options``: the row's own options."""

    protocol: Protocol
    strategy: str
    options: Tuple[Tuple[str, Any], ...]
    seed: int

    @property
    def run_id(self) -> str:
        return self.strategy + "".join(f"+{k}={_short(v)}" for k, v in self.options)

    def folder(self, runs_root) -> Path:
        return Path(runs_root) / self.protocol.key / f"seed{self.seed}" / self.run_id


def _short(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def checked_budget_and_seeds(iterations: Optional[int], seeds) -> Optional[Tuple[int, ...]]:
    """A reproduction's ``iterations`` (None or positive) checked; its ``seeds`` as a tuple of
    distinct seeds (None: each table's own)."""
    if iterations is not None and (isinstance(iterations, bool) or iterations < 1):
        raise ValueError(f"iterations must be a positive integer, got {iterations!r}")
    if seeds is None:
        return None
    seeds = tuple(seeds)
    if not seeds or len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct and at least one, got {seeds}")
    return seeds


def parse_seeds(text: str) -> Tuple[int, ...]:
    """``"42,43,44"`` -> ``(42, 43, 44)``; a clear error for anything else."""
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if not parts or not all(part.isdigit() for part in parts):
        raise ValueError(f"--seeds must be comma-separated non-negative integers, e.g. 42,43,44; got {text!r}")
    return tuple(int(part) for part in parts)


class ReproductionSettings:
    """What every reproduction's settings share (the CLIP tables' and the language models'):
    ``out``, ``seeds``, ``iterations`` and ``rehearse`` checked and read the same way."""

    def __post_init__(self):
        self.seeds = checked_budget_and_seeds(self.iterations, self.seeds)

    @property
    def budget(self) -> Optional[int]:
        """The shortened iterations per experience (None: the paper's)."""
        return REHEARSAL_ITERATIONS if self.rehearse else self.iterations

    @property
    def root(self) -> Path:
        """Where this reproduction's runs and tables go (rehearsals apart)."""
        return Path(self.out) / "rehearsal" if self.rehearse else Path(self.out)


@dataclass
class ReproduceSettings(ReproductionSettings):
    """What ``reproduce`` was asked (the command line's options).

    Attributes:
        data_root: the folder holding the datasets (and, by default, the reference data).
        out: where the runs and the tables go.
        seeds: the seeds of every table; None: each table's own (42; the robustness table 42,
            43, 44).
        device: torch device of the runs.
        model, pretrained, weights_origin: the CLIP (the paper: ViT-B-16, OpenAI's weights --
            QuickGELU; a local file of them needs ``weights_origin="openai"``).
        ref_images, ref_sentences: reference data for every strategy that takes it, instead of
            each strategy's paper location under ``data_root`` (an image folder or
            "synthetic"; a sentence file or "synthetic").
        iterations: a shorter budget per experience (smoke runs; not the paper's); with it each
            strategy shortens what scales with the budget (warm-up, averaging, DDAS autoencoders).
        rehearse: 2 iterations per experience and 2 test images per class, at real model size,
            under ``out/rehearsal``: a missing file or a crash shows in minutes.
        num_workers, progress: DataLoader workers; progress bars.
    """

    data_root: Optional[str] = None
    out: str = "runs/reproduce"
    seeds: Optional[Tuple[int, ...]] = None
    device: str = "cpu"
    model: str = "ViT-B-16"
    pretrained: Optional[str] = "openai"
    weights_origin: Optional[str] = None
    ref_images: Optional[str] = None
    ref_sentences: Optional[str] = None
    iterations: Optional[int] = None
    rehearse: bool = False
    num_workers: int = 0
    progress: bool = True

    @property
    def test_shots(self) -> Optional[int]:
        return REHEARSAL_TEST_SHOTS if self.rehearse else None


class PlannedRun(NamedTuple):
    """A run and the table rows it serves."""

    run: Run
    used_by: List[str]


def table_seeds(spec: TableSpec, settings: ReproduceSettings) -> Tuple[int, ...]:
    return settings.seeds if settings.seeds is not None else spec.seeds


def method_runs(spec: TableSpec, label: str, settings: ReproduceSettings) -> List[Run]:
    """The runs of one method of a table, one per seed ([] when the method is not run)."""
    method = spec.method(label)
    if method.strategy is None:
        return []
    paper = paper_options(method.strategy, spec.protocol)
    # an option equal to the paper's setting is no option: the same run serves both rows
    own = tuple(sorted((k, v) for k, v in method.options if k not in paper or paper[k] != v))
    return [Run(spec.protocol, method.strategy, own, seed) for seed in table_seeds(spec, settings)]


def plan(specs: Sequence[TableSpec], settings: ReproduceSettings) -> List[PlannedRun]:
    """Every distinct run of ``specs``, in table order, with the rows each serves."""
    planned: Dict[Run, PlannedRun] = {}
    for spec in specs:
        for label in dict.fromkeys(label for _, label in spec.table_rows()):
            for run in method_runs(spec, label, settings):
                entry = planned.setdefault(run, PlannedRun(run, []))
                entry.used_by.append(f"{spec.name}: {label}")
    return list(planned.values())


def run_options(run: Run, settings: ReproduceSettings) -> Dict[str, Any]:
    """The keyword arguments of ``run``'s strategy, reference data aside."""
    needs = get_strategy(run.strategy).needs
    options = paper_options(run.strategy, run.protocol)
    options.update(dict(run.options))
    if settings.budget is not None and needs.trains:
        options["iterations"] = settings.budget
        options.update(short_budget_options(run.strategy, settings.budget))
    return options


def reference_sources(run: Run, settings: ReproduceSettings) -> Dict[str, str]:
    """``{kind: path or "synthetic"}`` of the reference data ``run``'s strategy takes."""
    needs = get_strategy(run.strategy).needs
    paths = REFERENCE_PATHS.get(run.strategy, {})
    given = {"images": settings.ref_images, "sentences": settings.ref_sentences}
    sources = {}
    for kind in needs.references:
        if given[kind] is not None:
            sources[kind] = given[kind]
        elif kind in paths and settings.data_root is not None:
            sources[kind] = str(Path(settings.data_root).expanduser() / paths[kind])
        else:
            sources[kind] = f"<data-root>/{paths.get(kind, '?')}"
    return sources


def files_needed(run: Run, settings: ReproduceSettings) -> Dict[str, str]:
    """``{what: path}`` of every file or folder ``run`` reads besides the benchmark's domains."""
    needs = get_strategy(run.strategy).needs
    files = {f"reference {kind} ({run.strategy})": path
             for kind, path in reference_sources(run, settings).items() if path not in ("synthetic", "none")}
    files.update(needs.files_needed(run_options(run, settings)))
    if settings.pretrained and settings.pretrained.lower() != "none" and _is_path(settings.pretrained):
        files["CLIP weights"] = settings.pretrained
    return files


def _is_path(value: str) -> bool:
    return os.sep in value or value.endswith((".bin", ".pt", ".pth", ".safetensors"))


def run_settings(run: Run, settings: ReproduceSettings) -> Dict[str, Any]:
    """What made the run, as stored in its folder and checked when it resumes (JSON-able)."""
    return {
        "reproduce": 1, "protocol": run.protocol.key, "benchmark": run.protocol.builder,
        "stream": {**run.protocol.stream_options(), "seed": run.seed, "test_shots": settings.test_shots},
        "data_root": str(Path(settings.data_root).expanduser().resolve()) if settings.data_root else None,
        "model": settings.model, "pretrained": settings.pretrained,
        "weights_origin": settings.weights_origin, "strategy": run.strategy, "seed": run.seed,
        "options": {k: repr(v) for k, v in sorted(run_options(run, settings).items())},
        "references": reference_sources(run, settings),
    }


def format_run(run: Run, settings: ReproduceSettings) -> List[str]:
    """The lines of one run in a plan: every setting, and what it reads from disk."""
    needs = get_strategy(run.strategy).needs
    options = run_options(run, settings)
    protocol = run.protocol
    shown = [k for k in SHOWN_FIRST if k in options] + sorted(k for k in options if k not in SHOWN_FIRST)
    lines = [
        f"  {run.run_id} (seed {run.seed}) -> {run.folder(settings.root / 'runs')}",
        f"    protocol: {protocol.builder}, order {protocol.order} ({', '.join(protocol.domains)}), "
        f"{protocol.shots} shots per class"
        + (f", {settings.test_shots} test images per class (rehearsal)" if settings.test_shots else "")
        + f", prompts {protocol.prompts!r}, seed {run.seed} (training and few-shot subsets)",
        "    settings: " + (", ".join(f"{k}={_show(options[k], protocol)}" for k in shown)
                            or "none (evaluation only)"),
        f"    source: {PAPER_SOURCES.get(run.strategy) or 'the strategy defaults'}",
    ]
    if settings.budget is not None and needs.trains:
        lines.append(f"    NOT the paper's budget: {settings.budget} iterations per experience "
                     + ("(rehearsal)" if settings.rehearse else "(--iterations)"))
    for what, path in files_needed(run, settings).items():
        lines.append(f"    needs {what}: {path}{_status(path)}")
    return lines


def _show(value, protocol: Optional[Protocol] = None) -> str:
    """A setting as the plan shows it; a per-domain learning rate as its value on each domain
    of ``protocol`` that differs from its default."""
    if isinstance(value, float):
        return f"{value:g}"
    if protocol is not None and callable(value) and hasattr(value, "default"):
        special = [f"{d} {value(d):g}" for d in protocol.domains if value(d) != value.default]
        return f"{value.default:g}" + (f" ({', '.join(special)})" if special else "")
    return repr(value)


def _status(path: str) -> str:
    if path.startswith("<"):
        return ""
    return "  [found]" if Path(path).expanduser().exists() else "  [MISSING]"


def _activation(settings: ReproduceSettings) -> str:
    from ...clip.load import trained_with_quick_gelu

    tag = settings.weights_origin or settings.pretrained
    if tag and tag.lower() != "none" and trained_with_quick_gelu(settings.model, tag):
        return "QuickGELU, as these weights were trained"
    return "the model config's"


def _domains_status(protocol: Protocol, settings: ReproduceSettings) -> str:
    """Which of the protocol's domains the data root holds (``check-data``'s verdict)."""
    from ...utils.paths import folder_status

    problem = folder_status(settings.data_root)
    if problem:
        return f"domains: MISSING, {problem}"
    if settings.data_root is None:
        return "domains: not checked (no --data-root given)"
    from ...benchmarks.images.check import check_data

    reports = check_data(settings.data_root, protocol.benchmark, progress=False)
    wanted = set(protocol.domains)
    missing = [f"{r.name} ({r.status})" for r in reports if r.name in wanted and not r.usable]
    found = sum(r.usable for r in reports if r.name in wanted)
    return (f"domains: {found} of {len(wanted)} found" + (f"; MISSING: {', '.join(missing)}" if missing else "")
            + f" (moram-avalanche check-data --root {settings.data_root} --benchmark {protocol.benchmark})")


def format_plan(specs: Sequence[TableSpec], settings: ReproduceSettings, planned: Sequence[PlannedRun]) -> str:
    """The plan as text: the data and model it needs, each table's rows, every run's settings."""
    protocols = list(dict.fromkeys(p.run.protocol for p in planned))
    lines = [f"moram-avalanche reproduce: {', '.join(s.name for s in specs)}"
             + (" -- REHEARSAL (2 iterations per experience, 2 test images per class; the numbers "
                "mean nothing)" if settings.rehearse else ""),
             f"  model: {settings.model}, weights {settings.pretrained!r}"
             + (f" (origin {settings.weights_origin!r})" if settings.weights_origin else "")
             + f"; activation: {_activation(settings)}",
             f"  device: {settings.device}; output: {settings.root}"]
    for protocol in protocols:
        lines.append(f"  data: {protocol.builder} under {settings.data_root or '<data-root>'}: "
                     f"{protocol.description}")
        lines.append(f"    {_domains_status(protocol, settings)}")
    for spec in specs:
        seeds = table_seeds(spec, settings)
        lines.append(f"\n{spec.name} ({spec.label}): {spec.title}; seeds {', '.join(map(str, seeds))}")
        blocks: Dict[str, List[str]] = {}
        for block, label in spec.table_rows():
            blocks.setdefault(label, []).append(block)
        for label, in_blocks in blocks.items():
            method = spec.method(label)
            what = (f"{method.strategy}" + "".join(f" {k}={_show(v)}" for k, v in method.options)
                    if method.strategy else f"not run: {method.reason}")
            lines.append(f"  {label} [{', '.join(in_blocks)}]: {what}")
        if spec.erratum:
            lines.append(f"  {spec.erratum}")
    lines.append(f"\nruns ({len(planned)}; each resumes from its folder):")
    for entry in planned:
        lines += format_run(entry.run, settings)
        lines.append(f"    used by: {'; '.join(entry.used_by)}")
    return "\n".join(lines)


def check_needs(specs: Sequence[TableSpec], settings: ReproduceSettings, planned: Sequence[PlannedRun]) -> None:
    """Raise one ValueError naming everything the plan needs that is not on disk."""
    from ...benchmarks.images.check import check_data

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


def run_setup(run: Run, settings: ReproduceSettings):
    """The :class:`~moram_avalanche.experiments.compare.Setup` of one run."""
    from ...benchmarks import get_benchmark
    from ...benchmarks.images.reference_sets import reference_data
    from ...clip.load import load_clip
    from ..run import Setup

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


__all__ = ["parse_seeds", "PlannedRun", "REHEARSAL_ITERATIONS", "ReproductionSettings", "checked_budget_and_seeds", "REHEARSAL_TEST_SHOTS", "ReproduceSettings", "Run",
           "check_needs", "files_needed", "run_setup", "format_plan", "format_run", "method_runs", "plan", "reference_sources",
           "run_options", "run_settings", "table_seeds"]
