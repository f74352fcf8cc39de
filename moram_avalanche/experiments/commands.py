"""What each ``moram-avalanche`` sub-command does with its checked arguments.

The command line (:mod:`moram_avalanche.cli`) parses; :mod:`moram_avalanche.arguments` checks,
before anything is loaded or written, and hands the checked arguments (a copy of the parsed ones
with resolved and built values: the device, each strategy's options, a table's settings) to the
function of the same name here, which returns the exit status. Nothing here names a family, a
benchmark or a table: what differs is the family record's
(:mod:`~moram_avalanche.experiments.families`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping


def demo(args) -> int:
    """``demo``: the family's demo (``--text``: the language models') into ``--out``."""
    from .demos import run_family_demo
    from .families import family

    demo = family(args.family).demo
    run_family_demo(demo, args.out, cache_dir=args.cache_dir, config=demo.config.quick() if args.quick else demo.config(),
                    progress=not args.no_progress, strategies=args.strategies, device=args.device)
    print(f"\nresults.json, accuracy matrices (CSV, PNG), memory and time: {args.out}/<strategy>/"
          f"\ntable.md, table.csv, summary.md, accuracy_matrices.png: {args.out}/"
          f"\n  tensorboard --logdir {Path(args.out) / 'tensorboard'}")
    return 0


def _setup(args):
    """The processes of the run (one, or this one of torchrun's) and the setup of its strategies."""
    from ..benchmarks import benchmark_family
    from ..strategies.registry import get_strategy
    from .distributed import start_processes

    processes = start_processes(args.seed, args.device)  # one of several under torchrun
    family = benchmark_family(args.benchmark)
    for name in args.options:
        processes.check(name, get_strategy(name, family).needs)
    return processes, setup_from_arguments(args, args.options, args.overrides, processes.device)


def setup_from_arguments(args, options: Mapping[str, Mapping[str, object]],
                         overrides: Mapping[str, Mapping[str, object]], device: str):
    """The setup of ``run`` / ``compare`` from checked arguments: ``options`` are each strategy's
    (:func:`~.from_arguments.command_options`, checked), ``overrides`` its ``--set`` values (recorded as given),
    ``device`` where this process runs (a data-parallel process: its ``cuda:<rank>``; the record
    keeps the one asked for). The model and the benchmark are the family's of ``--benchmark``
    (:class:`~moram_avalanche.experiments.family.Family`)."""
    from .families import family_of_benchmark
    from .from_arguments import shared_settings, switch_plugins, switches_of, with_references
    from .run import Setup
    from .stream_arguments import data_roots, default_num_workers

    record = family_of_benchmark(args.benchmark)
    return Setup(
        make_model=record.model_loader(args, device), make_benchmark=record.benchmark_builder(args),
        options=lambda name, eval_tf: with_references(args, name, options[name], eval_tf),
        options_checked=True, settings=shared_settings(args),
        strategy_settings=lambda name: {k: repr(v) for k, v in overrides.get(name, {}).items()},
        family=record.name, tables=record.tables, seed=args.seed, device=device,
        num_workers=default_num_workers(args) if record.data_workers else 0,  # text: strings in memory
        environment={"cache_dir": args.cache_dir, "device": args.device, **switches_of(args)},
        data_roots=tuple(data_roots(args)), plugins=lambda: switch_plugins(args))


def run(args) -> int:
    """``run``: one strategy into ``--log-dir``; prints its Transfer / Average / Last (and BWT)."""
    from .run import run_single

    processes, setup = _setup(args)
    (name,) = args.options
    report = run_single(setup, name, args.log_dir, resume=not args.no_resume, progress=not args.no_progress,
                        what="--log-dir")
    if processes.main:
        bwt = f"  BWT {report['bwt']:.1f}" if report.get("bwt") is not None else ""
        if report.get("release_bwt") is not None and report.get("bwt") is not None:  # the release's figure beside it
            bwt += f" (release's BWT {report['release_bwt']:.1f})"
        print(f"Transfer {report['transfer']:.1f}  Average {report['average']:.1f}  "
              f"Last {report['last']:.1f}{bwt}   ({Path(args.log_dir)}/results.json)")
    return 0


def compare(args) -> int:
    """``compare``: the strategies into ``--out``, and their table."""
    from .compare import run_comparison

    processes, setup = _setup(args)
    run_comparison(setup, list(args.options), args.out, resume=not args.no_resume, progress=not args.no_progress,
                   what="--out")
    if processes.main:
        print(f"\ntable.md, table.csv, summary.md, accuracy_matrices.png: {args.out}/"
              f"\n  tensorboard --logdir {Path(args.out) / 'tensorboard'}")
    return 0


def analyze(args) -> int:
    """``analyze``: the paper's figures from a run's folder, by its family's analysis (the family
    its record names: :func:`~.families.analysis_of_run`)."""
    from .families import analysis_of_run

    report = analysis_of_run(args.log_dir, args.benchmark).run(args)
    print(f"{report} (pictures beside it; TensorBoard: the run's log, run 'analysis')")
    return 0


def cost(args) -> int:
    """``cost``: parameters, peak memory and time per image of each strategy, as the paper's cost
    tables, by the cost tool of the family that offers one (:func:`~.families.cost_family`)."""
    from ..utils.files import atomic_write_text
    from .families import cost_family

    report, results = cost_family().cost.run(args)
    print(report)
    if args.out:
        atomic_write_text(Path(args.out) / "cost.md", report)
        atomic_write_text(Path(args.out) / "cost.json", json.dumps(results, indent=2, default=str) + "\n")
    return 0


def check_data(args) -> int:
    """``check-data``: what a data root holds, per domain or task; exit status 1 when a benchmark
    cannot be built from it."""
    from ..benchmarks.data_checks import data_checks

    usable = True
    for index, check in enumerate(data_checks(args.benchmark)):
        reports, text = check.run(args.root, verify_images=args.verify_images, progress=not args.no_progress)
        print(("\n" if index else "") + text)
        usable &= all(report.usable for report in reports)
    return 0 if usable else 1


def reproduce(args) -> int:
    """``reproduce TABLE``: the paper's numbers (``--paper``), the plan (``--dry-run``) or the runs
    and the table, of whichever family the table is."""
    from .reproduce import paper_text, plan_text, reproduction_of
    from .reproduce import reproduce as reproduce_table

    if args.paper:
        print(paper_text(args.table))
        return 0
    if args.dry_run:
        print(plan_text(args.table, args.settings))
        return 0
    results = reproduce_table(args.table, args.settings)
    root = args.settings.root
    for name in results:
        print(f"{name}: {root / name}/table.md, table.csv, table.png")
    print(f"all tables: {root / reproduction_of(args.table).index[0]}\n  tensorboard --logdir {root}")
    return 0


__all__ = ["setup_from_arguments", "analyze", "check_data", "compare", "cost", "demo", "reproduce", "run"]
