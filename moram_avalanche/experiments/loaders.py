"""How each family's model and benchmark are loaded from the command line (``--model``,
``--pretrained``, ``--benchmark`` and their options): the loaders of the family records
(:mod:`.clip_family`, :mod:`.text_family`), which the demos use too (their tiny models are loaded
as ``--model`` loads them)."""

from __future__ import annotations

import inspect
from pathlib import Path

from .stream_arguments import pretrained_of, stream_options

#: the flags of the language-model family, which no CLIP run takes
TEXT_FLAGS = (("--dtype", "dtype"), ("--gradient-checkpointing", "gradient_checkpointing"), ("--fsdp", "fsdp"),
              ("--preset", "preset"))


def check_clip_arguments(args, options=None) -> None:
    """A CLIP run's command line: the language-model flags (:data:`TEXT_FLAGS`) refused."""
    for flag, name in TEXT_FLAGS:
        if getattr(args, name, None):
            raise ValueError(f"{flag} is for the text benchmarks (lm-cl, trace, superni, synthetic-text); "
                             f"leave it out for --benchmark {args.benchmark}")


#: the flags of the CLIP family that do nothing for a language model, and what to do instead
CLIP_FLAGS = (
    ("--pretrained", "pretrained", "a language model's weights are --model's (a Hugging Face name or a folder "
                                   "written by save_pretrained): leave --pretrained out"),
    ("--weights-origin", "weights_origin", "it names the open_clip tag of a CLIP weights file: leave it out"),
    ("--num-workers", "num_workers", "text examples are strings in memory, read without worker processes: "
                                     "leave it out"),
    ("--no-augment", "no_augment", "text is never augmented (it is the CLIP image crops): leave it out"),
)


def check_text_arguments(args, options=None) -> None:
    """What a text run's command line says that can be checked before any weight loads, in the
    order it costs: the CLIP flags it does not use (:data:`CLIP_FLAGS`, refused rather than
    recorded as used), the dtype (float16 refused with the reason,
    :func:`~moram_avalanche.text.check.check_dtype`), the model's files (config, weights'
    headers, tokenizer: :func:`~moram_avalanche.text.check.check_language_model`), then the
    stream itself (task order, data files, unscorable data: built once, without the model) and
    each strategy's ``options`` (``{name: options}``) against it (their ``check_benchmark``)."""
    from ..text.check import check_dtype, check_language_model

    for flag, name, fix in CLIP_FLAGS:
        if getattr(args, name, None):
            raise ValueError(f"{flag} does nothing for a language model (--benchmark {args.benchmark}): {fix}")
    dtype = check_dtype(text_dtype(args) or "float32")
    check_language_model(args.model, dtype=dtype)
    benchmark = text_benchmark_builder(args)(None, None)
    check_against_benchmark(options or {}, benchmark, "text")


def check_against_benchmark(options, benchmark, family: str) -> None:
    """Each strategy's options (``{name: options}``) against the benchmark it will run on: the
    strategy's ``check_benchmark(options, benchmark)`` where it declares one."""
    from ..strategies.registry import get_strategy

    for name, given in options.items():
        check = getattr(get_strategy(name, family), "check_benchmark", None)
        if callable(check):
            check(given, benchmark)


def clip_model_loader(args, device: str):
    """``() -> (CLIP, train transform, eval transform, tokenizer)`` of ``--model`` / ``--pretrained``
    on ``device``. The demo's tiny CLIP (``--model moram-synthetic-tiny``) is registered with
    open_clip, and with ``--pretrained synthetic`` pre-trained (cached), when the model is loaded."""
    check_clip_arguments(args)

    def load():
        from ..clip.load import load_clip  # looked up when the model is loaded
        from .demo import TINY_NAME, DemoConfig, pretrained_tiny_clip, register_tiny_clip
        from .demos import default_cache_dir

        pretrained = None if pretrained_of(args).lower() == "none" else pretrained_of(args)
        if args.model == TINY_NAME:  # the demo's model: known to open_clip once registered
            cache_dir = Path(args.cache_dir) if args.cache_dir else default_cache_dir()
            register_tiny_clip(cache_dir)
            if pretrained == "synthetic":
                pretrained = str(pretrained_tiny_clip(cache_dir, DemoConfig()))
        return load_clip(args.model, pretrained=pretrained or None, device=device, weights_origin=args.weights_origin)

    return load


def clip_benchmark_builder(args):
    """``(train_transform, eval_transform) -> benchmark`` of an image ``--benchmark``
    (``--no-augment``: the evaluation transform for training too)."""
    from ..benchmarks import get_benchmark

    builder, options = get_benchmark(args.benchmark), stream_options(args)
    return lambda train_tf, eval_tf: builder(
        args.data_root, train_transform=eval_tf if args.no_augment else train_tf, eval_transform=eval_tf,
        **options)


def text_dtype(args):
    """The language model's weights: ``--dtype``, else the stream's (TRACE: bfloat16,
    :data:`~.text_recipes.STREAM_DTYPES`), else None (the model's float32)."""
    from .text_recipes import STREAM_DTYPES

    return getattr(args, "dtype", None) or STREAM_DTYPES.get(getattr(args, "benchmark", None))


def text_model_loader(args, device: str):
    """``() -> (LanguageModel, None, None, tokenizer)`` of ``--model`` on ``device``: a Hugging Face
    name found in the local cache or a folder written by ``save_pretrained``
    (:func:`~moram_avalanche.text.load.load_language_model`); a text stream has no transforms.

    With ``--fsdp`` the model is loaded on the CPU and its transformer blocks' and own weights are
    sharded onto ``device`` (:func:`~moram_avalanche.algorithms.fsdp.shard_frozen_weights`,
    :func:`~moram_avalanche.text.blocks.transformer_blocks`), before the strategy injects its
    adapters: the whole model never sits on one device."""

    def load():
        from ..models.language_model import LanguageModel
        from ..text.load import load_language_model

        model, tokenizer = load_language_model(args.model, dtype=text_dtype(args) or "float32",
                                               gradient_checkpointing=getattr(args, "gradient_checkpointing", False))
        if getattr(args, "fsdp", False):
            from ..algorithms.fsdp import shard_frozen_weights
            from ..text.blocks import FORWARD_METHODS, transformer_blocks

            model = shard_frozen_weights(model, transformer_blocks(model), device, FORWARD_METHODS)
        else:
            model = model.to(device)
        return LanguageModel(model, tokenizer), None, None, tokenizer

    return load


def text_benchmark_builder(args):
    """``(None, None) -> benchmark`` of a text ``--benchmark`` (builders take no transforms); a stream
    option the stream does not take is refused, named by its flag."""
    from ..benchmarks import get_benchmark

    builder, options = get_benchmark(args.benchmark), stream_options(args)
    taken = inspect.signature(builder).parameters
    unsupported = sorted(k for k in options if k not in taken)
    if unsupported:
        flags = {"seed": "--data-seed", "on_bad_image": "--on-bad-image"}
        raise ValueError(f"--benchmark {args.benchmark} takes no "
                         f"{', '.join(flags.get(k, '--' + k) for k in unsupported)}: leave it out")
    return lambda train_tf, eval_tf: builder(args.data_root, **options)


__all__ = ["CLIP_FLAGS", "TEXT_FLAGS", "check_against_benchmark", "check_clip_arguments", "check_text_arguments",
           "clip_benchmark_builder", "clip_model_loader", "pretrained_of", "text_benchmark_builder", "text_dtype",
           "text_model_loader"]
