"""Continual-learning streams, selectable by name: one registered entry per ``--benchmark``.

The registry (:mod:`.registry`): a :class:`~.registry.Benchmark` per name -- its model family,
builder, protocol and ``check-data`` check -- registered by its wing: CLIP's image streams
(:mod:`.images.entries`: ``xtail``, ``mtil`` and ``mtil-5shot`` read from disk, :mod:`.images.streams`,
:mod:`.images.domains`; ``synthetic``, an offline stream, :mod:`.images.synthetic`) and the language
models' text streams, one experience per task with ``(prompt, answer, task)`` items
(:mod:`.text.entries`: ``lm-cl``, the paper's orders 1-6 from O-LoRA's or the MoRAM release's files,
:mod:`.text.stream`, :mod:`.text.tasks`; ``trace``, TRACE's eight tasks, :mod:`.text.trace`;
``superni``, SAPT's fifteen SuperNI tasks, :mod:`.text.superni`; ``codealpaca``, CodeAlpaca-20k
tested on HumanEval, :mod:`.text.codealpaca`; ``synthetic-text``, :mod:`.text.synthetic`), their
metrics in :mod:`.text.metrics`. :func:`~.registry.get_benchmark` gives a name's builder,
:func:`~.registry.benchmark_family` its family, :func:`~.registry.benchmarks` every entry;
``check-data`` reads :mod:`.data_checks`.

Registering and listing import nothing heavy (a builder is imported when a stream is built), and
so does this room: the streams' names below are imported on first use.
"""

from importlib import import_module

from ..utils.moved import keep_names
from . import deprecated
from .images import entries as _images  # noqa: F401  (registers the CLIP family's benchmarks)
from .registry import (
                       Benchmark,
                       DataCheck,
                       benchmark_entry,
                       benchmark_family,
                       benchmarks,
                       describe_benchmarks,
                       get_benchmark,
                       register_benchmark,
                       unregister_benchmark,
)
from .text import entries as _text  # noqa: F401  (registers the language models' benchmarks)

#: public name -> the module that defines it ("module:name" where it is named otherwise there),
#: imported on first use
_STREAMS = {
    "LABEL_SPACES": "images.clip_benchmark", "Domain": "images.clip_benchmark",
    "clip_benchmark": "images.clip_benchmark", "label_offsets": "images.clip_benchmark",
    "BadImageError": "images.datasets", "BadImages": "images.datasets",
    "MTIL_ORDERS": "images.streams", "MTIL_PAPER_SHOTS": "images.streams", "XTAIL_ORDERS": "images.streams",
    "mtil": "images.streams", "mtil_5shot": "images.streams", "xtail": "images.streams",
    "STREAM_OPTIONS": "images.synthetic", "SYNTHETIC_OPTIONS": "images.synthetic",
    "DataError": "readers",
    "codealpaca": "text.codealpaca",
    "TEXT_METRICS": "text.metrics", "exact_match": "text.metrics", "normalize_answer": "text.metrics",
    "op_bwt": "text.metrics",
    "TextStreamTask": "text.stream", "lm_cl": "text.stream", "text_benchmark": "text.stream",
    "SUPERNI_ORDERS": "text.superni", "superni": "text.superni",
    "synthetic_text": "text.synthetic",
    "LM_CL_ORDERS": "text.tasks:ORDERS", "check_text_data": "text.tasks",
    "TRACE_ORDER": "text.trace", "trace": "text.trace",
}


def __getattr__(name: str):
    if name in _STREAMS:
        module, _, attribute = _STREAMS[name].partition(":")
        value = getattr(import_module(f".{module}", __name__), attribute or name)
        globals()[name] = value  # later look-ups skip __getattr__
        return value
    if name in deprecated.TABLES:  # 0.6's tables: read-only views of the registry, for one version
        return deprecated.benchmark_table(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *_STREAMS])


# clip_benchmark and synthetic_text were modules too in 0.6: their old paths must not replace these names
keep_names(__name__)

__all__ = ["Benchmark", "DataCheck", "benchmark_entry", "benchmark_family", "benchmarks", "describe_benchmarks",
           "get_benchmark", "register_benchmark", "unregister_benchmark", *_STREAMS]
