"""Continual-learning streams, selectable by name: CLIP's (``--benchmark``) and text streams.

``xtail``, ``mtil`` and ``mtil-5shot`` read the datasets from disk (:mod:`.images.streams`,
:mod:`.images.domains`); ``synthetic`` draws an offline stream (:mod:`.images.synthetic`). Which protocol
each name is: :data:`BENCHMARK_PROTOCOLS`. Text streams for language models (one experience
per task, ``(prompt, answer, task)`` items): :data:`TEXT_BENCHMARKS` (``lm-cl``, the paper's
orders 1-6 from O-LoRA's or the MoRAM release's files, :mod:`.text.stream`, :mod:`.text.tasks`;
``trace``, TRACE's eight tasks, :mod:`.text.trace`; ``superni``, SAPT's fifteen SuperNI tasks,
:mod:`.text.superni`; ``codealpaca``, CodeAlpaca-20k tested on HumanEval, :mod:`.text.codealpaca`;
``synthetic-text``, :mod:`.text.synthetic`), their metrics in :mod:`.text.metrics`.
"""

from ..utils.moved import keep_names
from ..utils.names import lookup
from .images.clip_benchmark import LABEL_SPACES, Domain, clip_benchmark, label_offsets
from .images.datasets import BadImageError, BadImages
from .images.streams import MTIL_ORDERS, MTIL_PAPER_SHOTS, XTAIL_ORDERS, mtil, mtil_5shot, xtail
from .readers import DataError
from .text.codealpaca import codealpaca
from .text.metrics import TEXT_METRICS, exact_match, normalize_answer, op_bwt
from .text.stream import TextStreamTask, lm_cl, text_benchmark
from .text.superni import SUPERNI_ORDERS, superni
from .text.synthetic import synthetic_text
from .text.tasks import ORDERS as LM_CL_ORDERS
from .text.tasks import check_text_data
from .text.trace import TRACE_ORDER, trace

#: options of the disk-backed streams (``--order``, ``--shots``, ...)
STREAM_OPTIONS = ("order", "shots", "seed", "prompts", "on_bad_image", "test_shots")
#: the ones the synthetic stream takes too (``--order shapes,digits``, ``--data-seed``)
SYNTHETIC_OPTIONS = ("order", "seed")


def _synthetic(data_root=None, **kwargs):
    from .images.synthetic import synthetic

    unsupported = sorted(k for k in kwargs if k in STREAM_OPTIONS and k not in SYNTHETIC_OPTIONS)
    if unsupported:
        raise ValueError(f"the synthetic benchmark takes no {unsupported} options")
    if isinstance(kwargs.get("order"), str):  # one domain
        kwargs["order"] = (kwargs["order"],)
    return synthetic(**kwargs)


#: ``--benchmark`` name -> builder(data_root, train_transform=..., eval_transform=..., ...)
BENCHMARKS = {"synthetic": _synthetic, "xtail": xtail, "mtil": mtil, "mtil-5shot": mtil_5shot}

#: ``--benchmark`` name -> the protocol it is (what help texts and plans say)
BENCHMARK_PROTOCOLS = {
    "xtail": "X-TAIL (RAIL; the MoRAM paper's): 10 domains, 16 shots per class, order 1 by "
             "default, every domain's classes at test",
    "mtil": "MTIL as ZSCL runs it: 11 domains, the full training sets by default, each "
            "domain's own classes at test",
    "mtil-5shot": f"few-shot MTIL, the MoRAM paper's MTIL table (MoE-Adapters' protocol): "
                  f"mtil with {MTIL_PAPER_SHOTS} shots per class",
    "synthetic": "an offline drawn stream of five toy domains (demo, tests)",
}


def _synthetic_text(data_root=None, order=None, *, seed: int = 0, **sizes):
    return synthetic_text(**({} if order is None else {"order": order}), seed=seed, **sizes)


def _lm_cl(data_root, order=1, *, layout: str = "auto", instructions=None, task_prefix: bool = False):
    if isinstance(order, str) and order.isdigit():  # the command line's --order 1
        order = int(order)
    return lm_cl(data_root, order, layout=layout, instructions=instructions, task_prefix=task_prefix)


#: text benchmark name -> builder(data_root, **options): the language-model streams
#: (``(prompt, answer, task)`` items; :mod:`.text.stream`)
TEXT_BENCHMARKS = {"lm-cl": _lm_cl, "trace": trace, "superni": superni, "codealpaca": codealpaca,
                   "synthetic-text": _synthetic_text}

#: ``--benchmark`` name -> the model family it is for ("clip": :data:`BENCHMARKS`, builders
#: ``(data_root, train_transform=..., eval_transform=..., ...)``; "text": :data:`TEXT_BENCHMARKS`,
#: builders ``(data_root, **options)``); the family picks the model loader and the strategies
#: (:data:`moram_avalanche.strategies.registry.FAMILIES`)
BENCHMARK_FAMILIES = {**{name: "clip" for name in BENCHMARKS}, **{name: "text" for name in TEXT_BENCHMARKS}}

BENCHMARK_PROTOCOLS.update({
    "lm-cl": "the standard CL benchmark of language models (O-LoRA's; the MoRAM paper's T5 and LLaMA "
             "tables): --order 1-6 (4 or 15 tasks) from --data-root (CL_Benchmark or the release's files)",
    "trace": "TRACE's eight tasks from --data-root",
    "superni": "SAPT's fifteen SuperNI tasks (the MoRAM paper's tab:sapt; ROUGE-L, AP / FT): --order 1-2 from "
               "--data-root (SAPT's CL_Benchmark)",
    "codealpaca": "one task: CodeAlpaca-20k (code_alpaca_20k.json under --data-root) to train, HumanEval "
                  "(greedy pass@1, generated code run sandboxed) to test",
    "synthetic-text": "an offline drawn text stream of toy classification tasks (language-model tests)",
})


def benchmark_family(name: str) -> str:
    """The model family of benchmark ``name`` (:data:`BENCHMARK_FAMILIES`); a clear error for unknown names."""
    return lookup(BENCHMARK_FAMILIES, name, "benchmark")


def describe_benchmarks() -> str:
    """One line per benchmark name: the protocol it is."""
    return "; ".join(f"{name}: {text}" for name, text in BENCHMARK_PROTOCOLS.items())


def get_benchmark(name: str):
    """The builder registered as ``name`` (an image or a text stream); a clear error for unknown names."""
    return lookup({**BENCHMARKS, **TEXT_BENCHMARKS}, name, "benchmark")


# clip_benchmark and synthetic_text were modules too in 0.6: their old paths must not replace these names
keep_names(__name__)

__all__ = ["BENCHMARKS", "BENCHMARK_FAMILIES",
           "BENCHMARK_PROTOCOLS", "BadImageError", "BadImages", "DataError", "Domain",
           "LABEL_SPACES", "LM_CL_ORDERS", "MTIL_ORDERS", "MTIL_PAPER_SHOTS", "STREAM_OPTIONS", "SYNTHETIC_OPTIONS",
           "SUPERNI_ORDERS", "TEXT_BENCHMARKS", "TEXT_METRICS", "TRACE_ORDER", "TextStreamTask", "XTAIL_ORDERS",
           "benchmark_family", "check_text_data", "clip_benchmark",
           "describe_benchmarks", "exact_match", "get_benchmark", "label_offsets", "lm_cl", "mtil",
           "mtil_5shot", "normalize_answer", "op_bwt", "superni", "synthetic_text", "text_benchmark", "trace", "xtail"]
