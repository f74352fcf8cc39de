"""TRACE (BeyonderXX/TRACE): eight generation tasks for continual learning of chat models.

Facts (reference ``language_models.md``): per task ``train.json``, ``eval.json`` and
``test.json``, each a JSON list of ``{"prompt", "answer"}``; TRACE's order C-STANCE, FOMC,
MeetingBank, Py150, ScienceQA, NumGLUE-cm, NumGLUE-ds, 20Minuten. The paper's TRACE table
reports OP and BWT (:func:`~.metrics.op_bwt`) on LLaMA-2-7B-Chat, Gemma-2B-it and
LLaMA-3-1B-Instruct, scored as the MoRAM release scores them (:data:`TRACE_METRICS`,
:mod:`.metrics`):

* C-STANCE, FOMC: the option letter read from the answer (``inference/infer_multi_command.py``),
  then TRACE's prefix accuracy; their answers are the letters A, B, C (:attr:`label_words`);
* ScienceQA: the first character of prediction and answer (``evaluations/eval_ScienceQA.py``);
  its answers are ``"B\n<reasoning>"``, so comparing the whole answer scores a right letter
  with other reasoning 0;
* NumGLUE-cm / -ds: the release's number extraction (``evaluations/qwen_math_parser.py``);
* MeetingBank: ROUGE-L (pltrdy ``rouge``); Py150: ``fuzz.ratio`` after the literal
  placeholders are resolved (``evaluations/eval_Py150.py``); 20Minuten: SARI.

How a long prompt is cut (the release's ``utils/data/data_collator.py``): every task keeps its
prompt's end (the tokenizer truncates on the left, ``utils/utils.py``, asserted in
``training/main.py``) except MeetingBank, which keeps the beginning of its transcript ("Write a
summary ...") up to its own limit of :data:`MEETINGBANK_PROMPT_TOKENS` tokens
(``--meetingbank_max_prompt_len``). Each task also knows the instruction its prompts start with
and how TRACE's in-context examples are laid out (:data:`TRACE_INSTRUCTIONS`,
:data:`TRACE_ICL`; ``inference/ICL.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping, Optional, Sequence, Tuple

from ..readers import DataError
from .stream import ICLFormat, TextStreamTask, text_benchmark
from .tasks import FIX, LAYOUT_TEXT, TextTask, find_task_dir, pair_problem, read_json_list, report_line

#: TRACE's task order
TRACE_ORDER: Tuple[str, ...] = ("C-STANCE", "FOMC", "MeetingBank", "Py150", "ScienceQA", "NumGLUE-cm",
                                "NumGLUE-ds", "20Minuten")
#: task -> its metric's name in :data:`~.metrics.TEXT_METRICS` (the release's scoring, module docstring)
TRACE_METRICS: Mapping[str, str] = {
    "C-STANCE": "option_letter", "FOMC": "option_letter", "MeetingBank": "rouge_l", "Py150": "code_similarity",
    "ScienceQA": "answer_letter", "NumGLUE-cm": "math_accuracy", "NumGLUE-ds": "math_accuracy", "20Minuten": "sari",
}
#: the answers of TRACE's choice tasks (the option letters; ``infer_multi_command.py``)
TRACE_LABEL_WORDS: Mapping[str, Tuple[str, ...]] = {"C-STANCE": ("A", "B", "C"), "FOMC": ("A", "B", "C")}
#: MeetingBank's own prompt limit, its head kept (the release's ``--meetingbank_max_prompt_len``
#: default, ``training/main.py`` and ``inference/infer_part.py``)
MEETINGBANK_PROMPT_TOKENS = 4096
#: task -> how its long prompts are cut when it is not the model's way (the end kept)
TRACE_PROMPT_CUTS: Mapping[str, dict] = {"MeetingBank": {"prompt_limit": MEETINGBANK_PROMPT_TOKENS, "keep": "head"}}
#: task -> the instruction its prompts start with (the release's ``inference/ICL.py``, ``TASK_PROMT``;
#: Py150's prompts start with the code itself)
TRACE_INSTRUCTIONS: Mapping[str, str] = {
    "C-STANCE": "判断以下文本对指定对象的态度，选择一项：A.支持，B.反对，C.中立。输出A，B或者C。\n",
    "FOMC": "What is the monetary policy stance for the following text? A. dovish, B. hawkish, C. neutral. "
            "Choose one from A, B and C.\n",
    "MeetingBank": "Write a summary of the following meeting transcripts.\n",
    "Py150": "",
    "ScienceQA": "Choose an answer for the following question and give your reasons.\n\n",
    "NumGLUE-cm": "Solve the following math problem.\n",
    "NumGLUE-ds": "Solve the following math problem.\n",
    "20Minuten": "Provide a simplified version of the following paragraph in German.\n\n",
}
#: the sentence before TRACE's in-context examples (``inference/ICL.py``, ``Constrained_PROMPT``)
ICL_NOTE = "We will give you several examples and you should follow them to accomplish the task.\n Examples:\n"
#: task -> how its in-context examples are laid out (``utils/data/data_collator.py`` with
#: demonstrations): the instruction, the note, the examples; Py150 under "Continue writing the
#: code." with each example and the prompt after "Code:"; MeetingBank without examples
TRACE_ICL: Mapping[str, ICLFormat] = {
    **{name: ICLFormat(TRACE_INSTRUCTIONS[name], note=ICL_NOTE) for name in TRACE_INSTRUCTIONS},
    "Py150": ICLFormat("Continue writing the code.\n", "Code:\n", note=ICL_NOTE),
    "MeetingBank": ICLFormat(TRACE_INSTRUCTIONS["MeetingBank"], demonstrations=False),
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
            problem = pair_problem(item["prompt"], item["answer"], task.metric)
            if problem:
                raise DataError(name, f"item {index} of {path} cannot be used: {problem}", status="malformed",
                                layout=LAYOUT_TEXT["trace"], fix=FIX["trace"])
            pairs.append((item["prompt"], item["answer"]))
        if not pairs:
            raise DataError(name, f"{path} holds no examples", status="malformed",
                            layout=LAYOUT_TEXT["trace"], fix=FIX["trace"])
        splits[split] = tuple(pairs[:limit] if limit else pairs)
    return TextStreamTask(name, splits["train"], splits["test"], TRACE_LABEL_WORDS.get(name, ()), task.metric,
                          instruction=TRACE_INSTRUCTIONS[name], icl=TRACE_ICL[name], **TRACE_PROMPT_CUTS.get(name, {}))


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
    """One :class:`~.tasks.TextTaskReport` per TRACE task under ``root`` (found with its
    counts, or missing / malformed with the reader's message naming the file)."""
    from .tasks import TextTaskReport

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


__all__ = ["ICL_NOTE", "MEETINGBANK_PROMPT_TOKENS", "TRACE_ICL", "TRACE_INSTRUCTIONS", "TRACE_LABEL_WORDS",
           "TRACE_PROMPT_CUTS",
           "TRACE_METRICS", "TRACE_ORDER", "TRACE_TASKS", "check_trace_data", "format_trace_report",
           "read_trace_task", "trace"]
