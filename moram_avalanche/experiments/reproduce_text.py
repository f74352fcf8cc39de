"""``moram-avalanche reproduce t5-standard | t5-long | llama-standard``: the paper's
language-model classification tables, from one command.

=====================  ==========================  ===========  ====================================
table (``TABLE``)      paper                       model        stream
=====================  ==========================  ===========  ====================================
``t5-standard``        ``tab:llm_cl_main``         T5-large     ``lm-cl`` orders 1-3 (four tasks)
``t5-long``            ``tab:supp_llm_cl_long``    T5-large     ``lm-cl`` orders 4-6 (fifteen tasks)
``llama-standard``     ``tab:llama``               LLaMA2-7B    ``lm-cl`` orders 1-3
``trace``              ``tab:llm_cl``              3 chat LMs   ``trace`` (8 tasks), 3 seeds, OP/BWT
=====================  ==========================  ===========  ====================================

Each cell is the average accuracy (exact match) over every task after the last one (the
paper's metric for these tables; OP in TRACE's words) of one run: one strategy on one order.
The "Average" column is the mean over the three orders. Every runnable row runs through the
same path as any comparison (:func:`~moram_avalanche.experiments.compare.run_comparison`, one
resumable folder per run, ``<out>/runs/lm-cl-order<k>-<model>/seed<s>/<strategy>``) with the
strategy's own defaults, which are the paper's LLM setting (lr 1e-3, batch 64, one epoch per
task: :data:`~moram_avalanche.strategies.text_loop.PAPER_TEXT_LOOP`; MoRAM r 8, k 4, tau 0.1,
delta 0.2, dropout 0.1 on the query and key projections: :data:`moram_avalanche.text.PAPER_LLM_OPTIONS`).
The tables are written by the same report as the CLIP tables
(:mod:`~moram_avalanche.experiments.reproduce_report`): ``table.md`` (ours, paper, Δ),
``table.csv``, ``table.png``, ``reproduction.json`` and a TensorBoard entry.

Replay, EWC, LwF and GEM run as Avalanche's own strategies on the text loop
(``avalanche.replay``, ``avalanche.ewc``, ``avalanche.lwf``, ``avalanche.gem``:
:mod:`~moram_avalanche.strategies.text_builtins`) with Avalanche's defaults and those of its
examples for the arguments it requires (the MoRAM paper does not give its settings); on TRACE
the full fine-tuning rows take TRACE's own recipe (lr 1e-5 and its epochs per task,
``scripts/train_seq_cl.sh``). Every setting a stream or table changes, with its source, is data
in :mod:`~.text_recipes` and printed by ``--dry-run``.

The paper's numbers ship as package data (``paper/t5_standard.csv``, ``t5_long.csv``,
``llama_standard.csv``). This package transcribes the rows its reference gives (MoRAM, O-LoRA,
SeqLoRA, IncLoRA, MTL; see each file's notes); the other baselines of the paper's tables are
listed with an empty paper cell and a note, never with a number from elsewhere.

``--paper`` prints the paper's numbers, ``--dry-run`` the plan, and ``--rehearse`` runs the
whole plan on the real data, capped (:data:`REHEARSAL_TRAIN` training and
:data:`REHEARSAL_TEST` test examples per task, :data:`REHEARSAL_ITERATIONS` steps per task),
with a tiny random-init model of the table's architecture and a word-level tokenizer built from
the capped stream (:mod:`moram_avalanche.text.tiny`), so a missing file or a crash shows in
minutes, offline, before a GPU-day.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..utils.names import lookup
from .paper_numbers import PaperNumbers, load_paper_numbers
from .paper_tables import NOT_IN_LIBRARY, Method, find_method
from .reproduce_plan import REHEARSAL_ITERATIONS, ReproductionSettings
from .seeding import RELEASE_SEED

#: rehearsals: examples per task (training, test); the steps per task are the CLIP tables'
#: (:data:`~.reproduce_plan.REHEARSAL_ITERATIONS`)
REHEARSAL_TRAIN = 8
REHEARSAL_TEST = 4
#: rehearsals: generated tokens per answer (the longest label word of the 15 tasks is two words)
REHEARSAL_NEW_TOKENS = 4

_PROMPT_BASED = f"{NOT_IN_LIBRARY} (prompt-based)"
#: the TRACE table's columns -> the key of each run's ``results.json``: the paper's OP and BWT, and
#: beside them the BWT the release prints (``TRACE/inference/collect_results.py``; no paper number)
TRACE_COLUMNS = {"OP": "op", "BWT": "bwt", "BWT (release)": "release_bwt"}


def _methods(*extra: Method, long: bool = False) -> Tuple[Method, ...]:
    """The T5 tables' methods: how each label of the paper runs here."""
    base = [Method("MTL", "mtl"), Method("SeqFT", "finetune"), Method("SeqLoRA", "seq-lora"),
            Method("IncLoRA", "inc-lora"), Method("Replay", "avalanche.replay"),
            Method("EWC", "avalanche.ewc"), Method("LwF", "avalanche.lwf"),
            Method("L2P", None, reason=_PROMPT_BASED), Method("LFPT5", None, reason=_PROMPT_BASED)]
    if not long:
        base.append(Method("InfLoRA", None, reason=f"{NOT_IN_LIBRARY} for language models (the CLIP "
                           "family has it)"))
    base += [Method("O-LoRA", "o-lora"), Method("LB-CL", None, reason=NOT_IN_LIBRARY), Method("MoRAM", "moram")]
    return tuple(base) + extra


@dataclass(frozen=True)
class TextProtocol:
    """The stream of a text table (what the report prints as its protocol)."""

    key: str
    description: str


def _paper_cell(paper_row, column: str):
    """A :class:`~.reproduce_report.Cell` holding the paper's number of ``column`` (if any)."""
    from .reproduce_report import Cell

    cell, paper = Cell(), paper_row.cell(column)
    if paper is not None:
        cell.paper, cell.paper_std = paper.mean, paper.std
    return cell


def _mean_over_seeds(cell, values) -> None:
    """``cell`` holds the mean (and sample std) of ``values``, one per seed, when every one is there."""
    if values and all(v is not None for v in values):
        cell.ours, cell.seeds = float(np.mean(values)), len(values)
        cell.ours_std = float(np.std(values, ddof=1)) if len(values) > 1 else None


class TextStream:
    """How a language-model table's runs read their stream: a protocol of the text family, by
    ``--benchmark`` name (:data:`TEXT_STREAMS`). The table, its plan and its report ask it, so no
    code branches on the stream's name."""

    #: the ``--benchmark`` name of the stream
    benchmark = ""
    #: whether the data has a layout to choose (``--layout``)
    has_layout = False

    def columns(self, spec) -> Tuple[str, ...]:
        raise NotImplementedError

    def protocol(self, spec) -> TextProtocol:
        raise NotImplementedError

    def orders(self, spec) -> Tuple[Optional[int], ...]:
        """The orders a method runs on, one run each (None: the stream's one order)."""
        return (None,)

    def run_key(self, run) -> str:
        """The folder name of a run's protocol."""
        raise NotImplementedError

    def where(self, run) -> str:
        """A run's order, in words."""
        raise NotImplementedError

    def record(self, run, settings) -> Dict[str, Any]:
        """The stream part of a run's record."""
        raise NotImplementedError

    def build(self, run, settings):
        """The run's benchmark (capped in a rehearsal)."""
        raise NotImplementedError

    def plan_lines(self, spec) -> List[str]:
        """What ``--dry-run`` says of the stream of ``spec``."""
        return []

    def task_reports(self, specs, settings) -> list:
        """``check-data``'s reports of every task ``specs`` read."""
        raise NotImplementedError

    def cells(self, spec, paper_row, runs, reports) -> Dict[str, Any]:
        """``{column: Cell}`` of a row: the paper's numbers, and ours from ``reports`` (``{run:
        results.json}``; None when the row did not run)."""
        raise NotImplementedError


class LmClStream(TextStream):
    """``lm-cl``: the standard CL benchmark of language models, one run per order; a cell is the
    average accuracy after the last task (:func:`cell_of`), the last column their mean."""

    benchmark = "lm-cl"
    has_layout = True

    def columns(self, spec) -> Tuple[str, ...]:
        return (*(f"Order {order}" for order in spec.orders), "Average")

    def protocol(self, spec) -> TextProtocol:
        from ..benchmarks.text_tasks import ORDERS

        orders = "; ".join(f"order {o}: {', '.join(ORDERS[o])}" for o in spec.orders)
        return TextProtocol(f"lm-cl-{_slug(spec.model)}",
                            f"the standard CL benchmark of language models (O-LoRA's CL_Benchmark or the "
                            f"release's LLM-CL-Benchmark; --benchmark lm-cl), {orders}; one epoch per task; "
                            f"cell: average exact-match accuracy over every task after the last (%)")

    def orders(self, spec) -> Tuple[Optional[int], ...]:
        return spec.orders

    def run_key(self, run) -> str:
        return f"lm-cl-order{run.order}-{_slug(run.model)}"

    def where(self, run) -> str:
        return f"order {run.order}"

    def record(self, run, settings) -> Dict[str, Any]:
        return {"order": run.order, "layout": settings.layout, "task_prefix": True}

    def build(self, run, settings):
        from ..benchmarks.text_stream import lm_cl

        limits = dict(train_limit=REHEARSAL_TRAIN, test_limit=REHEARSAL_TEST) if settings.rehearse else {}
        return lm_cl(settings.data_root, run.order, layout=settings.layout, seed=run.seed, **limits)

    def plan_lines(self, spec) -> List[str]:
        from ..benchmarks.text_tasks import ORDERS

        return [f"  order {order}: {', '.join(ORDERS[order])}" for order in spec.orders]

    def task_reports(self, specs, settings) -> list:
        from ..benchmarks.text_tasks import ORDERS, check_text_data

        wanted = list(dict.fromkeys(task for spec in specs for order in spec.orders for task in ORDERS[order]))
        return check_text_data(settings.data_root, settings.layout, wanted) if wanted else []

    def cells(self, spec, paper_row, runs, reports) -> Dict[str, Any]:
        cells, order_means = {}, []
        for column, order in zip(spec.columns, (*spec.orders, None)):
            cell = _paper_cell(paper_row, column)
            if reports is not None:
                if order is None:  # the mean over the orders (of the per-order means)
                    values = order_means if len(order_means) == len(spec.orders) else []
                    cell.ours = float(np.mean(values)) if values else None
                    cell.seeds = min((c.seeds for c in cells.values()), default=0)
                else:
                    _mean_over_seeds(cell, [cell_of(reports[run]) for run in runs if run.order == order])
                    if cell.ours is not None:
                        order_means.append(cell.ours)
            cells[column] = cell
        return cells


class TraceStream(TextStream):
    """``trace``: TRACE's eight tasks in TRACE's order, one run; its columns are the paper's OP
    and BWT and the release's BWT (:data:`TRACE_COLUMNS`), each a mean over seeds."""

    benchmark = "trace"

    def columns(self, spec) -> Tuple[str, ...]:
        return tuple(TRACE_COLUMNS)

    def protocol(self, spec) -> TextProtocol:
        from ..benchmarks.text_trace import TRACE_METRICS, TRACE_ORDER

        return TextProtocol("trace", "TRACE (8 tasks in TRACE's order: " + ", ".join(
            f"{t} ({TRACE_METRICS[t]})" for t in TRACE_ORDER) + "; --benchmark trace); the paper's TRACE "
            "setting (lr 5e-4, batch 4, context 1024, bf16; MoRAM r 16, k 16, tau 0.03, delta 0.2) with the "
            "release's decoding and q, k, v, o targets; "
            "OP: mean of the last row, BWT: mean forgetting of the earlier tasks (lower is better)")

    def run_key(self, run) -> str:
        return f"trace-{_slug(run.model)}"

    def where(self, run) -> str:
        return "TRACE"

    def record(self, run, settings) -> Dict[str, Any]:
        return {"order": "TRACE"}

    def build(self, run, settings):
        from ..benchmarks.text_trace import trace

        return trace(settings.data_root, limit=REHEARSAL_TRAIN if settings.rehearse else None)

    def plan_lines(self, spec) -> List[str]:
        return [f"  stream: {spec.protocol.description}"]

    def task_reports(self, specs, settings) -> list:
        from ..benchmarks.text_trace import check_trace_data

        return check_trace_data(settings.data_root)

    def cells(self, spec, paper_row, runs, reports) -> Dict[str, Any]:
        cells = {}
        for column in spec.columns:
            cell = _paper_cell(paper_row, column)
            if reports is not None:
                _mean_over_seeds(cell, [reports[run].get(TRACE_COLUMNS[column]) for run in runs])
            cells[column] = cell
        return cells


#: ``--benchmark`` name -> how a table's runs read that stream (the text family's protocols)
TEXT_STREAMS: Dict[str, TextStream] = {stream.benchmark: stream for stream in (LmClStream(), TraceStream())}


def text_stream(benchmark: str) -> TextStream:
    """The protocol record of text stream ``benchmark`` (:data:`TEXT_STREAMS`)."""
    return lookup(TEXT_STREAMS, benchmark, "text stream")


@dataclass(frozen=True)
class TextTableSpec:
    """One language-model table of the paper and how to regenerate it.

    Attributes:
        name, label, title, paper: the ``reproduce`` name, the paper's label, its caption, the
            shipped numbers' file.
        model: the Hugging Face name of the paper's model (``--model`` overrides it with a name
            or a local folder).
        architecture: "t5" or "llama": the family of the rehearsal's tiny model.
        dtype: the weights' dtype (``--dtype`` overrides it).
        orders: the ``lm-cl`` orders, one column each.
        methods: how each method label is run.
        seeds: the default seeds (the paper does not give its own; 42, the release's).
    """

    name: str
    label: str
    title: str
    paper: str
    model: str
    architecture: str
    dtype: str
    orders: Tuple[int, ...]
    methods: Tuple[Method, ...]
    seeds: Tuple[int, ...] = (RELEASE_SEED,)
    erratum: str = ""
    notes: Tuple[str, ...] = field(default_factory=tuple)
    decimals: int = 1
    layout: str = "summary"
    benchmark: str = "lm-cl"
    #: TRACE: ``(block, model, architecture)`` per block of the paper's table (one model each)
    blocks: Tuple[Tuple[str, str, str], ...] = ()

    @property
    def stream(self) -> "TextStream":
        """How the table's runs read their stream (:data:`TEXT_STREAMS`, by :attr:`benchmark`)."""
        return text_stream(self.benchmark)

    @property
    def columns(self) -> Tuple[str, ...]:
        return self.stream.columns(self)

    @property
    def protocol(self) -> TextProtocol:
        return self.stream.protocol(self)

    def block_model(self, block: str) -> Tuple[str, str]:
        """``(model, architecture)`` of a block (the table's one model outside TRACE)."""
        for name, model, architecture in self.blocks:
            if name == block:
                return model, architecture
        return self.model, self.architecture

    def paper_numbers(self) -> PaperNumbers:
        return load_paper_numbers(self.paper)

    def table_rows(self) -> Tuple[Tuple[str, str], ...]:
        return tuple((row.block, row.method) for row in self.paper_numbers().rows)

    def table_columns(self) -> Tuple[str, ...]:
        return self.columns

    def method(self, label: str) -> Method:
        return find_method(self.methods, label, self.name)


def _slug(model: str) -> str:
    return Path(model.rstrip("/")).name.lower().replace("_", "-")


_T5_NOTES = ("MTL is joint training on every task seen (the upper bound); its last row is joint "
             "training on all four / fifteen tasks, so the paper gives one number for the three orders.",
             "The paper does not give its seeds; ours is 42 (the release's).",
             "Rows marked \"no number transcribed\": this package ships the rows its reference gives "
             "(MoRAM, O-LoRA and MTL; on orders 1-3 also SeqLoRA and IncLoRA), never a number from "
             "elsewhere; read the paper's table for the others.")

_TRACE_METHODS = (
    Method("FIX (ICL)", "icl"),
    Method("SeqLoRA", "seq-lora"), Method("OGD", None, reason=NOT_IN_LIBRARY),
    Method("GEM", "avalanche.gem"), Method("EWC", "avalanche.ewc"),
    Method("L2P", None, reason=_PROMPT_BASED), Method("DualPrompt", None, reason=_PROMPT_BASED),
    Method("HiDeLoRA", None, reason=NOT_IN_LIBRARY), Method("O-LoRA", "o-lora"),
    Method("TreeLoRA", None, reason=NOT_IN_LIBRARY), Method("MoRAM", "moram"))

TEXT_TABLES: Dict[str, TextTableSpec] = {spec.name: spec for spec in (
    TextTableSpec("t5-standard", "tab:llm_cl_main",
                  "Standard CL benchmark, T5-large, orders 1-3: average accuracy after the last task (%)",
                  "t5_standard", "t5-large", "t5", "float32", (1, 2, 3), _methods(), notes=_T5_NOTES),
    TextTableSpec("t5-long", "tab:supp_llm_cl_long",
                  "Long sequences (15 tasks), T5-large, orders 4-6: average accuracy after the last task (%)",
                  "t5_long", "t5-large", "t5", "float32", (4, 5, 6), _methods(long=True), decimals=2,
                  notes=_T5_NOTES),
    TextTableSpec("llama-standard", "tab:llama",
                  "Standard CL benchmark, LLaMA2-7B, orders 1-3: average accuracy after the last task (%)",
                  "llama_standard", "meta-llama/Llama-2-7b-hf", "llama", "bfloat16", (1, 2, 3),
                  (Method("O-LoRA", "o-lora"), Method("MoRAM", "moram")),
                  notes=("bf16 weights (a 7B model in float32 needs 28 GB before any activation); "
                         "--dtype float32 gives the full-precision run.",
                         "The paper says LLaMA2-7B; meta-llama/Llama-2-7b-hf is the base model of "
                         "that name (--model takes another name or a local folder).",
                         "The paper does not give its seeds; ours is 42 (the release's).")),
    TextTableSpec("trace", "tab:llm_cl",
                  "TRACE: OP and BWT of chat models after 8 tasks, mean ± std over 3 runs (%)",
                  "trace", "meta-llama/Llama-2-7b-chat-hf", "llama", "bfloat16", (), _TRACE_METHODS,
                  seeds=(RELEASE_SEED, RELEASE_SEED + 1, RELEASE_SEED + 2), decimals=2, benchmark="trace",
                  blocks=(("LLaMA-2-7B-Chat", "meta-llama/Llama-2-7b-chat-hf", "llama"),
                          ("Gemma-2B-it", "google/gemma-2b-it", "llama"),
                          ("LLaMA-3-1B-Instruct", "meta-llama/Llama-3.2-1B-Instruct", "llama")),
                  notes=("Each block runs its own model (--model replaces all three with one name or folder).",
                         "O-LoRA's and TreeLoRA's cells are the paper's means (the release's README prints the same "
                         "values); the paper also gives their std, not transcribed yet. Rows marked \"no number "
                         "transcribed\" are not in this package's transcription: read the paper's table for them.",
                         "The paper does not give its seeds; ours are 42 (the release's), 43 and 44; std is the "
                         "sample standard deviation (n - 1).",
                         "Prompts are passed to the model verbatim, as TRACE's files hold them, with no chat "
                         "template: the release does the same for LLaMA and Gemma (its data collator applies a "
                         "chat template to Qwen3 models only, TRACE/utils/data/data_collator.py). Generation is the "
                         "release's: greedy with repetition penalty 1.2 and no repeated 3-grams "
                         "(TRACE/inference/infer_part.py); answers are scored by the release's rules "
                         "(TRACE/evaluations/eval_*.py, inference/infer_multi_command.py).",
                         "BWT (release) is the figure TRACE/inference/collect_results.py prints (clipped at 0, "
                         "divided by N, negative = forgetting); the paper's BWT is the mean forgetting of the "
                         "earlier tasks (positive = forgetting).",
                         "Rehearsals use a tiny random-init LLaMA for every block (Gemma is LLaMA-shaped).")),
)}

#: the values ``reproduce`` takes for the language-model tables
TEXT_TABLE_NAMES = tuple(TEXT_TABLES)


def get_text_table(name: str) -> TextTableSpec:
    if name not in TEXT_TABLES:
        raise ValueError(f"unknown language-model table {name!r}; known: {', '.join(TEXT_TABLE_NAMES)}")
    return TEXT_TABLES[name]


@dataclass
class TextReproduceSettings(ReproductionSettings):
    """What ``reproduce`` was asked for a language-model table.

    Attributes:
        data_root: O-LoRA's ``CL_Benchmark`` or the release's ``LLM-CL-Benchmark_500`` folder.
        out: where the runs and the tables go. seeds: None: the table's (42).
        device: torch device. model: a Hugging Face name or local folder; None: the table's.
        dtype: the weights' dtype; None: the table's. gradient_checkpointing: recompute
            activations in the backward pass.
        layout: the data layout ("auto", "olora", "moram").
        iterations: a shorter budget per task (smoke runs; not the paper's one epoch).
        rehearse: the whole plan capped, with a tiny model, under ``out/rehearsal``.
        progress: progress bars.
    """

    data_root: Optional[str] = None
    out: str = "runs/reproduce"
    seeds: Optional[Tuple[int, ...]] = None
    device: str = "cpu"
    model: Optional[str] = None
    dtype: Optional[str] = None
    gradient_checkpointing: bool = False
    layout: str = "auto"
    iterations: Optional[int] = None
    rehearse: bool = False
    progress: bool = True

    def model_of(self, spec: TextTableSpec, block: Optional[str] = None) -> str:
        return self.model or (spec.block_model(block)[0] if block else spec.model)

    def dtype_of(self, spec: TextTableSpec) -> str:
        return self.dtype or spec.dtype


@dataclass(frozen=True)
class TextRun:
    """One strategy on one order of one table's model, with one seed."""

    spec_name: str
    model: str
    order: Optional[int]  # None: TRACE's order
    strategy: str
    seed: int
    benchmark: str = "lm-cl"
    architecture: str = "t5"

    @property
    def protocol_key(self) -> str:
        return text_stream(self.benchmark).run_key(self)

    def folder(self, runs_root) -> Path:
        return Path(runs_root) / self.protocol_key / f"seed{self.seed}" / self.strategy


def table_seeds(spec: TextTableSpec, settings: TextReproduceSettings) -> Tuple[int, ...]:
    return settings.seeds if settings.seeds is not None else spec.seeds


def method_runs(spec: TextTableSpec, label: str, settings: TextReproduceSettings,
                block: Optional[str] = None) -> List[TextRun]:
    """The runs of one method (of one block): one per order (TRACE: its one order) and seed
    ([] when the method is not run)."""
    method = spec.method(label)
    if method.strategy is None:
        return []
    architecture = spec.block_model(block)[1] if block else spec.architecture
    orders = spec.stream.orders(spec)
    return [TextRun(spec.name, settings.model_of(spec, block), order, method.strategy, seed, spec.benchmark,
                    architecture)
            for order in orders for seed in table_seeds(spec, settings)]


def plan(specs: Sequence[TextTableSpec], settings: TextReproduceSettings) -> List[Tuple[TextRun, List[str]]]:
    """Every distinct run of ``specs`` with the rows it serves (the two T5 tables share none;
    t5-standard and llama-standard share none: their models differ)."""
    planned: Dict[TextRun, List[str]] = {}
    for spec in specs:
        for block, label in spec.table_rows():
            for run in method_runs(spec, label, settings, block):
                planned.setdefault(run, []).append(f"{spec.name}: {block} / {label}")
    return list(planned.items())


def run_settings_of(run: TextRun) -> list:
    """The :class:`~.text_recipes.Setting` objects of a run: its stream's (TRACE's setting on
    ``trace``; none on ``lm-cl``, whose defaults are the strategies') then its table's (O-LoRA's
    long-sequence lambdas on ``t5-long``), :mod:`~.text_recipes`."""
    from .text_recipes import stream_settings, table_settings

    return stream_settings(run.benchmark, run.strategy) + table_settings(run.spec_name, run.strategy)


def run_options(settings: TextReproduceSettings, run: Optional[TextRun] = None) -> Dict[str, Any]:
    """The strategy options of a run: its stream's and table's settings (:func:`run_settings_of`),
    and the shorter budget of a smoke run or rehearsal."""
    from .text_recipes import as_options

    options: Dict[str, Any] = as_options(run_settings_of(run)) if run is not None else {}
    if settings.budget is not None:
        options["iterations"] = settings.budget
    if settings.rehearse:
        options.update(train_mb_size=4, eval_mb_size=4, max_new_tokens=REHEARSAL_NEW_TOKENS, max_target_length=16)
    return options


def run_settings(run: TextRun, spec: TextTableSpec, settings: TextReproduceSettings) -> Dict[str, Any]:
    """What made the run, stored in its folder and checked when it resumes."""
    stream = text_stream(run.benchmark).record(run, settings)
    if settings.rehearse:
        stream.update(train_limit=REHEARSAL_TRAIN, test_limit=REHEARSAL_TEST)
    return {
        "reproduce": 1, "protocol": run.protocol_key, "benchmark": run.benchmark, "stream": stream,
        "data_root": str(Path(settings.data_root).expanduser().resolve()) if settings.data_root else None,
        "model": "tiny random-init " + run.architecture if settings.rehearse else run.model,
        "dtype": settings.dtype_of(spec), "gradient_checkpointing": settings.gradient_checkpointing,
        "strategy": run.strategy, "seed": run.seed,
        "options": {k: repr(v) for k, v in sorted(run_options(settings, run).items())},
    }


def _benchmark(run: TextRun, settings: TextReproduceSettings):
    return text_stream(run.benchmark).build(run, settings)


def run_setup(run: TextRun, spec: TextTableSpec, settings: TextReproduceSettings):
    """The :class:`~moram_avalanche.experiments.run.Setup` of one run (family "text")."""
    from ..models.language_model import LanguageModel
    from .run import Setup
    from .tables import TEXT_TABLES as LM_TABLES

    def make_model():
        if settings.rehearse:
            from ..text.tiny import tiny_language_model, word_tokenizer

            benchmark = _benchmark(run, settings)
            texts = [text for task in benchmark.tasks for pairs in (task.train, task.test)
                     for pair in pairs for text in pair]
            tokenizer = word_tokenizer(texts)
            model = tiny_language_model(run.architecture, tokenizer, seed=run.seed)
        else:
            from ..text.load import load_language_model

            model, tokenizer = load_language_model(run.model, dtype=settings.dtype_of(spec),
                                                   gradient_checkpointing=settings.gradient_checkpointing)
        return LanguageModel(model.to(settings.device), tokenizer), None, None, tokenizer

    options = run_options(settings, run)
    return Setup(make_model=make_model, make_benchmark=lambda train_tf, eval_tf: _benchmark(run, settings),
                 options=lambda name, eval_tf: dict(options), settings=run_settings(run, spec, settings),
                 seed=run.seed, device=settings.device, family="text", tables=LM_TABLES)


def check_needs(specs: Sequence[TextTableSpec], settings: TextReproduceSettings) -> None:
    """Raise one ValueError naming everything the plan needs that is missing (the data's tasks,
    the model's files); nothing runs before."""
    if settings.data_root is None:
        raise ValueError("reproduce needs the text data: give --data-root DIR (O-LoRA's CL_Benchmark or the "
                         "release's LLM-CL-Benchmark_500; or --paper for the paper's numbers alone, "
                         "--dry-run for the plan)")
    root = Path(settings.data_root).expanduser()
    if not root.is_dir():
        raise ValueError(f"--data-root {root} is not a folder")
    problems = [f"task {r.name}: {r.status} -- {' '.join(r.message.split())}"
                for r in _task_reports(specs, settings) if not r.usable]
    if not settings.rehearse:
        problems += _model_problems(specs, settings)
    if problems:
        raise ValueError(
            f"cannot reproduce {', '.join(s.name for s in specs)}: {len(problems)} thing(s) missing; nothing "
            "was run.\n  " + "\n  ".join(dict.fromkeys(problems)) +
            f"\n`moram-avalanche check-data --benchmark lm-cl --root {root}` details the data; "
            "`reproduce --rehearse` runs the plan with a tiny model and no weights.")


def _model_problems(specs: Sequence[TextTableSpec], settings: TextReproduceSettings) -> List[str]:
    """Every model the tables load, checked as a run checks it before its weights load
    (:func:`~moram_avalanche.text.check.check_language_model`: config, weights' headers and fit,
    tokenizer; a Hub name not in the cache as far as its config)."""
    from ..text.check import check_language_model

    problems = []
    models = {(settings.model_of(spec, block), settings.dtype_of(spec)): None
              for spec in specs for block, _ in spec.table_rows()}
    for model, dtype in models:
        try:
            check_language_model(model, dtype=dtype)
        except (OSError, ValueError) as error:
            problems.append(f"model {model}: {str(error).splitlines()[0]}")
    return list(dict.fromkeys(problems))


def paper_text(specs: Sequence[TextTableSpec]) -> str:
    from .reproduce_report import paper_markdown

    return "\n".join(paper_markdown(spec) for spec in specs)


def plan_text(specs: Sequence[TextTableSpec], settings: TextReproduceSettings) -> str:
    """The plan: the model, the data and what it holds, each table's rows, every run."""
    from .text_recipes import plan_lines

    lines = [f"moram-avalanche reproduce: {', '.join(s.name for s in specs)}"
             + (f" -- REHEARSAL ({REHEARSAL_TRAIN} training and {REHEARSAL_TEST} test examples per task, "
                f"{REHEARSAL_ITERATIONS} steps per task, a tiny random-init model; the numbers mean nothing)"
                if settings.rehearse else ""),
             f"  device: {settings.device}; output: {settings.root}",
             f"  data: {', '.join(dict.fromkeys(spec.benchmark for spec in specs))} under "
             f"{settings.data_root or '<data-root>'}" + (f" (layout {settings.layout})" if any(
                 spec.stream.has_layout for spec in specs) else "") + ": "
             f"{_data_status(specs, settings)}"]
    if settings.budget is not None:
        lines.append(f"  NOT the paper's budget: {settings.budget} steps per task "
                     + ("(rehearsal)" if settings.rehearse else "(--iterations)"))
    for spec in specs:
        seeds = table_seeds(spec, settings)
        blocks = list(dict.fromkeys(block for block, _ in spec.table_rows()))
        models = ", ".join(dict.fromkeys(
            "tiny random-init " + spec.block_model(b)[1] if settings.rehearse else settings.model_of(spec, b)
            for b in blocks))
        lines.append(f"\n{spec.name} ({spec.label}): {spec.title}\n  model: {models} ({settings.dtype_of(spec)}"
                     f"{', gradient checkpointing' if settings.gradient_checkpointing else ''}); seeds "
                     f"{', '.join(map(str, seeds))}")
        lines += spec.stream.plan_lines(spec)
        labels = list(dict.fromkeys(label for _, label in spec.table_rows()))
        for label in labels:
            method = spec.method(label)
            lines.append(f"  {label}: " + (method.strategy if method.strategy else f"not run: {method.reason}"))
        lines += plan_lines(spec.benchmark, spec.name, [spec.method(label).strategy for label in labels
                                                        if spec.method(label).strategy])
    planned = plan(specs, settings)
    lines.append(f"\nruns ({len(planned)}; each resumes from its folder):")
    for run, used_by in planned:
        where = text_stream(run.benchmark).where(run)
        lines.append(f"  {run.strategy}, {where}, seed {run.seed} -> {run.folder(settings.root / 'runs')}"
                     f"  (used by {'; '.join(used_by)})")
    return "\n".join(lines)


def _task_reports(specs: Sequence[TextTableSpec], settings: TextReproduceSettings):
    """``check-data``'s reports of every task the tables read (each stream's, :class:`TextStream`)."""
    return [report for stream, tables in _by_stream(specs).items() for report in stream.task_reports(tables, settings)]


def _by_stream(specs: Sequence[TextTableSpec]) -> Dict["TextStream", List[TextTableSpec]]:
    grouped: Dict[TextStream, List[TextTableSpec]] = {}
    for spec in specs:
        grouped.setdefault(spec.stream, []).append(spec)
    return grouped


def _data_status(specs: Sequence[TextTableSpec], settings: TextReproduceSettings) -> str:
    from ..utils.paths import folder_status

    problem = folder_status(settings.data_root)
    if problem:
        return f"MISSING, {problem}"
    if settings.data_root is None:
        return "not checked (no --data-root given)"
    reports = _task_reports(specs, settings)
    missing = [f"{r.name} ({r.status})" for r in reports if not r.usable]
    return (f"{len(reports) - len(missing)} of {len(reports)} tasks found"
            + (f"; MISSING: {', '.join(missing)}" if missing else ""))


def cell_of(report: dict) -> Optional[float]:
    """A run's cell: the mean accuracy over every task after the last one (``last``)."""
    value = report.get("last")
    return None if value is None or (isinstance(value, float) and np.isnan(value)) else float(value)


def table_result(spec: TextTableSpec, settings: TextReproduceSettings):
    """The table's rows from the finished runs, paired with the paper's numbers."""
    from .reproduce_report import Row, TableResult, read_report

    runs_root = settings.root / "runs"
    rows = []
    for block, label in spec.table_rows():
        method, paper_row = spec.method(label), spec.paper_numbers().row(block, label)
        row = Row(block, label, "run", note=paper_row.note)
        runs = method_runs(spec, label, settings, block)
        row.runs = [str(run.folder(runs_root)) for run in runs]
        reports = {run: read_report(run.folder(runs_root), run.strategy) for run in runs}
        if method.strategy is None:
            row.status, row.reason = "not run", method.reason
        elif any(report is None for report in reports.values()):
            row.status = "incomplete"
            row.reason = f"{sum(r is None for r in reports.values())} of {len(reports)} runs not finished"
        row.cells = spec.stream.cells(spec, paper_row, runs, reports if row.status == "run" else None)
        rows.append(row)
    return TableResult(spec, rows, table_seeds(spec, settings), settings.rehearse, settings.budget)


__all__ = ["REHEARSAL_ITERATIONS", "REHEARSAL_TEST", "REHEARSAL_TRAIN", "TEXT_TABLES", "TEXT_TABLE_NAMES",
           "TextReproduceSettings", "TextRun", "TextTableSpec", "check_needs", "get_text_table", "method_runs",
           "paper_text", "plan", "plan_text", "run_options", "run_setup", "table_result"]
