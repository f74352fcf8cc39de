"""How the CLIP family's model and benchmark are loaded from the command line (``--model``,
``--pretrained``, ``--benchmark`` and their options): the loaders of its family record
(:mod:`.family`), which the demo uses too (its tiny CLIP is loaded as ``--model`` loads it)."""

from __future__ import annotations

from ..stream_arguments import pretrained_of, stream_options

#: the flags of the language-model family, which no CLIP run takes
TEXT_FLAGS = (("--dtype", "dtype"), ("--gradient-checkpointing", "gradient_checkpointing"), ("--fsdp", "fsdp"),
              ("--preset", "preset"))


def check_clip_arguments(args, options=None) -> None:
    """A CLIP run's command line: the language-model flags (:data:`TEXT_FLAGS`) refused."""
    for flag, name in TEXT_FLAGS:
        if getattr(args, name, None):
            raise ValueError(f"{flag} is for the text benchmarks (lm-cl, trace, superni, synthetic-text); "
                             f"leave it out for --benchmark {args.benchmark}")


def clip_run_plugins(args) -> list:
    """The plugins a CLIP run's switches add to every strategy: ``--compile-eval``
    (:class:`~moram_avalanche.strategies.clip.plugins.compiled_eval.CompiledEvaluation`)."""
    if not getattr(args, "compile_eval", False):
        return []
    from ...strategies.clip.plugins.compiled_eval import CompiledEvaluation

    return [CompiledEvaluation()]


def clip_model_loader(args, device: str):
    """``() -> (CLIP, train transform, eval transform, tokenizer)`` of ``--model`` / ``--pretrained``
    on ``device`` (:func:`~moram_avalanche.clip.load.load_clip`: the package's own models too, the
    demo's tiny CLIP ``--model moram-synthetic-tiny``). Weights the package makes (``--pretrained
    synthetic`` of the tiny CLIP) are cached in ``--cache-dir``; open_clip's downloads stay in
    open_clip's cache."""
    check_clip_arguments(args)

    def load():
        from ...clip.load import load_clip  # looked up when the model is loaded
        from ...clip.registry import resolve_pretrained

        pretrained = None if pretrained_of(args).lower() == "none" else pretrained_of(args)
        pretrained = resolve_pretrained(args.model, pretrained, args.cache_dir)
        return load_clip(args.model, pretrained=pretrained or None, device=device, weights_origin=args.weights_origin)

    return load


def clip_benchmark_builder(args):
    """``(train_transform, eval_transform) -> benchmark`` of an image ``--benchmark``
    (``--no-augment``: the evaluation transform for training too)."""
    from ...benchmarks import get_benchmark

    builder, options = get_benchmark(args.benchmark), stream_options(args)
    return lambda train_tf, eval_tf: builder(
        args.data_root, train_transform=eval_tf if args.no_augment else train_tf, eval_transform=eval_tf,
        **options)


__all__ = ["TEXT_FLAGS", "check_clip_arguments", "clip_benchmark_builder", "clip_model_loader", "clip_run_plugins"]
