"""The language-model family's record: T5, LLaMA and Gemma on the standard CL benchmark, TRACE and
the synthetic text stream.

What the app reads of the family (:class:`~moram_avalanche.experiments.family.Family`): its
model from ``--model`` (a Hugging Face name or a ``save_pretrained`` folder) and its streams from
``--benchmark`` (:func:`~..loaders.text_model_loader`, :func:`~..loaders.text_benchmark_builder`),
the language-model comparison tables (OP, BWT: :data:`~moram_avalanche.experiments.tables.TEXT_TABLES`),
the offline demo on a tiny T5 (:data:`.demo.TEXT_DEMO`) and the paper's language-model tables as
data (:mod:`.paper_tables`, whose streams -- the standard benchmark, TRACE, SuperNI, CodeAlpaca --
are protocol records too: :data:`~.streams.TEXT_STREAMS`; with :class:`.reproduce.TextReproduceSettings`),
which the one pipeline of :mod:`..paper` runs.
"""

from __future__ import annotations

from ..family import Family, Reproduction
from ..paper.settings import parse_seeds
from ..tables import TEXT_TABLES as COMPARISON_TABLES
from .demo import TEXT_DEMO
from .loaders import check_text_arguments, text_benchmark_builder, text_dtype, text_model_loader
from .paper_tables import TEXT_TABLES
from .recipes import shared_stream_options
from .recipes import stream_options as text_stream_options
from .reproduce import TextReproduceSettings

#: the flags of the CLIP tables, which no language-model table takes
CLIP_TABLE_FLAGS = (("--pretrained", "pretrained"), ("--weights-origin", "weights_origin"),
                    ("--ref-images", "ref_images"), ("--ref-sentences", "ref_sentences"))


def reproduce_settings(args) -> TextReproduceSettings:
    """:class:`~.reproduce.TextReproduceSettings` from ``reproduce``'s command line (the table's
    model and dtype unless given)."""
    from ...utils.devices import resolve_device

    for flag, name in CLIP_TABLE_FLAGS:
        if getattr(args, name, None) is not None:
            raise ValueError(f"{flag} is for the CLIP tables; {args.table} takes --model (a Hugging Face name or "
                             "a local folder) and --dtype")
    return TextReproduceSettings(
        data_root=args.data_root, out=args.out, seeds=None if args.seeds is None else parse_seeds(args.seeds),
        device=resolve_device(args.device, "--device"), model=args.model, dtype=args.dtype,
        gradient_checkpointing=args.gradient_checkpointing, layout=args.layout or "auto",
        iterations=args.iterations, rehearse=args.rehearse, progress=not args.no_progress)


def stream_options(benchmark: str, name=None, preset=None) -> dict:
    """What ``benchmark`` sets for strategy ``name`` (with ``preset`` on top; None: for every
    strategy), with its source in :mod:`~.recipes` (TRACE's setting; none on ``lm-cl``)."""
    return shared_stream_options(benchmark) if name is None else text_stream_options(benchmark, name, preset)


FAMILY = Family(
    name="text", model_loader=text_model_loader, benchmark_builder=text_benchmark_builder,
    stream_options=stream_options, dtype=text_dtype, tables=COMPARISON_TABLES, demo=TEXT_DEMO,
    check_arguments=check_text_arguments, data_workers=False,
    reproduction=Reproduction(specs=TEXT_TABLES, settings=reproduce_settings,
                              index=("index_language_models.md", "The MoRAM paper's language-model tables, reproduced")),
)

__all__ = ["FAMILY", "reproduce_settings"]
