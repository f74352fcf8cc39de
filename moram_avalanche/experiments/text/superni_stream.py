"""``superni``: SAPT's fifteen SuperNI tasks as a table's stream (:class:`SuperNIStream`): one run
per order and seed; the columns are SAPT's AP and FT (:data:`SUPERNI_COLUMNS`) of each run's
ROUGE-L matrix. A row whose strategy reads SAPT's pseudo-samples (:func:`reads_pseudo_samples`)
finds them beside ``--data-root``."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from ..paper.results import mean_over_seeds, paper_cell
from .rehearsal import REHEARSAL_TEST, REHEARSAL_TRAIN
from .stream_protocol import TextProtocol, TextStream, model_slug

#: the SuperNI table's columns -> the key of :func:`~moram_avalanche.benchmarks.text.metrics.ap_ft`
SUPERNI_COLUMNS = {"AP": "ap", "FT": "ft"}


def reads_pseudo_samples(strategy: Optional[str]) -> bool:
    """Whether text strategy ``strategy`` takes SAPT's pseudo-samples (a ``pseudo_data_root`` option)."""
    import inspect

    from .recipes import text_strategy_classes

    cls = text_strategy_classes().get(strategy) if strategy else None
    return cls is not None and "pseudo_data_root" in inspect.signature(cls.__init__).parameters


class SuperNIStream(TextStream):
    """``superni``: SAPT's fifteen SuperNI tasks in one of its orders (the table's, order 1), one
    run per seed; the columns are SAPT's AP and FT (:data:`SUPERNI_COLUMNS`) of the run's ROUGE-L
    matrix (``results.json``'s ``matrix``, :func:`~moram_avalanche.benchmarks.text.metrics.ap_ft`),
    each a mean over seeds."""

    benchmark = "superni"

    def columns(self, spec) -> Tuple[str, ...]:
        return tuple(SUPERNI_COLUMNS)

    def protocol(self, spec) -> TextProtocol:
        return TextProtocol(f"superni-{model_slug(spec.model)}",
                            "SAPT's SuperNI stream (15 generation tasks, SAPT's CL_Benchmark/SuperNI; --benchmark "
                            f"superni), order {', '.join(map(str, spec.orders))}; SAPT's prompts, lengths and loop "
                            "(lr 3e-4, 32 prompts per step), one epoch per task; score: ROUGE-L (rouge_score, "
                            "stemmed); AP: mean of the last row, FT: mean forgetting from each task's best (SAPT "
                            "score.py; lower is better)")

    def orders(self, spec) -> Tuple[Optional[int], ...]:
        return spec.orders

    def run_key(self, protocol) -> str:
        return f"superni-order{protocol.order}-{model_slug(protocol.model)}"

    def where(self, protocol) -> str:
        return f"SuperNI order {protocol.order}"

    def record(self, run, settings) -> Dict[str, Any]:
        return {"order": run.protocol.order}

    def build(self, run, settings):
        from ...benchmarks.text.superni import superni

        limits = dict(train_limit=REHEARSAL_TRAIN, test_limit=REHEARSAL_TEST) if settings.rehearse else {}
        return superni(settings.data_root, run.protocol.order, seed=run.seed, **limits)

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

    def problems(self, specs, settings) -> List[str]:
        """SAPT's pseudo-samples of the tasks before the last, when a row of ``specs`` reads them."""
        from ...benchmarks.text.superni import superni_order
        from ...benchmarks.text.superni_pseudo import SAPT_PSEUDO_FOLDER, check_pseudo_data, pseudo_root_beside

        if settings.data_root is None or not any(reads_pseudo_samples(method.strategy) for spec in specs
                                                 for method in spec.methods if method.strategy is not None):
            return []
        found = pseudo_root_beside(settings.data_root)
        if found is None:
            return [f"SAPT's pseudo-samples (the SAPT row): no {'/'.join(SAPT_PSEUDO_FOLDER)} beside "
                    f"{settings.data_root}; put SAPT's repository's generated_data next to its CL_Benchmark"]
        return [f"SAPT's pseudo-samples of {report.name}: {report.status} -- {' '.join(report.message.split())}"
                for spec in specs for order in spec.orders
                for report in check_pseudo_data(found, superni_order(order)[:-1]) if not report.usable]

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
            cell = paper_cell(paper_row, column)
            if reports is not None:
                mean_over_seeds(cell, [ap_ft(reports[run]["matrix"])[SUPERNI_COLUMNS[column]] for run in runs])
            cells[column] = cell
        return cells


__all__ = ["SUPERNI_COLUMNS", "SuperNIStream", "reads_pseudo_samples"]
