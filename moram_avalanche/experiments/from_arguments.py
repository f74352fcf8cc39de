"""What ``run`` and ``compare`` read from their command-line arguments: each strategy's options
(built once), the stream's options, the batch, the recorded settings, the data roots.

The two commands differ only in how many strategies they run and where (``run``: one, into
``--log-dir``; ``compare``: several, into ``--out/<name>``): their setup
(:func:`~moram_avalanche.experiments.commands.setup_from_arguments`) reads the budget, the
reference data and the recorded settings from here, for both, and the model and the benchmark
from the family record of ``--benchmark`` (:mod:`~moram_avalanche.experiments.families`).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Mapping

from ..benchmarks import benchmark_family
from ..utils.moved import REMOVED_IN
from .families import family_of_benchmark
from .stream_arguments import pretrained_of, stream_options


def shared_settings(args) -> dict:
    """What every run of the command records of the shared options (checked when resuming)."""
    return {
        "benchmark": args.benchmark, "data_root": str(Path(args.data_root).resolve()) if args.data_root else None,
        "model": args.model, "pretrained": pretrained_of(args), "weights_origin": args.weights_origin,
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
    """``--batch-size``, else the stream's (TRACE: 4; the family's
    :attr:`~.family.Family.stream_options`), else 64."""
    if getattr(args, "batch_size", None) is not None:
        return args.batch_size
    return family_of_benchmark(args.benchmark).stream_options(args.benchmark).get("train_mb_size", DEFAULT_BATCH_SIZE)


def dtype_of(args):
    """``--dtype``, else the stream's (TRACE: bfloat16; the family's :attr:`~.family.Family.dtype`),
    else None (the model's own)."""
    return family_of_benchmark(args.benchmark).dtype(args)


def base_options(args, name: str, needs) -> dict:
    """Strategy ``name``'s options from the command line before ``--set``: the stream's settings
    (and ``--preset``'s; the family's :attr:`~.family.Family.stream_options`), the batch,
    ``--iterations``, ``--lr``."""
    options = dict(family_of_benchmark(args.benchmark).stream_options(args.benchmark, name,
                                                                      getattr(args, "preset", None)))
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

    options = base_options(args, name, get_strategy(name, benchmark_family(args.benchmark)).needs)
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

    needs = get_strategy(name, benchmark_family(args.benchmark)).needs
    wanted = needs.taken(images=args.ref_images, sentences=args.ref_sentences)
    if not wanted:  # read only the reference data this strategy takes
        return dict(options)
    from ..benchmarks.images.reference_sets import reference_data

    return {**needs.reference_arguments(**reference_data(eval_tf, **wanted)), **options}


def __getattr__(name: str):
    """0.6's ``family_of(args)``, for one version: it is ``benchmark_family(args.benchmark)``
    (:func:`moram_avalanche.benchmarks.benchmark_family`, the one derivation of a benchmark's family)."""
    if name != "family_of":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(f"{__name__}.family_of(args) is deprecated since moram-avalanche 0.7 and goes in {REMOVED_IN}: "
                  "read moram_avalanche.benchmarks.benchmark_family(args.benchmark)", DeprecationWarning, stacklevel=2)
    return lambda args: benchmark_family(args.benchmark)


def switch_plugins(args) -> list:
    """The plugins the command line's speed switches add to every strategy of a run: the shared
    ``--keep-base-casts`` (:class:`~moram_avalanche.strategies.plugins.base_casts.KeepBaseCasts`),
    then the family's own (:attr:`~.family.Family.run_plugins`, e.g. CLIP's ``--compile-eval``)."""
    plugins = []
    if getattr(args, "keep_base_casts", False):
        from ..strategies.plugins.base_casts import KeepBaseCasts

        plugins.append(KeepBaseCasts())
    return plugins + family_of_benchmark(args.benchmark).run_plugins(args)


def switches_of(args) -> dict:
    """The speed switches as the record's ``environment`` keeps them (recorded, never checked: they
    change how fast a run goes, not what it computes)."""
    return {name: True for name in ("compile_eval", "keep_base_casts") if getattr(args, name, False)}


__all__ = ["DEFAULT_BATCH_SIZE", "base_options", "batch_size_of", "command_options", "dtype_of", "shared_settings",
           "strategy_options", "switch_plugins", "switches_of", "with_references"]
