"""``trace``: TRACE's eight tasks as a table's stream (:class:`TraceStream`): one run per seed, in
TRACE's order; the columns are the paper's OP and BWT and the release's BWT (:data:`TRACE_COLUMNS`)."""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

from ..paper.results import mean_over_seeds, paper_cell
from .rehearsal import REHEARSAL_TRAIN
from .stream_protocol import TextProtocol, TextStream, model_slug

#: the TRACE table's columns -> the key of each run's ``results.json``: the paper's OP and BWT, and
#: beside them the BWT the release prints (``TRACE/inference/collect_results.py``; no paper number)
TRACE_COLUMNS = {"OP": "op", "BWT": "bwt", "BWT (release)": "release_bwt"}


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

    def run_key(self, protocol) -> str:
        return f"trace-{model_slug(protocol.model)}"

    def where(self, protocol) -> str:
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
            cell = paper_cell(paper_row, column)
            if reports is not None:
                mean_over_seeds(cell, [reports[run].get(TRACE_COLUMNS[column]) for run in runs])
            cells[column] = cell
        return cells


__all__ = ["TRACE_COLUMNS", "TraceStream"]
