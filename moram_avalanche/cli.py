"""The ``moram-avalanche`` command line, parsing only: ``demo``, ``run``, ``compare``, ``reproduce``,
``analyze``, ``cost`` and ``check-data``.

Every sub-command is one row of :data:`COMMANDS`: its help, its arguments (argparse's types
refuse a malformed value), the check of its arguments (:mod:`moram_avalanche.arguments`: before
anything is loaded or written; a user's mistake is one line on stderr and exit status 2) and what
it runs with the checked arguments (a function of :mod:`moram_avalanche.experiments.commands`).
:func:`main` parses, checks and runs the row; no code here branches on a sub-command, a family,
a benchmark or a table: the benchmarks' protocols and ``check-data``'s layouts are read from the
benchmark registry (:mod:`moram_avalanche.benchmarks.registry`). Heavy imports (torch, Avalanche,
open_clip) happen inside the checks and the commands, so ``--help`` and argument errors are
instant. ``run`` and ``compare`` also run data-parallel under ``torchrun --nproc_per_node N -m
moram_avalanche ...`` (:mod:`moram_avalanche.experiments.distributed`).
"""

from __future__ import annotations

import argparse
import logging
import sys
import warnings
from typing import Callable, Dict, List, NamedTuple, Optional

from .arguments import (
    OneLineParser,
    check_compare,
    check_cost,
    check_demo,
    check_device,
    check_nothing,
    check_reproduce,
    check_run,
    is_user_error,
    nonnegative_int,
    positive_float,
    positive_int,
    report_error,
    share,
    shots,
)

#: ``reproduce``'s CLIP tables (the CLIP family's, ``experiments.paper_tables.TABLE_CHOICES``, kept here
#: so that --help needs no heavy import; a test checks both agree)
REPRODUCE_TABLES = ("xtail", "xtail-order2", "mtil", "routing", "robustness", "pruning", "load-balance",
                    "sweeps", "additional-baselines", "all")
#: the language-model tables (``experiments.reproduce_text.TEXT_TABLE_NAMES``; a test checks both agree)
REPRODUCE_TEXT_TABLES = ("t5-standard", "t5-long", "llama-standard", "trace", "t5-order-robustness",
                         "t5-load-balance", "superni", "codealpaca")


def add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default=None,
                        help="output folder (default: runs/demo, with --text runs/demo-text)")
    parser.add_argument("--cache-dir", default=None,
                        help="where the pre-trained tiny CLIP (or T5) is cached (default: ~/.cache/moram-avalanche "
                             "or $MORAM_AVALANCHE_CACHE)")
    parser.add_argument("--full", action="store_true",
                        help="all eight strategies: + WiSE-FT, LwF, ZSCL, MoE-Adapters, InfLoRA (a few minutes more)")
    parser.add_argument("--text", action="store_true",
                        help="the language-model demo: SeqLoRA and MoRAM on a tiny T5 and the synthetic-text "
                             "stream (not with --full)")
    parser.add_argument("--quick", action="store_true", help="a seconds-long smoke version (tiny sizes)")
    parser.add_argument("--device", default="auto",
                        help="torch device: auto (a CUDA GPU when there is one, default), cpu, cuda, cuda:N")
    parser.add_argument("--no-progress", action="store_true",
                        help="no progress output (off a terminal it is one line per experience)")


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--benchmark", required=True, help=f"benchmark name -- {_benchmarks_help()}")
    parser.add_argument("--strategy", required=True,
                        help="strategy name (moram, finetune, zeroshot, wiseft, lwf, lwf-vr, zscl, ..., or "
                             "Avalanche's avalanche.naive, avalanche.ewc, ...; an unknown name lists them all)")
    parser.add_argument("--log-dir", required=True, help="output folder: TensorBoard, results, checkpoint")
    parser.add_argument("--lr", type=positive_float, default=None, help="learning rate (default: the strategy's)")
    parser.add_argument("--set", action="append", metavar="KEY=VALUE",
                        help="any keyword argument of the strategy, as a Python literal "
                             "(e.g. --set topk=8 --set threshold=0); repeatable")
    add_shared_arguments(parser)


def add_compare_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--benchmark", required=True, help=f"benchmark name -- {_benchmarks_help()}")
    parser.add_argument("--strategies", required=True,
                        help="comma-separated strategy names, e.g. zeroshot,zscl,moe-adapters,moram")
    parser.add_argument("--out", required=True, help="output folder of the comparison")
    parser.add_argument("--set", action="append", metavar="STRATEGY.KEY=VALUE",
                        help="a keyword argument of one strategy, as a Python literal "
                             "(e.g. --set moram.lr=1e-3); repeatable")
    add_shared_arguments(parser)


def add_analyze_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("log_dir", metavar="LOG_DIR",
                        help="the run's folder (run --log-dir, or OUT/<strategy> of a compare)")
    parser.add_argument("--out", default=None, help="where to write the analysis (default: "
                        "LOG_DIR/analysis; give another for a read-only run folder)")
    parser.add_argument("--data-root", default=None, help="where the run's datasets are now "
                        "(default: where the run read them)")
    parser.add_argument("--encoder", default="visual", choices=("visual", "text"),
                        help="tower of the activation maps (default: visual, the paper's)")
    parser.add_argument("--layer", type=positive_int, default=None,
                        help="block of the maps, 1-based (default: 8 of 12 as the paper, else the middle)")
    parser.add_argument("--projection", default="k", choices=("q", "k", "v", "out", "fc", "proj"),
                        help="projection of the maps (default: k, the paper's)")
    parser.add_argument("--scenarios", default=None, metavar="DATA@AFTER,...",
                        help="e.g. 1@1,1@2,1@10,9@1,9@9 (images of task DATA, model after task AFTER; "
                             "default: these, for the run's length)")
    parser.add_argument("--image", type=nonnegative_int, default=0, help="test image (0-based) each map shows")
    parser.add_argument("--images", type=positive_int, default=16,
                        help="test images averaged for the activation ratios (default: 16)")
    parser.add_argument("--share", type=share, default=0.99,
                        help="share of the cumulative activation mass the atom counts cover (default: 0.99)")
    parser.add_argument("--no-maps", action="store_true",
                        help="only what the records give (atom counts, pruning): no model, no data")
    parser.add_argument("--model", default=None, help="the run's open_clip model (default: recorded)")
    parser.add_argument("--pretrained", default=None, help="its weights (default: recorded)")
    parser.add_argument("--benchmark", default=None, help="the run's benchmark (default: recorded)")
    parser.add_argument("--cache-dir", default=None, help="cache of the demo's tiny CLIP")
    parser.add_argument("--device", default="auto",
                        help="torch device: auto (a CUDA GPU when there is one, default), cpu, cuda, cuda:N")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def add_cost_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default="ViT-B-16", help="open_clip model name (default: ViT-B-16, the paper's)")
    parser.add_argument("--pretrained", default="none",
                        help="weights: open_clip tag, local file or 'none' (default: none; costs do not "
                             "depend on the weights)")
    parser.add_argument("--device", default="auto",
                        help="torch device: auto (a CUDA GPU when there is one, default), cpu, cuda, cuda:N")
    parser.add_argument("--strategies", default="zeroshot,moram,moe-adapters,inflora,seq-lora,moe-lora",
                        help="comma-separated strategy names (default: the paper's rows; zeroshot is CLIP)")
    parser.add_argument("--tasks", default="1,5,10", help="after which tasks to measure (default: 1,5,10)")
    parser.add_argument("--batch-size", type=positive_int, default=64, help="training batch (default: 64, the paper's)")
    parser.add_argument("--iterations", type=positive_int, default=10, help="timed training steps per measured task")
    parser.add_argument("--warmup", type=nonnegative_int, default=3, help="untimed training steps before them")
    parser.add_argument("--classes", type=positive_int, default=110,
                        help="classes per task (default: 110, X-TAIL's average)")
    parser.add_argument("--eval-images", type=positive_int, default=256, help="test images per measured task")
    parser.add_argument("--eval-batch-size", type=positive_int, default=None, help="evaluation batch (default: --batch-size)")
    parser.add_argument("--repeats", type=positive_int, default=3, help="timed evaluations per measured task")
    parser.add_argument("--amp", action="store_true", help="fp16 autocast (CUDA only)")
    parser.add_argument("--params-only", action="store_true",
                        help="count parameters only (no training steps, no timing): quick on a CPU")
    parser.add_argument("--set", action="append", metavar="STRATEGY.KEY=VALUE",
                        help="a keyword argument of one strategy, as a Python literal; repeatable")
    parser.add_argument("--out", default=None, help="also write cost.md and cost.json there")
    parser.add_argument("--no-paper", action="store_true", help="leave out the paper's tables")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache-dir", default=None, help="cache of the demo's tiny CLIP config")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def add_check_data_arguments(parser: argparse.ArgumentParser) -> None:
    from .benchmarks.data_checks import ALL, data_check_names, describe_data_checks

    parser.add_argument("--root", required=True, help="the data root (--data-root of run)")
    parser.add_argument("--benchmark", default=ALL, choices=data_check_names(), help=describe_data_checks())
    parser.add_argument("--verify-images", action="store_true",
                        help="also decode every image (slow) and count unreadable ones")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def add_reproduce_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("table", metavar="TABLE",
                        help=f"one of {', '.join(REPRODUCE_TABLES + REPRODUCE_TEXT_TABLES)}")
    parser.add_argument("--data-root", default=None, help="the datasets (and, by default, the "
                        "reference data: ImageNet/train, tiny-imagenet-200/train, Conceptual "
                        "Captions' Validation_GCC-1.1.0-Validation_output.csv)")
    parser.add_argument("--out", default="runs/reproduce", help="output folder (default: runs/reproduce)")
    parser.add_argument("--seeds", default=None, help="comma-separated seeds of every table "
                        "(default: 42, the release's; robustness: 42,43,44)")
    parser.add_argument("--device", default="auto", help="torch device (default: auto, CUDA when available)")
    parser.add_argument("--paper", action="store_true", help="print the paper's table alone (no data needed)")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the plan: every run with its settings and what it needs on disk")
    parser.add_argument("--rehearse", action="store_true",
                        help="run the whole plan at real model size with 2 iterations per task on 2 "
                             "test images per class (OUT/rehearsal): finds a missing file or a crash in minutes")
    parser.add_argument("--model", default=None, help="open_clip model name (the paper: ViT-B-16); for a "
                        "language-model table a Hugging Face name or local folder (default: the table's, as "
                        "the paper's: t5-large, meta-llama/Llama-2-7b-hf, TRACE's three chat models, "
                        "meta-llama/Llama-3.1-8B)")
    parser.add_argument("--pretrained", default=None, help="open_clip tag or local weights file "
                        "(default: openai, the paper's); 'none': random init")
    parser.add_argument("--dtype", default=None, choices=("float32", "bfloat16", "float16"),
                        help="language-model tables: the compute dtype, the frozen weights' too (default: float32 "
                             "for T5, bfloat16 for the LLaMA-shaped models; bf16 trains float32 master copies of "
                             "the trainable weights)")
    parser.add_argument("--gradient-checkpointing", action="store_true",
                        help="language-model tables: recompute activations in the backward pass")
    parser.add_argument("--layout", default=None, choices=("auto", "olora", "moram"),
                        help="language-model tables: the data layout under --data-root (default: auto)")
    parser.add_argument("--weights-origin", default=None, metavar="TAG",
                        help="the tag a local --pretrained file was published under (openai: run with QuickGELU)")
    parser.add_argument("--ref-images", default=None, help="reference images for every strategy "
                        "that takes them, instead of each one's paper location under --data-root "
                        "(a folder, or 'synthetic')")
    parser.add_argument("--ref-sentences", default=None, help="reference sentences (ZSCL), instead of "
                        "Conceptual Captions under --data-root (a file, or 'synthetic')")
    parser.add_argument("--iterations", type=positive_int, default=None,
                        help="a shorter budget per experience for smoke runs (NOT the paper's; recorded)")
    parser.add_argument("--num-workers", type=nonnegative_int, default=None,
                        help="DataLoader worker processes decoding images (default: half the CPU "
                             "cores up to 8 with --data-root, else 0)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def add_shared_arguments(parser: argparse.ArgumentParser) -> None:
    """Model, data, budget and run options common to ``run`` and ``compare``."""
    parser.add_argument("--data-root", default=None, help="dataset root folder (real benchmarks)")
    parser.add_argument("--model", default="ViT-B-16", help="open_clip model name (default: ViT-B-16); for "
                        "the text benchmarks (lm-cl, trace, superni, synthetic-text) a Hugging Face name in the local "
                        "cache or a folder written by save_pretrained")
    parser.add_argument("--pretrained", default=None,
                        help="open_clip tag, local weights file or 'none' (random init; default: "
                             "openai); 'synthetic' with --model moram-synthetic-tiny uses the demo's "
                             "pre-trained tiny CLIP; not for the text benchmarks (--model names their weights)")
    parser.add_argument("--weights-origin", default=None, metavar="TAG",
                        help="the open_clip tag a local --pretrained file was published under "
                             "(openai: OpenAI's weights, run with QuickGELU as they were trained)")
    parser.add_argument("--dtype", default=None, choices=("float32", "bfloat16", "float16"),
                        help="text benchmarks: the language model's compute dtype, the frozen weights' too "
                             "(default: float32; the paper's TRACE runs: bfloat16, with float32 master copies "
                             "of the trainable weights; --set master_weights=False: pure bf16)")
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
    parser.add_argument("--compile-eval", action="store_true",
                        help="CLIP benchmarks on a CUDA device: the image tower's evaluation compiled once per task "
                             "(torch.compile, reduce-overhead: CUDA graphs, one launch per batch); training unchanged")
    parser.add_argument("--keep-base-casts", action="store_true",
                        help="MoRAM layers keep a copy of their frozen weights in the compute dtype, at that copy's "
                             "memory: in training under autocast two casts fewer per call; where no backward follows "
                             "(evaluation, generation) on a GPU path the weight stacked with a frozen bank's keys, so one GEMM "
                             "gives W x + b and A x (q, k and v of an attention one GEMM); not with --fsdp")
    parser.add_argument("--no-resume", action="store_true",
                        help="start over: remove the run's checkpoint and results instead of resuming")
    parser.add_argument("--no-progress", action="store_true",
                        help="no progress output (off a terminal it is one line per experience)")




def _benchmarks_help() -> str:
    from .benchmarks import describe_benchmarks

    return describe_benchmarks()


class Command(NamedTuple):
    """A sub-command: argparse's ``help`` and ``description``, ``arguments(parser)`` adding its
    arguments, ``check(args) -> checked args`` (:mod:`moram_avalanche.arguments`) and the name of
    its ``handler`` in :mod:`moram_avalanche.experiments.commands` (``handler(checked) -> exit status``)."""

    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    check: Callable[[argparse.Namespace], argparse.Namespace]
    handler: str
    description: Optional[str] = None


#: every sub-command, in the order --help lists them
COMMANDS: Dict[str, Command] = {
    "demo": Command(
        help="ZeroShot vs FineTune vs MoRAM on an offline synthetic stream (--full: 8 strategies; "
             "--text: SeqLoRA vs MoRAM on a tiny T5)",
        description="Pre-train a tiny CLIP on synthetic captioned images (cached), then compare ZeroShot, "
                    "FineTune and MoRAM on a five-domain synthetic stream, as `compare` does; --full "
                    "adds WiSE-FT, LwF, ZSCL, MoE-Adapters and InfLoRA. --text: pre-train a tiny T5 on "
                    "a generated text mixture (cached), then compare SeqLoRA and MoRAM on the five "
                    "tasks of the synthetic-text stream (OP, BWT). Resumable: run it again to "
                    "print the table or add strategies.",
        arguments=add_demo_arguments, check=check_demo, handler="demo"),
    "run": Command(
        help="one strategy over one benchmark, resumable",
        arguments=add_run_arguments, check=check_run, handler="run"),
    "compare": Command(
        help="several strategies on one benchmark: the paper-style table",
        description="Run each strategy on the same benchmark, model, seed and budget (resumable "
                    "per strategy) and write the Transfer / Average / Last table per domain "
                    "(table.md, table.csv; best in bold), summary.md (with peak memory and time), "
                    "accuracy_matrices.png and a combined TensorBoard log (OUT/tensorboard).",
        arguments=add_compare_arguments, check=check_compare, handler="compare"),
    "analyze": Command(
        help="the paper's figures from a MoRAM run: activation maps, atoms for 99%%, pruning",
        description="Write LOG_DIR/analysis/: report.md embedding every picture -- activation maps of "
                    "one layer's atoms on image tokens for data of task t after task t' (paper Figs. "
                    "3, 6-8), averaged activation ratios (Fig. 5), atoms needed for 99%% of the "
                    "cumulative activation mass per layer and projection (Figs. 9-11), atoms kept and "
                    "storage saved by pruning -- the PNGs, analysis.json, and the pictures in the "
                    "run's TensorBoard log. The model and data are rebuilt from the run's settings.",
        arguments=add_analyze_arguments, check=check_device, handler="analyze"),
    "cost": Command(
        help="parameters, peak training memory and ms/image of each method after 1/5/10 tasks",
        description="For CLIP, MoRAM, MoE-Adapters, InfLoRA and the LoRA-style baselines (or "
                    "--strategies): trainable parameters per weight matrix (formula and count) and "
                    "per task, peak training memory per task (the CUDA allocator's peak on a GPU, a "
                    "labelled CPU proxy otherwise), training and inference ms/image after each of "
                    "--tasks, on random images (the paper's cost tables). Says which device and "
                    "precision it measured.",
        arguments=add_cost_arguments, check=check_cost, handler="cost"),
    "check-data": Command(
        help="which X-TAIL / MTIL domains a data root holds, and what is wrong",
        description="Report, per domain, found / missing / malformed (with the file or folder "
                    "expected, the layout understood, and how to obtain it) and the numbers of "
                    "classes and images. Exit status 1 when a benchmark cannot be built.",
        arguments=add_check_data_arguments, check=check_nothing, handler="check_data"),
    "reproduce": Command(
        help="the paper's CLIP and language-model tables, each row run with the paper's settings",
        description="Run every row of a table of the MoRAM paper that the library can run, with "
                    "the paper's settings (per strategy: its own paper's), resumable, and write "
                    "OUT/TABLE/table.md, table.csv (ours, the paper's and the difference per cell; "
                    "mean ± std over several seeds), table.png and a TensorBoard log. Tables: xtail "
                    "(X-TAIL order 1, 16-shot), xtail-order2, mtil (5-shot MTIL, the paper's), "
                    "routing, robustness (3 seeds), pruning, load-balance, sweeps (Fig. 4), "
                    "additional-baselines, all (the CLIP tables); the language-model tables: "
                    "t5-standard (T5-large, orders 1-3), t5-long (orders 4-6), llama-standard "
                    "(LLaMA2-7B, orders 1-3), t5-order-robustness (t5-standard's runs, mean ± std over "
                    "the orders), t5-load-balance (t5-long's, without / with load balancing), each on "
                    "--benchmark lm-cl's data; trace (TRACE, three chat models, 3 seeds, OP and BWT) on "
                    "--benchmark trace's; superni (SAPT's 15 SuperNI tasks, AP and FT) on --benchmark "
                    "superni's; codealpaca (Llama-3.1-8B on CodeAlpaca: HumanEval pass@k, MMLU and eight "
                    "of its subjects, parameters) on --benchmark codealpaca's. --paper prints a table's "
                    "every paper cell.",
        arguments=add_reproduce_arguments, check=check_reproduce, handler="reproduce"),
}


def build_parser() -> argparse.ArgumentParser:
    """The parser of every sub-command of :data:`COMMANDS`."""
    from . import __version__

    parser = OneLineParser(
        prog="moram-avalanche",
        description="MoRAM continual learning of CLIP as Avalanche strategies.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, command in COMMANDS.items():
        command.arguments(commands.add_parser(name, help=command.help, description=command.description))
    return parser


def _quiet_imports() -> None:
    # avalanche-lib warns on every import that no QP solver is installed (only GEM needs one)
    warnings.filterwarnings("ignore", message="no QP solver found", category=UserWarning)


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("moram_avalanche").setLevel(logging.INFO)  # ours; libraries stay quiet
    command = COMMANDS[args.command]
    try:
        _quiet_imports()
        checked = command.check(args)
        from .experiments import commands

        return int(getattr(commands, command.handler)(checked) or 0)
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
