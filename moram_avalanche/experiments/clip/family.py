"""The CLIP family's record: open_clip models on X-TAIL, MTIL and the synthetic stream.

What the app reads of the family (:class:`~moram_avalanche.experiments.family.Family`): its
model from ``--model`` / ``--pretrained`` and its streams from ``--benchmark``
(:func:`~..loaders.clip_model_loader`, :func:`~..loaders.clip_benchmark_builder`), the
paper-style comparison tables (:data:`~moram_avalanche.experiments.tables.PAPER_TABLES`), the
offline demo on a tiny CLIP (:data:`.demo.DEMO`), the paper's CLIP tables as data
(:mod:`.paper_tables` on the streams of :mod:`.protocols`, with :class:`.reproduce.ReproduceSettings`),
which the one pipeline of :mod:`..paper` runs, and its own tools, ``analyze`` and ``cost`` (:mod:`.tools`).
"""

from __future__ import annotations

from ..family import Family, Reproduction
from ..paper.settings import parse_seeds
from ..tables import PAPER_TABLES
from .demo import DEMO
from .loaders import check_clip_arguments, clip_benchmark_builder, clip_model_loader, clip_run_plugins
from .paper_tables import EVERY_TABLE, TABLES
from .reproduce import ReproduceSettings
from .tools import ANALYSIS, COST

#: the flags of the language-model tables, which no CLIP table takes
TEXT_TABLE_FLAGS = (("--dtype", "dtype"), ("--layout", "layout"), ("--gradient-checkpointing", "gradient_checkpointing"))


def reproduce_settings(args) -> ReproduceSettings:
    """:class:`~.reproduce.ReproduceSettings` from ``reproduce``'s command line (the paper's
    model, ViT-B-16 with OpenAI's weights, unless given)."""
    from ...utils.devices import resolve_device
    from ..stream_arguments import default_num_workers

    for flag, name in TEXT_TABLE_FLAGS:
        if getattr(args, name, None):
            raise ValueError(f"{flag} is for the language-model tables; leave it out for {args.table}")
    return ReproduceSettings(
        data_root=args.data_root, out=args.out, seeds=None if args.seeds is None else parse_seeds(args.seeds),
        device=resolve_device(args.device, "--device"), model=args.model or "ViT-B-16",
        pretrained=args.pretrained or "openai", weights_origin=args.weights_origin, ref_images=args.ref_images,
        ref_sentences=args.ref_sentences, iterations=args.iterations, rehearse=args.rehearse,
        num_workers=default_num_workers(args), progress=not args.no_progress)


FAMILY = Family(
    name="clip", model_loader=clip_model_loader, benchmark_builder=clip_benchmark_builder,
    stream_options=lambda benchmark, name=None, preset=None: {},  # the strategies' own settings
    dtype=lambda args: None, tables=PAPER_TABLES, demo=DEMO, check_arguments=check_clip_arguments,
    run_plugins=clip_run_plugins, analysis=ANALYSIS, cost=COST,
    reproduction=Reproduction(specs=TABLES, every=EVERY_TABLE, settings=reproduce_settings,
                              index=("index.md", "The MoRAM paper's CLIP tables, reproduced")),
)

__all__ = ["FAMILY", "reproduce_settings"]
