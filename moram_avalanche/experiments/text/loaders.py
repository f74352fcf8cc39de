"""How the language-model family's model and benchmark are loaded from the command line
(``--model``, ``--dtype``, ``--benchmark`` and their options): the loaders of its family record
(:mod:`.family`), which the text demo uses too (its tiny T5 is loaded as ``--model`` loads it)."""

from __future__ import annotations

import inspect

from ..stream_arguments import stream_options

#: the flags of the CLIP family that do nothing for a language model, and what to do instead
CLIP_FLAGS = (
    ("--pretrained", "pretrained", "a language model's weights are --model's (a Hugging Face name or a folder "
                                   "written by save_pretrained): leave --pretrained out"),
    ("--weights-origin", "weights_origin", "it names the open_clip tag of a CLIP weights file: leave it out"),
    ("--num-workers", "num_workers", "text examples are strings in memory, read without worker processes: "
                                     "leave it out"),
    ("--no-augment", "no_augment", "text is never augmented (it is the CLIP image crops): leave it out"),
    ("--compile-eval", "compile_eval", "it compiles a CLIP image tower; a language model's generation compiles "
                                       "its decode step on CUDA already (LanguageModel's compile_generation)"),
)


def check_text_arguments(args, options=None) -> None:
    """What a text run's command line says that can be checked before any weight loads, in the
    order it costs: the CLIP flags it does not use (:data:`CLIP_FLAGS`, refused rather than
    recorded as used), the dtype (float16 refused with the reason,
    :func:`~moram_avalanche.text.check.check_dtype`), the model's files (config, weights'
    headers, tokenizer: :func:`~moram_avalanche.text.check.check_language_model`), then the
    stream itself (task order, data files, unscorable data: built once, without the model) and
    each strategy's ``options`` (``{name: options}``) against it (their ``check_benchmark``)."""
    from ...text.check import check_dtype, check_language_model

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
    from ...strategies.registry import get_strategy

    for name, given in options.items():
        check = getattr(get_strategy(name, family), "check_benchmark", None)
        if callable(check):
            check(given, benchmark)


def text_dtype(args):
    """The language model's weights: ``--dtype``, else the stream's (TRACE: bfloat16,
    :data:`~.text.recipes.STREAM_DTYPES`), else None (the model's float32)."""
    from .recipes import STREAM_DTYPES

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
        from ...models.language_model import LanguageModel
        from ...text.load import load_language_model

        model, tokenizer = load_language_model(args.model, dtype=text_dtype(args) or "float32",
                                               gradient_checkpointing=getattr(args, "gradient_checkpointing", False))
        if getattr(args, "fsdp", False):
            from ...algorithms.fsdp import shard_frozen_weights
            from ...text.blocks import FORWARD_METHODS, transformer_blocks

            model = shard_frozen_weights(model, transformer_blocks(model), device, FORWARD_METHODS)
        else:
            model = model.to(device)
        return LanguageModel(model, tokenizer), None, None, tokenizer

    return load


def text_benchmark_builder(args):
    """``(None, None) -> benchmark`` of a text ``--benchmark`` (builders take no transforms); a stream
    option the stream does not take is refused, named by its flag."""
    from ...benchmarks import get_benchmark

    builder, options = get_benchmark(args.benchmark), stream_options(args)
    taken = inspect.signature(builder).parameters
    unsupported = sorted(k for k in options if k not in taken)
    if unsupported:
        flags = {"seed": "--data-seed", "on_bad_image": "--on-bad-image"}
        raise ValueError(f"--benchmark {args.benchmark} takes no "
                         f"{', '.join(flags.get(k, '--' + k) for k in unsupported)}: leave it out")
    return lambda train_tf, eval_tf: builder(args.data_root, **options)


__all__ = ["CLIP_FLAGS", "check_against_benchmark", "check_text_arguments", "text_benchmark_builder", "text_dtype",
           "text_model_loader"]
