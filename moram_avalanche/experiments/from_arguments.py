"""The :class:`~moram_avalanche.experiments.run.Setup` of ``run`` and ``compare``, from their
checked command-line arguments.

The two commands differ only in how many strategies they run and where (``run``: one, into
``--log-dir``; ``compare``: several, into ``--out/<name>``): the model, the benchmark, the
budget, the reference data and the recorded settings are built here, once, for both.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Mapping

from .run import Setup


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


def model_loader(args):
    """A zero-argument loader of the model named on the command line (seeded by the caller), by
    the family of ``--benchmark`` (:data:`MODEL_LOADERS`)."""
    from ..benchmarks import benchmark_family

    return MODEL_LOADERS[benchmark_family(args.benchmark)](args)


def clip_model_loader(args):
    """``() -> (CLIP, train transform, eval transform, tokenizer)`` of ``--model`` / ``--pretrained``."""
    from ..clip.load import load_clip
    from .demo import TINY_NAME, DemoConfig, default_cache_dir, pretrained_tiny_clip, register_tiny_clip

    for flag, value in (("--dtype", getattr(args, "dtype", None)),
                        ("--gradient-checkpointing", getattr(args, "gradient_checkpointing", False)),
                        ("--fsdp", getattr(args, "fsdp", False)),
                        ("--preset", getattr(args, "preset", None))):
        if value:
            raise ValueError(f"{flag} is for the text benchmarks (lm-cl, trace, synthetic-text); "
                             f"leave it out for --benchmark {args.benchmark}")

    cache_dir = Path(args.cache_dir) if args.cache_dir else default_cache_dir()
    register_tiny_clip(cache_dir)
    pretrained = None if args.pretrained.lower() == "none" else args.pretrained
    if args.model == TINY_NAME and pretrained == "synthetic":
        pretrained = str(pretrained_tiny_clip(cache_dir, DemoConfig()))
    return lambda: load_clip(args.model, pretrained=pretrained or None, device=args.device,  # as it is then
                             weights_origin=args.weights_origin)


def text_model_loader(args):
    """``() -> (LanguageModel, None, None, tokenizer)`` of ``--model``: a Hugging Face name found
    in the local cache or a folder written by ``save_pretrained``
    (:func:`~moram_avalanche.text.load.load_language_model`); a text stream has no transforms.

    With ``--fsdp`` the model is loaded on the CPU and its transformer blocks' and own weights are
    sharded onto ``args.device`` (:func:`~moram_avalanche.algorithms.fsdp.shard_frozen_weights`,
    :func:`~moram_avalanche.text.blocks.transformer_blocks`), before the strategy injects its
    adapters: the whole model never sits on one device."""
    from ..models.language_model import LanguageModel
    from ..text.load import load_language_model

    def load():
        model, tokenizer = load_language_model(args.model, dtype=dtype_of(args) or "float32",
                                               gradient_checkpointing=getattr(args, "gradient_checkpointing", False))
        if getattr(args, "fsdp", False):
            from ..algorithms.fsdp import shard_frozen_weights
            from ..text.blocks import FORWARD_METHODS, transformer_blocks

            model = shard_frozen_weights(model, transformer_blocks(model), args.device, FORWARD_METHODS)
        else:
            model = model.to(args.device)
        return LanguageModel(model, tokenizer), None, None, tokenizer

    return load


#: model family (of the benchmark, :data:`~moram_avalanche.benchmarks.BENCHMARK_FAMILIES`) ->
#: ``args -> zero-argument model loader``
MODEL_LOADERS = {"clip": clip_model_loader, "text": text_model_loader}


def text_benchmark_builder(args):
    """``(None, None) -> benchmark`` of a text ``--benchmark`` (builders take no transforms)."""
    from ..benchmarks import get_benchmark

    import inspect

    builder, options = get_benchmark(args.benchmark), stream_options(args)
    taken = inspect.signature(builder).parameters
    unsupported = sorted(k for k in options if k not in taken)
    if unsupported:
        flags = {"seed": "--data-seed", "on_bad_image": "--on-bad-image"}
        raise ValueError(f"--benchmark {args.benchmark} takes no "
                         f"{', '.join(flags.get(k, '--' + k) for k in unsupported)}: leave it out")
    return lambda train_tf, eval_tf: builder(args.data_root, **options)


def benchmark_builder(args):
    """``(train_transform, eval_transform) -> benchmark`` of ``--benchmark`` and its options, by
    the benchmark's family (:data:`BENCHMARK_BUILDERS`)."""
    from ..benchmarks import benchmark_family

    return BENCHMARK_BUILDERS[benchmark_family(args.benchmark)](args)


def clip_benchmark_builder(args):
    """``(train_transform, eval_transform) -> benchmark`` of an image ``--benchmark``."""
    from ..benchmarks import get_benchmark

    builder, options = get_benchmark(args.benchmark), stream_options(args)
    return lambda train_tf, eval_tf: builder(
        args.data_root, train_transform=eval_tf if args.no_augment else train_tf, eval_transform=eval_tf,
        **options)


#: model family -> ``args -> (train_transform, eval_transform) -> benchmark``
BENCHMARK_BUILDERS = {"clip": clip_benchmark_builder, "text": text_benchmark_builder}


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


def setup_from_arguments(args, options: Mapping[str, Mapping[str, object]],
                         overrides: Mapping[str, Mapping[str, object]]) -> Setup:
    """The setup of ``run`` / ``compare`` from checked arguments: ``options`` are each strategy's
    (:func:`command_options`, checked), ``overrides`` its ``--set`` values (recorded as given).
    The model is loaded on ``args.device`` as it is when a run starts (a data-parallel process
    sets its own ``cuda:<rank>``, and the setup's ``device``, after joining its group)."""
    return Setup(
        make_model=model_loader(args), make_benchmark=benchmark_builder(args),
        options=lambda name, eval_tf: with_references(args, name, options[name], eval_tf),
        options_checked=True, settings=shared_settings(args),
        strategy_settings=lambda name: {k: repr(v) for k, v in overrides.get(name, {}).items()},
        family=family_of(args), seed=args.seed, device=args.device, num_workers=default_num_workers(args),
        environment={"cache_dir": args.cache_dir, "device": args.device}, data_roots=tuple(data_roots(args)))


__all__ = ["BENCHMARK_BUILDERS", "command_options", "data_roots", "DEFAULT_BATCH_SIZE", "base_options", "batch_size_of", "dtype_of", "MODEL_LOADERS", "benchmark_builder", "clip_benchmark_builder", "clip_model_loader",
           "default_num_workers", "model_loader", "text_benchmark_builder", "text_model_loader",
           "family_of", "setup_from_arguments", "shared_settings", "strategy_options", "stream_options",
           "with_references"]
