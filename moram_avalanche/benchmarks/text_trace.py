"""TRACE (BeyonderXX/TRACE): eight generation tasks for continual learning of chat models.

Facts (reference ``language_models.md``): per task ``train.json``, ``eval.json`` and
``test.json``, each a JSON list of ``{"prompt", "answer"}``; TRACE's order C-STANCE, FOMC,
MeetingBank, Py150, ScienceQA, NumGLUE-cm, NumGLUE-ds, 20Minuten; metrics (TRACE
``evaluations/eval_*.py``, ``metrics.py``): accuracy (prefix exact match) for C-STANCE, FOMC,
NumGLUE-cm/ds and ScienceQA (TRACE compares ScienceQA's answer letter; its answers are the
letters, so prefix accuracy reads the same letter), ROUGE-L for MeetingBank, edit similarity
for Py150, SARI for 20Minuten (:mod:`.text_metrics`). The paper's TRACE table reports OP and
BWT (:func:`~.text_metrics.op_bwt`) on LLaMA-2-7B-Chat, Gemma-2B-it and LLaMA-3-1B-Instruct.
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Optional, Sequence, Tuple

from .readers import DataError
from .text_stream import TextStreamTask, text_benchmark
from .text_tasks import FIX, LAYOUT_TEXT, TextTask, find_task_dir, read_json_list, report_line

#: TRACE's task order
TRACE_ORDER: Tuple[str, ...] = ("C-STANCE", "FOMC", "MeetingBank", "Py150", "ScienceQA", "NumGLUE-cm",
                                "NumGLUE-ds", "20Minuten")
#: task -> its metric's name in :data:`~.text_metrics.TEXT_METRICS`
TRACE_METRICS: Mapping[str, str] = {
    "C-STANCE": "accuracy", "FOMC": "accuracy", "MeetingBank": "rouge_l", "Py150": "edit_similarity",
    "ScienceQA": "accuracy", "NumGLUE-cm": "accuracy", "NumGLUE-ds": "accuracy", "20Minuten": "sari",
}
TRACE_TASKS: Mapping[str, TextTask] = {
    name: TextTask(name, "TRACE", "", (name,), TRACE_METRICS[name]) for name in TRACE_ORDER}


def read_trace_task(root, name: str, limit: Optional[int] = None) -> TextStreamTask:
    """One TRACE task's training and test splits (the first ``limit`` examples of each, if given)."""
    task = TRACE_TASKS[name]
    folder = find_task_dir(Path(root).expanduser(), task, "trace")
    splits = {}
    for split in ("train", "test"):
        path = folder / f"{split}.json"
        pairs = []
        for index, item in enumerate(read_json_list(path, name, "trace")):
            if not isinstance(item, dict) or not all(isinstance(item.get(f), str) for f in ("prompt", "answer")):
                raise DataError(name, f"item {index} of {path} must be an object with string fields "
                                      f"['prompt', 'answer'], got {str(item)[:80]!r}", status="malformed",
                                layout=LAYOUT_TEXT["trace"], fix=FIX["trace"])
            pairs.append((item["prompt"], item["answer"]))
        if not pairs:
            raise DataError(name, f"{path} holds no examples", status="malformed",
                            layout=LAYOUT_TEXT["trace"], fix=FIX["trace"])
        splits[split] = tuple(pairs[:limit] if limit else pairs)
    return TextStreamTask(name, splits["train"], splits["test"], (), task.metric)


def trace(data_root, order: Sequence[str] = TRACE_ORDER, *, limit: Optional[int] = None):
    """TRACE as an Avalanche text benchmark (one experience per task, each with its metric).

    ``limit`` keeps the first examples of each split (the paper: 5,000 training and 2,000 test
    examples per task, i.e. ``LLM-CL-Benchmark_5000``).
    """
    root = Path(data_root).expanduser()
    if not root.is_dir():
        raise ValueError(f"TRACE data root {root} is not a folder")
    order = (order,) if isinstance(order, str) else tuple(order)
    unknown = [name for name in order if name not in TRACE_TASKS]
    if unknown or not order:
        raise ValueError(f"unknown TRACE task(s) {unknown or list(order)}; tasks: {', '.join(TRACE_ORDER)}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be a positive int or None, got {limit!r}")
    return text_benchmark([read_trace_task(root, name, limit) for name in order])


def check_trace_data(root, order: Sequence[str] = TRACE_ORDER):
    """One :class:`~.text_tasks.TextTaskReport` per TRACE task under ``root`` (found with its
    counts, or missing / malformed with the reader's message naming the file)."""
    from .text_tasks import TextTaskReport

    root = Path(root).expanduser()
    if not root.is_dir():
        raise ValueError(f"TRACE data root {root} is not a folder")
    reports = []
    for name in order:
        try:
            task = read_trace_task(root, name)
        except DataError as error:
            reports.append(TextTaskReport(name, error.status, message=str(error)))
            continue
        folder = find_task_dir(root, TRACE_TASKS[name], "trace")
        reports.append(TextTaskReport(name, "found", 0, len(task.train), len(task.test), str(folder)))
    return reports


def format_trace_report(reports, root) -> str:
    """``check-data --benchmark trace``'s report: one line per task, then whether the stream can be built."""
    lines = [f"trace in {root} (TRACE's 8 tasks, each with its metric):"]
    lines += [report_line(r, 12, f"{r.train} train, {r.test} test, metric {TRACE_METRICS[r.name]}") for r in reports]
    ready = all(r.usable for r in reports)
    lines.append("the TRACE stream can be built" if ready else
                 f"the TRACE stream cannot be built: {sum(not r.usable for r in reports)} task(s) missing or broken")
    return "\n".join(lines)


__all__ = ["TRACE_METRICS", "TRACE_ORDER", "TRACE_TASKS", "check_trace_data", "format_trace_report",
           "read_trace_task", "trace"]
