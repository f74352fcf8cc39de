"""The ``moram-avalanche`` command line: ``demo``, ``run``, ``compare`` and ``check-data``.

Heavy imports (torch, Avalanche, open_clip) happen inside the commands, so ``--help`` and
argument errors are instant. ``run`` and ``compare`` also run data-parallel under
``torchrun --nproc_per_node N -m moram_avalanche ...`` (:mod:`moram_avalanche.experiments.distributed`).
"""

from __future__ import annotations

import argparse
import logging
import sys
import warnings
from pathlib import Path
from typing import List, Optional


def _quiet_imports() -> None:
    # avalanche-lib warns on every import that no QP solver is installed (only GEM needs one)
    warnings.filterwarnings("ignore", message="no QP solver found", category=UserWarning)


def cmd_demo(args) -> int:
    _quiet_imports()
    from .experiments.demo import DemoConfig, run_demo

    config = DemoConfig.quick() if args.quick else DemoConfig()
    run_demo(args.out, cache_dir=args.cache_dir, config=config, progress=not args.no_progress)
    print(f"\nresults.json, accuracy matrices (CSV, PNG), memory and time: {args.out}/<strategy>/"
          f"\ntable.md, table.csv, summary.md, accuracy_matrices.png: {args.out}/"
          f"\n  tensorboard --logdir {Path(args.out) / 'tensorboard'}")
    return 0


def _make_model(args):
    """A zero-argument loader of the model named on the command line (seeded by the caller)."""
    from .clip.load import load_clip
    from .experiments.demo import (TINY_NAME, DemoConfig, default_cache_dir, pretrained_tiny_clip,
                                   register_tiny_clip)

    cache_dir = Path(args.cache_dir) if args.cache_dir else default_cache_dir()
    register_tiny_clip(cache_dir)
    pretrained = None if args.pretrained.lower() == "none" else args.pretrained
    if args.model == TINY_NAME and pretrained == "synthetic":
        pretrained = str(pretrained_tiny_clip(cache_dir, DemoConfig()))
    return lambda: load_clip(args.model, pretrained=pretrained or None, device=args.device)


def _make_benchmark(args):
    from .benchmarks import get_benchmark

    builder, options = get_benchmark(args.benchmark), _stream_options(args)
    return lambda train_tf, eval_tf: builder(
        args.data_root, train_transform=eval_tf if args.no_augment else train_tf, eval_transform=eval_tf,
        **options)


def _strategy_options(args, name: str, eval_tf, overrides: dict) -> dict:
    """Keyword arguments of strategy ``name``: the shared budget, the reference data it
    declares (``needs``), ``--set`` values."""
    from .strategies.registry import get_strategy

    needs = get_strategy(name).needs
    options = {"train_mb_size": args.batch_size}
    if args.iterations is not None and needs.trains:
        options["iterations"] = args.iterations
    if getattr(args, "lr", None) is not None:
        options["lr"] = args.lr
    wanted = needs.taken(images=args.ref_images, sentences=args.ref_sentences)
    if wanted:  # read only the reference data this strategy takes
        from .benchmarks.reference_sets import reference_data

        options.update(needs.reference_arguments(**reference_data(eval_tf, **wanted)))
    options.update(overrides)
    return options


def _check_references(args, names) -> None:
    """``--ref-images`` / ``--ref-sentences`` only when a chosen strategy takes them."""
    from .strategies.registry import get_strategy, strategies_taking

    for kind, value in (("images", args.ref_images), ("sentences", args.ref_sentences)):
        if value is not None and not any(kind in get_strategy(name).needs.references for name in names):
            raise ValueError(f"--ref-{kind} is for strategies that take reference {kind}: "
                             f"{', '.join(strategies_taking(kind))}")


def cmd_run(args) -> int:
    from .benchmarks import get_benchmark

    get_benchmark(args.benchmark)  # unknown names fail before the slow imports
    _quiet_imports()
    from .strategies.registry import get_strategy

    strategy_class = get_strategy(args.strategy)
    _check_references(args, [args.strategy.lower()])
    overrides = _parse_sets(args.set, prefixed=False)
    import torch
    from avalanche.logging import TensorboardLogger
    from avalanche.training.plugins import EvaluationPlugin

    from .experiments.distributed import start_processes
    from .experiments.metrics import AccuracyMatrix, accuracy_matrix_of
    from .experiments.runner import run_stream

    processes = start_processes(args.seed, args.device)  # one of several under torchrun
    processes.check(args.strategy, strategy_class.needs)
    args.device, progress = processes.device, not args.no_progress and processes.main
    torch.manual_seed(args.seed)
    model, train_tf, eval_tf, tokenizer = _make_model(args)()
    benchmark = _make_benchmark(args)(train_tf, eval_tf)
    log_dir = Path(args.log_dir)
    evaluator = EvaluationPlugin(AccuracyMatrix(out_dir=log_dir),
                                 loggers=processes.loggers(lambda: [TensorboardLogger(log_dir / "tb")]))
    options = _strategy_options(args, args.strategy.lower(), eval_tf, overrides.get("", {}))
    strategy = strategy_class(model=model, tokenizer=tokenizer, evaluator=evaluator, device=args.device,
                              progress=progress, plugins=processes.plugins(), **options)
    run_stream(strategy, benchmark, log_dir, resume=not args.no_resume, progress=progress,
               num_workers=args.num_workers)
    report = accuracy_matrix_of(strategy).report()  # the resumed metric after a whole-strategy resume
    if processes.main:
        print(f"Transfer {report['transfer']:.1f}  Average {report['average']:.1f}  "
              f"Last {report['last']:.1f}   ({log_dir}/results.json)")
    return 0


def cmd_compare(args) -> int:
    from .benchmarks import get_benchmark

    get_benchmark(args.benchmark)
    _quiet_imports()
    from .experiments.compare import Setup, run_comparison
    from .strategies.registry import get_strategy

    names = [n.strip().lower() for n in args.strategies.split(",") if n.strip()]
    for name in names:
        get_strategy(name)
    _check_references(args, names)
    overrides = _parse_sets(args.set, prefixed=True)
    unknown = sorted(set(overrides) - set(names))
    if unknown:
        raise ValueError(f"--set names strategies that are not compared: {unknown} (compared: {names})")
    from .experiments.distributed import start_processes

    requested_device = args.device
    processes = start_processes(args.seed, args.device)  # one of several under torchrun
    for name in names:
        processes.check(name, get_strategy(name).needs)
    args.device = processes.device
    settings = {
        "benchmark": args.benchmark, "data_root": str(Path(args.data_root).resolve()) if args.data_root else None,
        "model": args.model, "pretrained": args.pretrained, "stream": _stream_options(args),
        "iterations": args.iterations, "batch_size": args.batch_size, "seed": args.seed,
        "ref_images": args.ref_images, "ref_sentences": args.ref_sentences,
        "device": requested_device, "num_workers": args.num_workers,
        **({"augment": False} if args.no_augment else {}),  # older comparisons resume as they were
    }
    setup = Setup(
        make_model=_make_model(args), make_benchmark=_make_benchmark(args),
        options=lambda name, eval_tf: _strategy_options(args, name, eval_tf, overrides.get(name, {})),
        settings=settings,
        strategy_settings=lambda name: {k: repr(v) for k, v in overrides.get(name, {}).items()},
        seed=args.seed, device=args.device, num_workers=args.num_workers)
    run_comparison(setup, names, args.out, resume=not args.no_resume, progress=not args.no_progress)
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


def _stream_options(args) -> dict:
    """The benchmark options given on the command line (only those given)."""
    options = {}
    if args.order is not None:
        options["order"] = args.order.split(",") if "," in args.order else args.order
    if args.shots is not None:
        options["shots"] = None if args.shots.lower() in ("full", "none") else _positive_int(args.shots)
    if args.data_seed is not None:
        options["seed"] = args.data_seed
    if args.prompts is not None:
        options["prompts"] = args.prompts
    if args.on_bad_image is not None:
        options["on_bad_image"] = args.on_bad_image
    return options


def _positive_int(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise ValueError(f"--shots must be a positive integer or 'full', got {text!r}")
    return int(text)


def cmd_check_data(args) -> int:
    from .benchmarks.check import check_data, format_report

    benchmarks = ("xtail", "mtil") if args.benchmark == "all" else (args.benchmark,)
    usable = True
    for i, benchmark in enumerate(benchmarks):
        reports = check_data(args.root, benchmark, verify_images=args.verify_images,
                             progress=not args.no_progress)
        print(("\n" if i else "") + format_report(reports, benchmark, args.root))
        usable &= all(r.usable for r in reports)
    return 0 if usable else 1


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    parser = argparse.ArgumentParser(
        prog="moram-avalanche",
        description="MoRAM continual learning of CLIP as Avalanche strategies.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = commands.add_parser("demo", help="ZeroShot vs FineTune vs MoRAM on an offline synthetic stream")
    demo.add_argument("--out", default="runs/demo", help="output folder (default: runs/demo)")
    demo.add_argument("--cache-dir", default=None,
                      help="where the pre-trained tiny CLIP is cached (default: ~/.cache/moram-avalanche "
                           "or $MORAM_AVALANCHE_CACHE)")
    demo.add_argument("--quick", action="store_true", help="a seconds-long smoke version")
    demo.add_argument("--no-progress", action="store_true", help="no progress bars")
    demo.set_defaults(func=cmd_demo)

    run = commands.add_parser("run", help="one strategy over one benchmark, resumable")
    run.add_argument("--benchmark", required=True, help="benchmark name (xtail, mtil, synthetic)")
    run.add_argument("--strategy", required=True,
                     help="strategy name (moram, finetune, zeroshot, wiseft, lwf, lwf-vr, zscl, ..., or "
                          "Avalanche's avalanche.naive, avalanche.ewc, ...; an unknown name lists them all)")
    run.add_argument("--log-dir", required=True, help="output folder: TensorBoard, results, checkpoint")
    run.add_argument("--lr", type=float, default=None, help="learning rate (default: the strategy's)")
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
    compare.add_argument("--benchmark", required=True, help="benchmark name (xtail, mtil, synthetic)")
    compare.add_argument("--strategies", required=True,
                         help="comma-separated strategy names, e.g. zeroshot,zscl,moe-adapters,moram")
    compare.add_argument("--out", required=True, help="output folder of the comparison")
    compare.add_argument("--set", action="append", metavar="STRATEGY.KEY=VALUE",
                         help="a keyword argument of one strategy, as a Python literal "
                              "(e.g. --set moram.lr=1e-3); repeatable")
    _add_shared_options(compare)
    compare.set_defaults(func=cmd_compare)

    check = commands.add_parser(
        "check-data", help="which X-TAIL / MTIL domains a data root holds, and what is wrong",
        description="Report, per domain, found / missing / malformed (with the file or folder "
                    "expected, the layout understood, and how to obtain it) and the numbers of "
                    "classes and images. Exit status 1 when a benchmark cannot be built.")
    check.add_argument("--root", required=True, help="the data root (--data-root of run)")
    check.add_argument("--benchmark", default="all", choices=("xtail", "mtil", "all"),
                       help="which protocol's layout to check (default: all)")
    check.add_argument("--verify-images", action="store_true",
                       help="also decode every image (slow) and count unreadable ones")
    check.add_argument("--no-progress", action="store_true", help="no progress bars")
    check.set_defaults(func=cmd_check_data)
    return parser


def _add_shared_options(parser: argparse.ArgumentParser) -> None:
    """Model, data, budget and run options common to ``run`` and ``compare``."""
    parser.add_argument("--data-root", default=None, help="dataset root folder (real benchmarks)")
    parser.add_argument("--model", default="ViT-B-16", help="open_clip model name (default: ViT-B-16)")
    parser.add_argument("--pretrained", default="openai",
                        help="open_clip tag, local weights file or 'none' (random init; default: "
                             "openai); 'synthetic' with --model moram-synthetic-tiny uses the demo's "
                             "pre-trained tiny CLIP")
    parser.add_argument("--iterations", type=int, default=None,
                        help="optimizer steps per experience (default: each strategy's, 500)")
    parser.add_argument("--batch-size", type=int, default=64, help="training batch size (default: 64)")
    parser.add_argument("--ref-images", default=None,
                        help="zscl: reference image folder (class sub-folders, e.g. ImageNet train/); "
                             "moe-adapters: DDAS's reference images (e.g. TinyImageNet train/, or "
                             "'none' to opt out); 'synthetic': a small generated set")
    parser.add_argument("--ref-sentences", default=None,
                        help="zscl: reference sentences, one per line (or a Conceptual Captions TSV), "
                             "or 'synthetic'")
    parser.add_argument("--device", default="cpu", help="torch device (default: cpu)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache-dir", default=None, help="cache of the demo's tiny CLIP")
    parser.add_argument("--order", default=None,
                        help="domain order: xtail 1|2, mtil I|II, or a comma-separated list of domains")
    parser.add_argument("--shots", default=None,
                        help="training images per class, or 'full' (default: xtail 16, mtil full)")
    parser.add_argument("--data-seed", type=int, default=None,
                        help="few-shot sampling seed (default: 42, the reference code's)")
    parser.add_argument("--prompts", default=None, choices=("moram", "rail", "zscl"),
                        help="prompt templates (default: xtail moram, mtil zscl)")
    parser.add_argument("--on-bad-image", default=None, choices=("skip", "raise"),
                        help="an unreadable image: skip it with a warning, counted in results.json "
                             "(default), or stop")
    parser.add_argument("--num-workers", type=int, default=0,
                        help="DataLoader worker processes decoding images (default: 0)")
    parser.add_argument("--no-augment", action="store_true",
                        help="train on the model's evaluation transform (no random crops); a "
                             "data-parallel run (torchrun) then reproduces a one-process run")
    parser.add_argument("--no-resume", action="store_true", help="ignore existing checkpoints and results")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


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
    except ValueError as err:
        print(f"moram-avalanche {args.command}: {err}", file=sys.stderr)
        return 2
    except RuntimeError as err:
        from .clip.load import WeightsUnavailableError

        if not isinstance(err, WeightsUnavailableError):
            raise
        print(f"moram-avalanche {args.command}: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
