"""What ``run`` and ``compare`` read from their command-line arguments: each strategy's options
(built once), the stream's options, the batch, the recorded settings, the data roots.

The two commands differ only in how many strategies they run and where (``run``: one, into
``--log-dir``; ``compare``: several, into ``--out/<name>``): their setup
(:func:`~moram_avalanche.experiments.commands.setup_from_arguments`) reads the budget, the
reference data and the recorded settings from here, for both, and the model and the benchmark
from the family record of ``--benchmark`` (:mod:`~moram_avalanche.experiments.families`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping


def default_num_workers(args) -> int:
    """``--num-workers`` when not given: worker processes when images are decoded from disk (a
    ``--data-root`` is given; half the CPU cores, at most 8), else 0 (in memory)."""
    if args.num_workers is not None:
        return args.num_workers
    return max(1, min(8, (os.cpu_count() or 1) // 2)) if args.data_root else 0


def data_roots(args) -> list:
    """The folders a run reads data from, which no output folder may be, hold or lie inside."""
    return [value for value in (args.data_root, args.ref_images) if value not in (None, "synthetic", "none")]


def stream_options(args) -> dict:
    """The benchmark options given on the command line (only those given)."""
    options = {}
    if args.order is not None:
        options["order"] = args.order.split(",") if "," in args.order else args.order
    if args.shots is not None:
        options["shots"] = None if args.shots == "full" else args.shots
    if args.data_seed is not None:
        options["seed"] = args.data_seed
    if args.prompts is not None:
        options["prompts"] = args.prompts
    if args.on_bad_image is not None:
        options["on_bad_image"] = args.on_bad_image
    return options


def shared_settings(args) -> dict:
    """What every run of the command records of the shared options (checked when resuming)."""
    return {
        "benchmark": args.benchmark, "data_root": str(Path(args.data_root).resolve()) if args.data_root else None,
        "model": args.model, "pretrained": args.pretrained, "weights_origin": args.weights_origin,
        "stream": stream_options(args),
        "iterations": args.iterations, "batch_size": batch_size_of(args), "seed": args.seed,
        "ref_images": args.ref_images, "ref_sentences": args.ref_sentences,
        **({"augment": False} if args.no_augment else {}),  # earlier records resume as they were
        **({"dtype": dtype_of(args)} if dtype_of(args) else {}),
        **({"gradient_checkpointing": True} if getattr(args, "gradient_checkpointing", False) else {}),
        **({"fsdp": True} if getattr(args, "fsdp", False) else {}),
        **({"preset": args.preset} if getattr(args, "preset", None) else {}),
    }


#: the training batch when neither --batch-size nor the stream gives one (the MoRAM release's 64)
DEFAULT_BATCH_SIZE = 64


def batch_size_of(args) -> int:
    """``--batch-size``, else the stream's (TRACE: 4, :mod:`~.text_recipes`), else 64."""
    from .text_recipes import shared_stream_options

    if getattr(args, "batch_size", None) is not None:
        return args.batch_size
    return shared_stream_options(args.benchmark).get("train_mb_size", DEFAULT_BATCH_SIZE)


def dtype_of(args):
    """``--dtype``, else the stream's (TRACE: bfloat16, :data:`~.text_recipes.STREAM_DTYPES`), else None
    (the model's float32)."""
    from .text_recipes import STREAM_DTYPES

    return getattr(args, "dtype", None) or STREAM_DTYPES.get(getattr(args, "benchmark", None))


def base_options(args, name: str, needs) -> dict:
    """Strategy ``name``'s options from the command line before ``--set``: the stream's defaults
    (and ``--preset``'s, :func:`~.text_recipes.stream_options`), the batch, ``--iterations``, ``--lr``."""
    from .text_recipes import stream_options as stream_defaults

    options = dict(stream_defaults(args.benchmark, name, getattr(args, "preset", None)))
    if getattr(args, "batch_size", None) is not None or "train_mb_size" not in options:
        options["train_mb_size"] = batch_size_of(args)  # --batch-size wins over the stream and preset
    if args.iterations is not None and needs.trains:
        options["iterations"] = args.iterations
    if getattr(args, "lr", None) is not None:
        options["lr"] = args.lr
    return options


def command_options(args, name: str, overrides: Mapping[str, object]) -> dict:
    """Keyword arguments of strategy ``name`` from the command line, built once (checked by
    :func:`moram_avalanche.arguments.check_strategy_arguments`, then run): the stream's and the
    preset's settings, the batch, ``--iterations``, ``--lr``, ``--eval-batch-size``, then its
    ``--set`` values (``overrides``). The reference data it takes join them when they are read
    (:func:`with_references`)."""
    from ..strategies.registry import get_strategy

    options = base_options(args, name, get_strategy(name, family_of(args)).needs)
    if args.eval_batch_size is not None:
        options["eval_mb_size"] = args.eval_batch_size
    options.update(overrides)
    return options


def strategy_options(args, name: str, eval_tf, overrides: Mapping[str, object]) -> dict:
    """Every keyword argument of strategy ``name`` from the command line: :func:`command_options`
    with the reference data it takes, read with ``eval_tf`` (:func:`with_references`)."""
    return with_references(args, name, command_options(args, name, overrides), eval_tf)


def with_references(args, name: str, options: Mapping[str, object], eval_tf) -> dict:
    """``options`` with the reference data strategy ``name`` takes (``--ref-images``,
    ``--ref-sentences``; :class:`~moram_avalanche.strategies.needs.StrategyNeeds`), read with the
    model's evaluation transform; a ``--set`` value of the same option wins."""
    from ..strategies.registry import get_strategy

    needs = get_strategy(name, family_of(args)).needs
    wanted = needs.taken(images=args.ref_images, sentences=args.ref_sentences)
    if not wanted:  # read only the reference data this strategy takes
        return dict(options)
    from ..benchmarks.reference_sets import reference_data

    return {**needs.reference_arguments(**reference_data(eval_tf, **wanted)), **options}


def family_of(args) -> str:
    """The model family of ``--benchmark`` (:data:`~moram_avalanche.benchmarks.BENCHMARK_FAMILIES`)."""
    from ..benchmarks import benchmark_family

    return benchmark_family(args.benchmark)


__all__ = ["DEFAULT_BATCH_SIZE", "base_options", "batch_size_of", "command_options", "data_roots",
           "default_num_workers", "dtype_of", "family_of", "shared_settings",
           "strategy_options", "stream_options", "with_references"]
