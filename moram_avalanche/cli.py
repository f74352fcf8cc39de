"""The ``moram-avalanche`` command line: ``demo``, ``run`` and ``check-data``.

Heavy imports (torch, Avalanche, open_clip) happen inside the commands, so ``--help`` and
argument errors are instant.
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
    from .demo import DemoConfig, run_demo

    config = DemoConfig.quick() if args.quick else DemoConfig()
    run_demo(args.out, cache_dir=args.cache_dir, config=config, progress=not args.no_progress)
    print(f"\nTensorBoard logs, results.json, accuracy matrices (CSV, PNG): {args.out}/<strategy>/"
          f"\n  tensorboard --logdir {args.out}")
    return 0


def cmd_run(args) -> int:
    from .benchmarks import get_benchmark

    builder = get_benchmark(args.benchmark)
    _quiet_imports()
    from .strategies import get_strategy

    strategy_class = get_strategy(args.strategy)
    import torch
    from avalanche.logging import TensorboardLogger
    from avalanche.training.plugins import EvaluationPlugin

    from .clip.load import load_clip
    from .demo import DemoConfig, TINY_NAME, default_cache_dir, pretrained_tiny_clip, register_tiny_clip
    from .metrics import AccuracyMatrix
    from .runner import run_stream

    cache_dir = Path(args.cache_dir) if args.cache_dir else default_cache_dir()
    register_tiny_clip(cache_dir)
    pretrained = None if args.pretrained.lower() == "none" else args.pretrained
    if args.model == TINY_NAME and pretrained == "synthetic":
        pretrained = str(pretrained_tiny_clip(cache_dir, DemoConfig()))
    torch.manual_seed(args.seed)
    model, train_tf, eval_tf, tokenizer = load_clip(args.model, pretrained=pretrained or None,
                                                    device=args.device)
    benchmark = builder(args.data_root, train_transform=train_tf, eval_transform=eval_tf,
                        **_stream_options(args))
    log_dir = Path(args.log_dir)
    matrix = AccuracyMatrix(out_dir=log_dir)
    evaluator = EvaluationPlugin(matrix, loggers=[TensorboardLogger(log_dir / "tb")])
    options = {k: v for k, v in (("iterations", args.iterations), ("lr", args.lr)) if v is not None}
    if args.ref_images or args.ref_sentences:
        if args.strategy.lower() != "zscl":
            raise ValueError("--ref-images / --ref-sentences are for --strategy zscl only")
        from .benchmarks.reference_sets import reference_options

        options.update(reference_options(args.ref_images, args.ref_sentences, eval_tf))
    strategy = strategy_class(
        model=model, tokenizer=tokenizer, evaluator=evaluator, device=args.device,
        train_mb_size=args.batch_size, progress=not args.no_progress, **options)
    run_stream(strategy, benchmark, log_dir, resume=not args.no_resume, progress=not args.no_progress,
               num_workers=args.num_workers)
    report = matrix.report()
    print(f"Transfer {report['transfer']:.1f}  Average {report['average']:.1f}  "
          f"Last {report['last']:.1f}   ({log_dir}/results.json)")
    return 0


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
                     help="strategy name (moram, finetune, zeroshot, wiseft, lwf, lwf-vr, zscl)")
    run.add_argument("--data-root", default=None, help="dataset root folder (real benchmarks)")
    run.add_argument("--model", default="ViT-B-16", help="open_clip model name (default: ViT-B-16)")
    run.add_argument("--pretrained", default="openai",
                     help="open_clip tag, local weights file or 'none' (random init; default: "
                          "openai); 'synthetic' with --model moram-synthetic-tiny uses the demo's "
                          "pre-trained tiny CLIP")
    run.add_argument("--log-dir", required=True, help="output folder: TensorBoard, results, checkpoint")
    run.add_argument("--iterations", type=int, default=None, help="optimizer steps per experience")
    run.add_argument("--lr", type=float, default=None, help="learning rate (default: the strategy's)")
    run.add_argument("--ref-images", default=None,
                     help="zscl: reference image folder (class sub-folders, e.g. ImageNet train/), "
                          "or 'synthetic'")
    run.add_argument("--ref-sentences", default=None,
                     help="zscl: reference sentences, one per line (or a Conceptual Captions TSV), "
                          "or 'synthetic'")
    run.add_argument("--batch-size", type=int, default=64, help="training batch size (default: 64)")
    run.add_argument("--device", default="cpu", help="torch device (default: cpu)")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--cache-dir", default=None, help="cache of the demo's tiny CLIP")
    run.add_argument("--order", default=None,
                     help="domain order: xtail 1|2, mtil I|II, or a comma-separated list of domains")
    run.add_argument("--shots", default=None,
                     help="training images per class, or 'full' (default: xtail 16, mtil full)")
    run.add_argument("--data-seed", type=int, default=None,
                     help="few-shot sampling seed (default: 42, the reference code's)")
    run.add_argument("--prompts", default=None, choices=("moram", "rail", "zscl"),
                     help="prompt templates (default: xtail moram, mtil zscl)")
    run.add_argument("--on-bad-image", default=None, choices=("skip", "raise"),
                     help="an unreadable image: skip it with a warning, counted in results.json "
                          "(default), or stop")
    run.add_argument("--num-workers", type=int, default=0,
                     help="DataLoader worker processes decoding images (default: 0)")
    run.add_argument("--no-resume", action="store_true", help="ignore an existing checkpoint")
    run.add_argument("--no-progress", action="store_true", help="no progress bars")
    run.set_defaults(func=cmd_run)

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


if __name__ == "__main__":
    sys.exit(main())
