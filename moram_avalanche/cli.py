"""The ``moram-avalanche`` command line: ``demo``, ``run``, ``compare``, ``reproduce``, ``analyze``,
``cost`` and ``check-data``.

Heavy imports (torch, Avalanche, open_clip) happen inside the commands, so ``--help`` and
argument errors are instant. Every argument is checked before anything is loaded or written
(:mod:`moram_avalanche.arguments`, the checked-arguments layer); a user's mistake is one line
on stderr and exit status 2. ``run`` and ``compare`` also run data-parallel under
``torchrun --nproc_per_node N -m moram_avalanche ...`` (:mod:`moram_avalanche.experiments.distributed`).
"""

from __future__ import annotations

import argparse
import logging
import sys
import warnings
from pathlib import Path
from typing import List, Optional

from .arguments import (OneLineParser, check_compare_arguments, check_compare_names, check_run_arguments,
                        check_shared_arguments, is_user_error, nonnegative_int, positive_float, positive_int,
                        report_error, share, shots)


def _quiet_imports() -> None:
    # avalanche-lib warns on every import that no QP solver is installed (only GEM needs one)
    warnings.filterwarnings("ignore", message="no QP solver found", category=UserWarning)


def cmd_demo(args) -> int:
    from .utils.devices import resolve_device
    from .utils.files import check_output_folder

    from .utils.paths import check_compare_path

    if args.text and args.full:
        raise ValueError("--full runs the CLIP demo's eight strategies; the text demo (--text) runs "
                         "SeqLoRA and MoRAM: leave --full out")
    device = resolve_device(args.device, "--device")
    out = args.out or ("runs/demo-text" if args.text else "runs/demo")
    _quiet_imports()
    if args.text:
        from .experiments.demo_text import TEXT_DEMO_STRATEGIES as strategies
        from .experiments.demo_text import TextDemoConfig as Config
        from .experiments.demo_text import run_demo_text as run_demo
    else:
        from .experiments.demo import DEMO_STRATEGIES, FULL_DEMO_STRATEGIES, run_demo
        from .experiments.demo import DemoConfig as Config

        strategies = FULL_DEMO_STRATEGIES if args.full else DEMO_STRATEGIES
    check_compare_path(out, strategies, "--out")
    if args.cache_dir is not None:
        check_output_folder(args.cache_dir, "--cache-dir")

    run_demo(out, cache_dir=args.cache_dir, config=Config.quick() if args.quick else Config(),
             progress=not args.no_progress, strategies=strategies, device=device)
    print(f"\nresults.json, accuracy matrices (CSV, PNG), memory and time: {out}/<strategy>/"
          f"\ntable.md, table.csv, summary.md, accuracy_matrices.png: {out}/"
          f"\n  tensorboard --logdir {Path(out) / 'tensorboard'}")
    return 0


def cmd_run(args) -> int:
    from .benchmarks import benchmark_family, get_benchmark

    get_benchmark(args.benchmark)  # unknown names fail before the slow imports
    name = args.strategy.lower()
    overrides = {name: _parse_sets(args.set, prefixed=False).get("", {})}
    _quiet_imports()
    from .experiments.from_arguments import command_options, setup_from_arguments

    check_shared_arguments(args)  # resolves --device
    options = {name: command_options(args, name, overrides[name])}
    check_run_arguments(args, name, options[name], overrides[name])
    setup = setup_from_arguments(args, options, overrides)
    from .experiments.distributed import start_processes
    from .experiments.run import run_single
    from .strategies.registry import get_strategy

    processes = start_processes(args.seed, args.device)  # one of several under torchrun
    processes.check(name, get_strategy(name, benchmark_family(args.benchmark)).needs)
    args.device = setup.device = processes.device  # the record keeps the one asked for
    report = run_single(setup, name, args.log_dir, resume=not args.no_resume, progress=not args.no_progress,
                        what="--log-dir")
    if processes.main:
        bwt = f"  BWT {report['bwt']:.1f}" if report.get("bwt") is not None else ""
        if report.get("release_bwt") is not None and report.get("bwt") is not None:  # the release's figure beside it
            bwt += f" (release's BWT {report['release_bwt']:.1f})"
        print(f"Transfer {report['transfer']:.1f}  Average {report['average']:.1f}  "
              f"Last {report['last']:.1f}{bwt}   ({Path(args.log_dir)}/results.json)")
    return 0


def cmd_analyze(args) -> int:
    from .utils.devices import resolve_device

    args.device = resolve_device(args.device, "--device")
    _quiet_imports()
    from .experiments.analysis import AnalysisOptions, analyze

    options = AnalysisOptions(encoder=args.encoder, layer=args.layer, projection=args.projection,
                              scenarios=args.scenarios, image=args.image, images=args.images,
                              share=args.share, maps=not args.no_maps)
    overrides = {k: v for k, v in (("model", args.model), ("pretrained", args.pretrained),
                                   ("benchmark", args.benchmark), ("cache_dir", args.cache_dir)) if v}
    report = analyze(args.log_dir, data_root=args.data_root, options=options, settings=overrides,
                     device=args.device, progress=not args.no_progress, out=args.out)
    print(f"{report} (pictures beside it; TensorBoard: the run's log, run 'analysis')")
    return 0


def cmd_cost(args) -> int:
    from .utils.devices import resolve_device
    from .utils.files import check_output_folder

    args.device = resolve_device(args.device, "--device")
    if args.out:
        check_output_folder(args.out, "--out")
    _quiet_imports()
    import json

    from .experiments.cost import CostOptions, cost_report, measure_cost
    from .utils.files import atomic_write_text

    names = [n.strip().lower() for n in args.strategies.split(",") if n.strip()]
    options = CostOptions(
        model=args.model, pretrained=None if args.pretrained.lower() == "none" else args.pretrained,
        device=args.device, strategies=names, tasks=_task_numbers(args.tasks), batch_size=args.batch_size,
        iterations=args.iterations, warmup=args.warmup, classes=args.classes, eval_images=args.eval_images,
        eval_batch_size=args.eval_batch_size, repeats=args.repeats, amp=args.amp,
        options=_parse_sets(args.set, prefixed=True), cache_dir=args.cache_dir, seed=args.seed,
        timing=not args.params_only)
    results = measure_cost(options, progress=not args.no_progress)
    report = cost_report(results, paper=not args.no_paper)
    print(report)
    if args.out:
        atomic_write_text(Path(args.out) / "cost.md", report)
        atomic_write_text(Path(args.out) / "cost.json", json.dumps(results, indent=2, default=str) + "\n")
    return 0


#: ``cost --tasks``: the most tasks a bank is grown to (the paper's streams have 10 or 11)
MAX_COST_TASKS = 1000


def _task_numbers(text: str) -> List[int]:
    from .utils.checks import check_int_range

    items = [t.strip() for t in text.split(",") if t.strip()]
    if not items or not all(t.isdigit() and int(t) >= 1 for t in items):
        raise ValueError(f"--tasks must list task numbers >= 1, e.g. 1,5,10; got {text!r}")
    for item in items:
        check_int_range("--tasks", int(item), high=MAX_COST_TASKS,
                        hint="each task grows every adapter and is timed; the paper's streams have 10 or 11")
    return sorted({int(t) for t in items})


def cmd_compare(args) -> int:
    from .benchmarks import benchmark_family, get_benchmark

    get_benchmark(args.benchmark)
    names = [n.strip().lower() for n in args.strategies.split(",") if n.strip()]
    overrides = _parse_sets(args.set, prefixed=True)
    _quiet_imports()
    from .experiments.from_arguments import command_options, setup_from_arguments

    check_shared_arguments(args)  # resolves --device
    check_compare_names(args, names, overrides)
    options = {name: command_options(args, name, overrides.get(name, {})) for name in names}
    check_compare_arguments(args, options, overrides)
    setup = setup_from_arguments(args, options, overrides)
    from .experiments.distributed import start_processes
    from .strategies.registry import get_strategy

    processes = start_processes(args.seed, args.device)  # one of several under torchrun
    for name in names:
        processes.check(name, get_strategy(name, benchmark_family(args.benchmark)).needs)
    args.device = setup.device = processes.device  # the record keeps the one asked for
    from .experiments.compare import run_comparison

    run_comparison(setup, names, args.out, resume=not args.no_resume, progress=not args.no_progress, what="--out")
    if processes.main:
        print(f"\ntable.md, table.csv, summary.md, accuracy_matrices.png: {args.out}/"
              f"\n  tensorboard --logdir {Path(args.out) / 'tensorboard'}")
    return 0


def _parse_sets(items, *, prefixed: bool) -> dict:
    """``--set [STRATEGY.]KEY=VALUE`` items -> ``{strategy or "": {key: value}}``.

    Values are Python literals (numbers, strings, tuples, True/None); anything else is kept as
    a string.
    """
    import ast

    parsed = {}
    for item in items or ():
        target, sep, text = item.partition("=")
        name, dot, key = target.rpartition(".") if prefixed else ("", "", target)
        if not sep or not key.isidentifier() or (prefixed and not (dot and name)):
            form = "STRATEGY.KEY=VALUE (e.g. moram.lr=1e-3)" if prefixed else "KEY=VALUE (e.g. topk=8)"
            raise ValueError(f"--set {item!r}: expected {form}")
        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            value = text
        parsed.setdefault(name.lower(), {})[key] = value
    return parsed


#: ``reproduce``'s tables (moram_avalanche.experiments.reproduce.TABLE_CHOICES, kept here so that
#: --help needs no heavy import; a test checks both agree)
REPRODUCE_TABLES = ("xtail", "xtail-order2", "mtil", "routing", "robustness", "pruning", "load-balance",
                    "sweeps", "additional-baselines", "all")
#: the language-model tables (moram_avalanche.experiments.reproduce_text.TEXT_TABLE_NAMES)
REPRODUCE_TEXT_TABLES = ("t5-standard", "t5-long", "llama-standard", "trace")


def cmd_reproduce(args) -> int:
    if args.table in REPRODUCE_TEXT_TABLES:
        return _reproduce_text(args)
    if args.table not in REPRODUCE_TABLES:
        raise ValueError(f"unknown table {args.table!r}; the paper's CLIP tables: {', '.join(REPRODUCE_TABLES)}; "
                         f"its language-model tables: {', '.join(REPRODUCE_TEXT_TABLES)}")
    for flag, value in (("--dtype", args.dtype), ("--layout", args.layout),
                        ("--gradient-checkpointing", args.gradient_checkpointing or None)):
        if value is not None:
            raise ValueError(f"{flag} is for the language-model tables ({', '.join(REPRODUCE_TEXT_TABLES)}); "
                             f"leave it out for {args.table}")
    args.model = args.model or "ViT-B-16"
    _quiet_imports()
    from .experiments.from_arguments import default_num_workers
    from .experiments.reproduce import ReproduceSettings, paper_text, parse_seeds, plan_text, resolve_device

    if args.paper:
        print(paper_text(args.table))
        return 0
    seeds = None if args.seeds is None else parse_seeds(args.seeds)
    settings = ReproduceSettings(
        data_root=args.data_root, out=args.out, seeds=seeds, device=resolve_device(args.device),
        model=args.model, pretrained=args.pretrained or "openai", weights_origin=args.weights_origin,
        ref_images=args.ref_images, ref_sentences=args.ref_sentences, iterations=args.iterations,
        rehearse=args.rehearse, num_workers=default_num_workers(args), progress=not args.no_progress)
    if args.dry_run:
        print(plan_text(args.table, settings))
        return 0
    from .experiments.reproduce import reproduce

    results = reproduce(args.table, settings)
    for name in results:
        print(f"{name}: {settings.root / name}/table.md, table.csv, table.png")
    print(f"all tables: {settings.root / 'index.md'}\n  tensorboard --logdir {settings.root}")
    return 0


def _reproduce_text(args) -> int:
    """``reproduce t5-standard | t5-long | llama-standard``."""
    for flag, value in (("--pretrained", args.pretrained), ("--weights-origin", args.weights_origin),
                        ("--ref-images", args.ref_images), ("--ref-sentences", args.ref_sentences)):
        if value is not None:
            raise ValueError(f"{flag} is for the CLIP tables; {args.table} takes --model (a Hugging Face name or "
                             "a local folder) and --dtype")
    _quiet_imports()
    from .experiments.reproduce import parse_seeds, resolve_device
    from .experiments.reproduce_text import TextReproduceSettings, get_text_table, paper_text, plan_text

    spec = get_text_table(args.table)
    if args.paper:
        print(paper_text([spec]))
        return 0
    settings = TextReproduceSettings(
        data_root=args.data_root, out=args.out, seeds=None if args.seeds is None else parse_seeds(args.seeds),
        device=resolve_device(args.device), model=args.model, dtype=args.dtype,
        gradient_checkpointing=args.gradient_checkpointing, layout=args.layout or "auto",
        iterations=args.iterations, rehearse=args.rehearse, progress=not args.no_progress)
    if args.dry_run:
        print(plan_text([spec], settings))
        return 0
    from .experiments.reproduce_text import reproduce_text

    reproduce_text(args.table, settings)
    print(f"{args.table}: {settings.root / args.table}/table.md, table.csv, table.png")
    print(f"all language-model tables: {settings.root / 'index_language_models.md'}\n"
          f"  tensorboard --logdir {settings.root}")
    return 0


def cmd_check_data(args) -> int:
    from .benchmarks.check import check_data, format_report

    if args.benchmark == "lm-cl":  # the language models' classification tasks (either layout)
        from .benchmarks.text_tasks import check_text_data, format_text_report

        reports = check_text_data(args.root)
        print(format_text_report(reports, args.root))
        return 0 if all(r.usable for r in reports) else 1
    if args.benchmark == "trace":  # TRACE's eight generation tasks
        from .benchmarks.text_trace import check_trace_data, format_trace_report

        reports = check_trace_data(args.root)
        print(format_trace_report(reports, args.root))
        return 0 if all(r.usable for r in reports) else 1

    benchmarks = ("xtail", "mtil") if args.benchmark == "all" else (args.benchmark,)  # mtil-5shot: mtil's files
    usable = True
    for i, benchmark in enumerate(benchmarks):
        reports = check_data(args.root, benchmark, verify_images=args.verify_images,
                             progress=not args.no_progress)
        print(("\n" if i else "") + format_report(reports, benchmark, args.root))
        usable &= all(r.usable for r in reports)
    return 0 if usable else 1


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = OneLineParser(
        prog="moram-avalanche",
        description="MoRAM continual learning of CLIP as Avalanche strategies.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = commands.add_parser(
        "demo", help="ZeroShot vs FineTune vs MoRAM on an offline synthetic stream (--full: 8 strategies; "
                     "--text: SeqLoRA vs MoRAM on a tiny T5)",
        description="Pre-train a tiny CLIP on synthetic captioned images (cached), then compare ZeroShot, "
                    "FineTune and MoRAM on a five-domain synthetic stream, as `compare` does; --full "
                    "adds WiSE-FT, LwF, ZSCL, MoE-Adapters and InfLoRA. --text: pre-train a tiny T5 on "
                    "a generated text mixture (cached), then compare SeqLoRA and MoRAM on the five "
                    "tasks of the synthetic-text stream (OP, BWT). Resumable: run it again to "
                    "print the table or add strategies.")
    demo.add_argument("--out", default=None,
                      help="output folder (default: runs/demo, with --text runs/demo-text)")
    demo.add_argument("--cache-dir", default=None,
                      help="where the pre-trained tiny CLIP (or T5) is cached (default: ~/.cache/moram-avalanche "
                           "or $MORAM_AVALANCHE_CACHE)")
    demo.add_argument("--full", action="store_true",
                      help="all eight strategies: + WiSE-FT, LwF, ZSCL, MoE-Adapters, InfLoRA (a few minutes more)")
    demo.add_argument("--text", action="store_true",
                      help="the language-model demo: SeqLoRA and MoRAM on a tiny T5 and the synthetic-text "
                           "stream (not with --full)")
    demo.add_argument("--quick", action="store_true", help="a seconds-long smoke version (tiny sizes)")
    demo.add_argument("--device", default="auto",
                      help="torch device: auto (a CUDA GPU when there is one, default), cpu, cuda, cuda:N")
    demo.add_argument("--no-progress", action="store_true",
                      help="no progress output (off a terminal it is one line per experience)")
    demo.set_defaults(func=cmd_demo)

    run = commands.add_parser("run", help="one strategy over one benchmark, resumable")
    run.add_argument("--benchmark", required=True, help=f"benchmark name -- {_benchmarks_help()}")
    run.add_argument("--strategy", required=True,
                     help="strategy name (moram, finetune, zeroshot, wiseft, lwf, lwf-vr, zscl, ..., or "
                          "Avalanche's avalanche.naive, avalanche.ewc, ...; an unknown name lists them all)")
    run.add_argument("--log-dir", required=True, help="output folder: TensorBoard, results, checkpoint")
    run.add_argument("--lr", type=positive_float, default=None, help="learning rate (default: the strategy's)")
    run.add_argument("--set", action="append", metavar="KEY=VALUE",
                     help="any keyword argument of the strategy, as a Python literal "
                          "(e.g. --set topk=8 --set threshold=0); repeatable")
    _add_shared_options(run)
    run.set_defaults(func=cmd_run)

    compare = commands.add_parser(
        "compare", help="several strategies on one benchmark: the paper-style table",
        description="Run each strategy on the same benchmark, model, seed and budget (resumable "
                    "per strategy) and write the Transfer / Average / Last table per domain "
                    "(table.md, table.csv; best in bold), summary.md (with peak memory and time), "
                    "accuracy_matrices.png and a combined TensorBoard log (OUT/tensorboard).")
    compare.add_argument("--benchmark", required=True, help=f"benchmark name -- {_benchmarks_help()}")
    compare.add_argument("--strategies", required=True,
                         help="comma-separated strategy names, e.g. zeroshot,zscl,moe-adapters,moram")
    compare.add_argument("--out", required=True, help="output folder of the comparison")
    compare.add_argument("--set", action="append", metavar="STRATEGY.KEY=VALUE",
                         help="a keyword argument of one strategy, as a Python literal "
                              "(e.g. --set moram.lr=1e-3); repeatable")
    _add_shared_options(compare)
    compare.set_defaults(func=cmd_compare)

    analysis = commands.add_parser(
        "analyze", help="the paper's figures from a MoRAM run: activation maps, atoms for 99%%, pruning",
        description="Write LOG_DIR/analysis/: report.md embedding every picture -- activation maps of "
                    "one layer's atoms on image tokens for data of task t after task t' (paper Figs. "
                    "3, 6-8), averaged activation ratios (Fig. 5), atoms needed for 99%% of the "
                    "cumulative activation mass per layer and projection (Figs. 9-11), atoms kept and "
                    "storage saved by pruning -- the PNGs, analysis.json, and the pictures in the "
                    "run's TensorBoard log. The model and data are rebuilt from the run's settings.")
    analysis.add_argument("log_dir", metavar="LOG_DIR",
                          help="the run's folder (run --log-dir, or OUT/<strategy> of a compare)")
    analysis.add_argument("--out", default=None, help="where to write the analysis (default: "
                          "LOG_DIR/analysis; give another for a read-only run folder)")
    analysis.add_argument("--data-root", default=None, help="where the run's datasets are now "
                          "(default: where the run read them)")
    analysis.add_argument("--encoder", default="visual", choices=("visual", "text"),
                          help="tower of the activation maps (default: visual, the paper's)")
    analysis.add_argument("--layer", type=positive_int, default=None,
                          help="block of the maps, 1-based (default: 8 of 12 as the paper, else the middle)")
    analysis.add_argument("--projection", default="k", choices=("q", "k", "v", "out", "fc", "proj"),
                          help="projection of the maps (default: k, the paper's)")
    analysis.add_argument("--scenarios", default=None, metavar="DATA@AFTER,...",
                          help="e.g. 1@1,1@2,1@10,9@1,9@9 (images of task DATA, model after task AFTER; "
                               "default: these, for the run's length)")
    analysis.add_argument("--image", type=nonnegative_int, default=0, help="test image (0-based) each map shows")
    analysis.add_argument("--images", type=positive_int, default=16,
                          help="test images averaged for the activation ratios (default: 16)")
    analysis.add_argument("--share", type=share, default=0.99,
                          help="share of the cumulative activation mass the atom counts cover (default: 0.99)")
    analysis.add_argument("--no-maps", action="store_true",
                          help="only what the records give (atom counts, pruning): no model, no data")
    analysis.add_argument("--model", default=None, help="the run's open_clip model (default: recorded)")
    analysis.add_argument("--pretrained", default=None, help="its weights (default: recorded)")
    analysis.add_argument("--benchmark", default=None, help="the run's benchmark (default: recorded)")
    analysis.add_argument("--cache-dir", default=None, help="cache of the demo's tiny CLIP")
    analysis.add_argument("--device", default="auto",
                          help="torch device: auto (a CUDA GPU when there is one, default), cpu, cuda, cuda:N")
    analysis.add_argument("--no-progress", action="store_true", help="no progress bars")
    analysis.set_defaults(func=cmd_analyze)

    cost = commands.add_parser(
        "cost", help="parameters, peak training memory and ms/image of each method after 1/5/10 tasks",
        description="For CLIP, MoRAM, MoE-Adapters, InfLoRA and the LoRA-style baselines (or "
                    "--strategies): trainable parameters per weight matrix (formula and count) and "
                    "per task, peak training memory per task (the CUDA allocator's peak on a GPU, a "
                    "labelled CPU proxy otherwise), training and inference ms/image after each of "
                    "--tasks, on random images (the paper's cost tables). Says which device and "
                    "precision it measured.")
    cost.add_argument("--model", default="ViT-B-16", help="open_clip model name (default: ViT-B-16, the paper's)")
    cost.add_argument("--pretrained", default="none",
                      help="weights: open_clip tag, local file or 'none' (default: none; costs do not "
                           "depend on the weights)")
    cost.add_argument("--device", default="auto",
                      help="torch device: auto (a CUDA GPU when there is one, default), cpu, cuda, cuda:N")
    cost.add_argument("--strategies", default="zeroshot,moram,moe-adapters,inflora,seq-lora,moe-lora",
                      help="comma-separated strategy names (default: the paper's rows; zeroshot is CLIP)")
    cost.add_argument("--tasks", default="1,5,10", help="after which tasks to measure (default: 1,5,10)")
    cost.add_argument("--batch-size", type=positive_int, default=64, help="training batch (default: 64, the paper's)")
    cost.add_argument("--iterations", type=positive_int, default=10, help="timed training steps per measured task")
    cost.add_argument("--warmup", type=nonnegative_int, default=3, help="untimed training steps before them")
    cost.add_argument("--classes", type=positive_int, default=110,
                      help="classes per task (default: 110, X-TAIL's average)")
    cost.add_argument("--eval-images", type=positive_int, default=256, help="test images per measured task")
    cost.add_argument("--eval-batch-size", type=positive_int, default=None, help="evaluation batch (default: --batch-size)")
    cost.add_argument("--repeats", type=positive_int, default=3, help="timed evaluations per measured task")
    cost.add_argument("--amp", action="store_true", help="fp16 autocast (CUDA only)")
    cost.add_argument("--params-only", action="store_true",
                      help="count parameters only (no training steps, no timing): quick on a CPU")
    cost.add_argument("--set", action="append", metavar="STRATEGY.KEY=VALUE",
                      help="a keyword argument of one strategy, as a Python literal; repeatable")
    cost.add_argument("--out", default=None, help="also write cost.md and cost.json there")
    cost.add_argument("--no-paper", action="store_true", help="leave out the paper's tables")
    cost.add_argument("--seed", type=int, default=0)
    cost.add_argument("--cache-dir", default=None, help="cache of the demo's tiny CLIP config")
    cost.add_argument("--no-progress", action="store_true", help="no progress bars")
    cost.set_defaults(func=cmd_cost)

    check = commands.add_parser(
        "check-data", help="which X-TAIL / MTIL domains a data root holds, and what is wrong",
        description="Report, per domain, found / missing / malformed (with the file or folder "
                    "expected, the layout understood, and how to obtain it) and the numbers of "
                    "classes and images. Exit status 1 when a benchmark cannot be built.")
    check.add_argument("--root", required=True, help="the data root (--data-root of run)")
    check.add_argument("--benchmark", default="all", choices=("xtail", "mtil", "all", "lm-cl", "trace"),
                       help="which layout to check: xtail (X-TAIL's split files) or mtil "
                            "(torchvision's; also what mtil-5shot reads) (default: all: both); "
                            "lm-cl: the 15 text classification tasks (O-LoRA's CL_Benchmark or "
                            "the MoRAM release's LLM-CL-Benchmark); trace: TRACE's 8 tasks")
    check.add_argument("--verify-images", action="store_true",
                       help="also decode every image (slow) and count unreadable ones")
    check.add_argument("--no-progress", action="store_true", help="no progress bars")
    check.set_defaults(func=cmd_check_data)

    reproduce = commands.add_parser(
        "reproduce", help="the paper's CLIP and language-model tables, each row run with the paper's settings",
        description="Run every row of a table of the MoRAM paper that the library can run, with "
                    "the paper's settings (per strategy: its own paper's), resumable, and write "
                    "OUT/TABLE/table.md, table.csv (ours, the paper's and the difference per cell; "
                    "mean ± std over several seeds), table.png and a TensorBoard log. Tables: xtail "
                    "(X-TAIL order 1, 16-shot), xtail-order2, mtil (5-shot MTIL, the paper's), "
                    "routing, robustness (3 seeds), pruning, load-balance, sweeps (Fig. 4), "
                    "additional-baselines, all (the CLIP tables); the language-model tables: "
                    "t5-standard (T5-large, orders 1-3), t5-long (orders 4-6), llama-standard "
                    "(LLaMA2-7B, orders 1-3), each on --benchmark lm-cl's data; trace (TRACE, three "
                    "chat models, 3 seeds, OP and BWT) on --benchmark trace's.")
    reproduce.add_argument("table", metavar="TABLE",
                           help=f"one of {', '.join(REPRODUCE_TABLES + REPRODUCE_TEXT_TABLES)}")
    reproduce.add_argument("--data-root", default=None, help="the datasets (and, by default, the "
                           "reference data: ImageNet/train, tiny-imagenet-200/train, Conceptual "
                           "Captions' Validation_GCC-1.1.0-Validation_output.csv)")
    reproduce.add_argument("--out", default="runs/reproduce", help="output folder (default: runs/reproduce)")
    reproduce.add_argument("--seeds", default=None, help="comma-separated seeds of every table "
                           "(default: 42, the release's; robustness: 42,43,44)")
    reproduce.add_argument("--device", default="auto", help="torch device (default: auto, CUDA when available)")
    reproduce.add_argument("--paper", action="store_true", help="print the paper's table alone (no data needed)")
    reproduce.add_argument("--dry-run", action="store_true",
                           help="print the plan: every run with its settings and what it needs on disk")
    reproduce.add_argument("--rehearse", action="store_true",
                           help="run the whole plan at real model size with 2 iterations per task on 2 "
                                "test images per class (OUT/rehearsal): finds a missing file or a crash in minutes")
    reproduce.add_argument("--model", default=None, help="open_clip model name (the paper: ViT-B-16); for a "
                           "language-model table a Hugging Face name or local folder (default: the paper's, "
                           "t5-large / meta-llama/Llama-2-7b-hf)")
    reproduce.add_argument("--pretrained", default=None, help="open_clip tag or local weights file "
                           "(default: openai, the paper's); 'none': random init")
    reproduce.add_argument("--dtype", default=None, choices=("float32", "bfloat16", "float16"),
                           help="language-model tables: the weights' dtype (default: float32 for T5, "
                                "bfloat16 for LLaMA2-7B)")
    reproduce.add_argument("--gradient-checkpointing", action="store_true",
                           help="language-model tables: recompute activations in the backward pass")
    reproduce.add_argument("--layout", default=None, choices=("auto", "olora", "moram"),
                           help="language-model tables: the data layout under --data-root (default: auto)")
    reproduce.add_argument("--weights-origin", default=None, metavar="TAG",
                           help="the tag a local --pretrained file was published under (openai: run with QuickGELU)")
    reproduce.add_argument("--ref-images", default=None, help="reference images for every strategy "
                           "that takes them, instead of each one's paper location under --data-root "
                           "(a folder, or 'synthetic')")
    reproduce.add_argument("--ref-sentences", default=None, help="reference sentences (ZSCL), instead of "
                           "Conceptual Captions under --data-root (a file, or 'synthetic')")
    reproduce.add_argument("--iterations", type=positive_int, default=None,
                           help="a shorter budget per experience for smoke runs (NOT the paper's; recorded)")
    reproduce.add_argument("--num-workers", type=nonnegative_int, default=None,
                           help="DataLoader worker processes decoding images (default: half the CPU "
                                "cores up to 8 with --data-root, else 0)")
    reproduce.add_argument("--no-progress", action="store_true", help="no progress bars")
    reproduce.set_defaults(func=cmd_reproduce)
    return parser


def _benchmarks_help() -> str:
    from .benchmarks import describe_benchmarks

    return describe_benchmarks()


def _add_shared_options(parser: argparse.ArgumentParser) -> None:
    """Model, data, budget and run options common to ``run`` and ``compare``."""
    parser.add_argument("--data-root", default=None, help="dataset root folder (real benchmarks)")
    parser.add_argument("--model", default="ViT-B-16", help="open_clip model name (default: ViT-B-16); for "
                        "the text benchmarks (lm-cl, trace, synthetic-text) a Hugging Face name in the local "
                        "cache or a folder written by save_pretrained")
    parser.add_argument("--pretrained", default="openai",
                        help="open_clip tag, local weights file or 'none' (random init; default: "
                             "openai); 'synthetic' with --model moram-synthetic-tiny uses the demo's "
                             "pre-trained tiny CLIP")
    parser.add_argument("--weights-origin", default=None, metavar="TAG",
                        help="the open_clip tag a local --pretrained file was published under "
                             "(openai: OpenAI's weights, run with QuickGELU as they were trained)")
    parser.add_argument("--dtype", default=None, choices=("float32", "bfloat16", "float16"),
                        help="text benchmarks: the language model's weights (default: float32; the "
                             "paper's TRACE runs: bfloat16)")
    parser.add_argument("--gradient-checkpointing", action="store_true",
                        help="text benchmarks: recompute activations in the backward pass (less memory)")
    parser.add_argument("--fsdp", action="store_true",
                        help="text benchmarks under torchrun: shard the frozen weights over the processes "
                             "(FSDP2; each holds 1/N of them, adapters replicated), for a model that does "
                             "not fit one GPU")
    parser.add_argument("--iterations", type=nonnegative_int, default=None,
                        help="optimizer steps per experience (default: each strategy's, 500; text "
                             "benchmarks: one epoch per task, the paper's)")
    parser.add_argument("--batch-size", type=positive_int, default=None,
                        help="training batch size (default: 64; trace: 4, the paper's)")
    parser.add_argument("--preset", default=None, choices=("trace-release",),
                        help="a named setting on top of the stream's: trace-release, the MoRAM release's "
                             "shipped TRACE run for moram (r 8, top-k 8, betas 0.9/0.95, 32 prompts per step, "
                             "epochs 2,1,3,2,1,2,2,3 per task) and its atom scaling (new atoms trained at "
                             "lora_alpha / r = 2 and read at 1 once frozen; the next task's atoms in every "
                             "evaluation)")
    parser.add_argument("--eval-batch-size", type=positive_int, default=None,
                        help="evaluation batch size (default: 4 x --batch-size; inference keeps "
                             "no activations)")
    parser.add_argument("--ref-images", default=None,
                        help="zscl: reference image folder (class sub-folders, e.g. ImageNet train/); "
                             "moe-adapters: DDAS's reference images (e.g. TinyImageNet train/, or "
                             "'none' to opt out); 'synthetic': a small generated set")
    parser.add_argument("--ref-sentences", default=None,
                        help="zscl: reference sentences, one per line (or a Conceptual Captions TSV), "
                             "or 'synthetic'")
    parser.add_argument("--device", default="auto",
                        help="torch device: auto (a CUDA GPU when there is one, default), cpu, cuda, cuda:N")
    parser.add_argument("--seed", type=int, default=42,
                        help="seed of Python's, NumPy's and torch's generators (default: 42, the release's)")
    parser.add_argument("--cache-dir", default=None, help="cache of the demo's tiny CLIP")
    parser.add_argument("--order", default=None,
                        help="domain order: xtail 1|2, mtil I|II, or a comma-separated list of domains")
    parser.add_argument("--shots", type=shots, default=None,
                        help="training images per class, or 'full' (default: xtail 16 -- the paper's "
                             "X-TAIL; mtil full -- ZSCL's MTIL; mtil-5shot 5 -- the paper's MTIL)")
    parser.add_argument("--data-seed", type=nonnegative_int, default=None,
                        help="few-shot sampling seed (default: 42, the reference code's)")
    parser.add_argument("--prompts", default=None, choices=("moram", "rail", "zscl"),
                        help="prompt templates (default: xtail moram, mtil zscl)")
    parser.add_argument("--on-bad-image", default=None, choices=("skip", "raise"),
                        help="an unreadable image: skip it with a warning, counted in results.json "
                             "(default), or stop")
    parser.add_argument("--num-workers", type=nonnegative_int, default=None,
                        help="DataLoader worker processes decoding images (default: with "
                             "--data-root, half the CPU cores up to 8; else 0)")
    parser.add_argument("--no-augment", action="store_true",
                        help="train on the model's evaluation transform (no random crops); a "
                             "data-parallel run (torchrun) then reproduces a one-process run")
    parser.add_argument("--no-resume", action="store_true",
                        help="start over: remove the run's checkpoint and results instead of resuming")
    parser.add_argument("--no-progress", action="store_true",
                        help="no progress output (off a terminal it is one line per experience)")


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 0
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("moram_avalanche").setLevel(logging.INFO)  # ours; libraries stay quiet
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print(f"moram-avalanche {args.command}: interrupted; run the same command again to resume",
              file=sys.stderr)
        return 130
    except Exception as err:
        if not is_user_error(err):
            raise
        print(report_error(args.command, err), file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
