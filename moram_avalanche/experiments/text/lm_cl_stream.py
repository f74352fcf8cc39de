"""``lm-cl``: the standard CL benchmark of language models as a table's stream
(:class:`LmClStream`): one run per order; a cell is the average accuracy after the last task
(:func:`~.stream_protocol.cell_of`), the table's last column their summary over the orders
(:data:`ORDER_SUMMARIES`)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from ..paper.results import mean_over_seeds, paper_cell
from .rehearsal import REHEARSAL_TEST, REHEARSAL_TRAIN
from .stream_protocol import TextProtocol, TextStream, cell_of, model_slug

#: the summary column of an ``lm-cl`` table (:attr:`~.table_spec.TextTableSpec.summary`) -> whether it
#: holds the sample std (n - 1) over the orders beside their mean: "Average" (``tab:llm_cl_main``, the
#: mean of the orders' cells), "Mean ± std" (``tab:order_robustness``), "" (no summary: ``tab:load_balance``)
ORDER_SUMMARIES = {"Average": False, "Mean ± std": True, "": False}


class LmClStream(TextStream):
    """``lm-cl``: the standard CL benchmark of language models, one run per order; a cell is the
    average accuracy after the last task (:func:`~.stream_protocol.cell_of`), the last column their mean."""

    benchmark = "lm-cl"
    has_layout = True

    def columns(self, spec) -> Tuple[str, ...]:
        return (*(f"Order {order}" for order in spec.orders), *((spec.summary,) if spec.summary else ()))

    def protocol(self, spec) -> TextProtocol:
        from ...benchmarks.text.tasks import ORDERS

        orders = "; ".join(f"order {o}: {', '.join(ORDERS[o])}" for o in spec.orders)
        return TextProtocol(f"lm-cl-{model_slug(spec.model)}",
                            f"the standard CL benchmark of language models (O-LoRA's CL_Benchmark or the "
                            f"release's LLM-CL-Benchmark; --benchmark lm-cl), {orders}; one epoch per task; "
                            f"cell: average exact-match accuracy over every task after the last (%)")

    def orders(self, spec) -> Tuple[Optional[int], ...]:
        return spec.orders

    def run_key(self, protocol) -> str:
        return f"lm-cl-order{protocol.order}-{model_slug(protocol.model)}"

    def where(self, protocol) -> str:
        return f"order {protocol.order}"

    def record(self, run, settings) -> Dict[str, Any]:
        return {"order": run.protocol.order, "layout": settings.layout, "task_prefix": True}

    def build(self, run, settings):
        from ...benchmarks.text.stream import lm_cl

        limits = dict(train_limit=REHEARSAL_TRAIN, test_limit=REHEARSAL_TEST) if settings.rehearse else {}
        return lm_cl(settings.data_root, run.protocol.order, layout=settings.layout, seed=run.seed, **limits)

    def plan_lines(self, spec) -> List[str]:
        from ...benchmarks.text.tasks import ORDERS

        return [f"  order {order}: {', '.join(ORDERS[order])}" for order in spec.orders]

    def task_reports(self, specs, settings) -> list:
        from ...benchmarks.text.tasks import ORDERS, check_text_data

        wanted = list(dict.fromkeys(task for spec in specs for order in spec.orders for task in ORDERS[order]))
        return check_text_data(settings.data_root, settings.layout, wanted) if wanted else []

    def cells(self, spec, paper_row, runs, reports, settings=None) -> Dict[str, Any]:
        """One cell per order (the mean over seeds of :func:`~.stream_protocol.cell_of`), then the
        table's summary column (:data:`ORDER_SUMMARIES`): the mean of the orders' cells, with their
        sample std (n - 1) for ``"Mean ± std"``; filled only when every order's cell is."""
        cells = {}
        for order in spec.orders:
            cell = cells[f"Order {order}"] = paper_cell(paper_row, f"Order {order}")
            if reports is not None:
                mean_over_seeds(cell, [cell_of(reports[run]) for run in runs if run.protocol.order == order])
        if spec.summary:
            cell, per_order = paper_cell(paper_row, spec.summary), [c.ours for c in cells.values()]
            if reports is not None:
                if per_order and all(v is not None for v in per_order):
                    cell.ours = float(np.mean(per_order))
                    if ORDER_SUMMARIES[spec.summary] and len(per_order) > 1:
                        cell.ours_std = float(np.std(per_order, ddof=1))
                cell.seeds = min((c.seeds for c in cells.values()), default=0)
            cells[spec.summary] = cell
        return cells


__all__ = ["LmClStream", "ORDER_SUMMARIES"]
