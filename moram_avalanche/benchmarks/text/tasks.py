"""The 15 classification tasks of the language-model CL benchmark, their orders, prompts and files.

Facts (reference ``language_models.md``):

* Orders 1-6 are the MoRAM paper's (``tab:supp_llm_cl_order``): 1-3 the standard four-task
  benchmark (T5-large, LLaMA2-7B; ``tab:llm_cl_main``), 4-6 the 15-task sequences
  (``tab:supp_llm_cl_long``). :data:`ORDERS`.
* Instructions per category are the paper's (``tab:supp_llm_prompt``), which are O-LoRA's
  (``configs/instruction_config.json``); COPA has none: O-LoRA's COPA prompt is the sentence
  (which holds the question and both alternatives) and ``"\nAnswer:"`` only
  (``src/uie_dataset_lora.py``, ``load_COPA_dataset``). :data:`INSTRUCTIONS`.
* Prompt, O-LoRA (``src/uie_dataset_lora.py``): ``instruction + "Option: " + ", ".join(labels)
  + " \n" + sentence + "\nAnswer:"``, prefixed by ``"Task:TC\nDataset:agnews\n"``
  (``src/uie_collator.py``), which every O-LoRA script turns on (``--add_task_name True
  --add_dataset_name True``, ``scripts/order_1.sh`` ... ``long.sh``): :func:`olora_prompt`, on by
  default (``task_prefix=True``). Our instructions end with a newline, so the option list
  starts on its own line.
* Metric: exact match after O-LoRA's normalisation, per task
  (:mod:`~moram_avalanche.benchmarks.text.metrics`).

Two layouts on disk are read (:data:`LAYOUTS`):

``olora``   O-LoRA's ``CL_Benchmark/<category>/<dataset>/{train,dev,test,labels}.json``; each
            split a JSON list of ``{"sentence", "label"}``, ``labels.json`` the label words.
``moram``   the MoRAM release's ``LLM-CL-Benchmark_500/<Task>/{train,eval,test,labels}.json``;
            each split a JSON list of ``{"prompt", "answer"}`` with the prompt already built.
            Task folders are matched case-insensitively against :attr:`TextTask.folders`.

Every problem is a :class:`~moram_avalanche.benchmarks.readers.DataError` naming the task, the
file (and the line and column of bad JSON, or the item of a bad label) and the fix.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from ..readers import DataError, UnreadableJSON, read_json
from .metrics import normalize_answer

LAYOUTS = ("olora", "moram")
LAYOUT_TEXT = {
    "olora": "O-LoRA CL_Benchmark/<category>/<dataset>/{train,dev,test,labels}.json, splits are "
             "JSON lists of {\"sentence\", \"label\"}",
    "moram": "MoRAM release LLM-CL-Benchmark_500/<Task>/{train,eval,test,labels}.json, splits are "
             "JSON lists of {\"prompt\", \"answer\"}",
    "trace": "TRACE LLM-CL-Benchmark_<size>/<Task>/{train,eval,test}.json, splits are JSON lists of "
             "{\"prompt\", \"answer\"}",
}
FIX = {
    "olora": "get CL_Benchmark from O-LoRA's repository (cmnfriend/O-LoRA) and pass that folder",
    "moram": "get LLM-CL-Benchmark_500 from the MoRAM release (Artificer-AI-Lab/MoRAM, TRACE/data) "
             "and pass that folder",
    "trace": "get TRACE's data (BeyonderXX/TRACE, LLM-CL-Benchmark_5000 or _500) and pass that folder",
}
#: the split names of each layout: (training, test)
SPLITS = {"olora": ("train", "test"), "moram": ("train", "test")}


@dataclass(frozen=True)
class TextTask:
    """One classification task: its paper name, O-LoRA category and folder, release folder names."""

    name: str  # the paper's name (tab:supp_llm_cl_order)
    category: str  # O-LoRA's category, which picks the instruction
    olora_dir: str  # folder under CL_Benchmark
    folders: Tuple[str, ...]  # spellings of its folder in the release layout (case-insensitive)
    metric: str = "exact_match"


def _task(name, category, olora_dir, *more):
    leaf = olora_dir.rpartition("/")[2]
    return TextTask(name, category, olora_dir, tuple(dict.fromkeys((name, leaf, *more))))


#: the paper's task name -> :class:`TextTask`
TASKS: Mapping[str, TextTask] = {task.name: task for task in (
    _task("dbpedia", "TC", "TC/dbpedia"),
    _task("amazon", "SC", "SC/amazon"),
    _task("yahoo", "TC", "TC/yahoo"),
    _task("ag", "TC", "TC/agnews", "ag_news", "agnews"),
    _task("mnli", "NLI", "NLI/MNLI"),
    _task("cb", "NLI", "NLI/CB"),
    _task("wic", "WiC", "WiC/WiC"),
    _task("copa", "COPA", "COPA/COPA"),
    _task("qqp", "QQP", "QQP/QQP"),
    _task("boolqa", "BoolQA", "BoolQA/BoolQA", "boolq"),
    _task("rte", "NLI", "NLI/RTE"),
    _task("imdb", "SC", "SC/IMDB"),
    _task("yelp", "SC", "SC/yelp"),
    _task("sst-2", "SC", "SC/SST-2", "sst2"),
    _task("multirc", "MultiRC", "MultiRC/MultiRC"),
)}

#: the paper's task orders (tab:supp_llm_cl_order): 1-3 four tasks, 4-6 fifteen
ORDERS: Mapping[int, Tuple[str, ...]] = {
    1: ("dbpedia", "amazon", "yahoo", "ag"),
    2: ("dbpedia", "amazon", "ag", "yahoo"),
    3: ("yahoo", "amazon", "ag", "dbpedia"),
    4: ("mnli", "cb", "wic", "copa", "qqp", "boolqa", "rte", "imdb", "yelp", "amazon", "sst-2",
        "dbpedia", "ag", "multirc", "yahoo"),
    5: ("multirc", "boolqa", "wic", "mnli", "cb", "copa", "qqp", "rte", "imdb", "sst-2", "dbpedia",
        "ag", "yelp", "amazon", "yahoo"),
    6: ("yelp", "amazon", "mnli", "cb", "copa", "qqp", "rte", "imdb", "sst-2", "dbpedia", "ag",
        "yahoo", "multirc", "boolqa", "wic"),
}

#: category -> instruction (paper tab:supp_llm_prompt = O-LoRA configs/instruction_config.json); a
#: category without one (COPA) is prompted with its sentence alone (module docstring)
INSTRUCTIONS: Mapping[str, str] = {
    "NLI": 'What is the logical relationship between the "sentence 1" and the "sentence 2"? '
           "Choose one from the option.\n",
    "QQP": 'Whether the "first sentence" and the "second sentence" have the same meaning? '
           "Choose one from the option.\n",
    "SC": "What is the sentiment of the following paragraph? Choose one from the option.\n",
    "TC": "What is the topic of the following paragraph? Choose one from the option.\n",
    "BoolQA": "According to the following passage, is the question true or false? "
              "Choose one from the option.\n",
    "MultiRC": "According to the following passage and question, is the candidate answer true "
               "or false? Choose one from the option.\n",
    "WiC": "Given a word and two sentences, whether the word is used with the same sense in "
           "both sentence? Choose one from the option.\n",
}


def olora_prompt(instruction: Optional[str], labels: Sequence[str], sentence: str,
                 prefix: Optional[Tuple[str, str]] = None) -> str:
    """O-LoRA's prompt: instruction, options, sentence, ``"\\nAnswer:"``; without an
    instruction (COPA) the sentence and ``"\\nAnswer:"`` alone.

    ``prefix=(category, dataset)`` adds O-LoRA's ``"Task:<category>\\nDataset:<dataset>\\n"``.
    """
    if instruction is None:
        text = sentence + "\nAnswer:"
    else:
        text = instruction + "Option: " + ", ".join(labels) + " \n" + sentence + "\nAnswer:"
    if prefix is not None:
        text = f"Task:{prefix[0]}\nDataset:{prefix[1]}\n" + text
    return text


def order_tasks(order) -> Tuple[str, ...]:
    """Task names of ``order``: 1-6 (the paper's) or a sequence of task names."""
    return named_order(order, ORDERS, TASKS, "the paper's orders")


def named_order(order, orders: Mapping[int, Tuple[str, ...]], tasks, source: str, stream: str = "") -> Tuple[str, ...]:
    """Task names of ``order`` of a text stream: a number of ``orders`` (``source`` says whose;
    the command line's ``--order 1`` too) or a sequence of distinct names among ``tasks``;
    ``stream`` names the stream in the messages ("SuperNI ")."""
    if isinstance(order, str) and order.isdigit():  # the command line's --order 1
        order = int(order)
    if isinstance(order, int) and not isinstance(order, bool):
        if order not in orders:
            raise ValueError(f"{stream}order must be one of {sorted(orders)} ({source}) or a list "
                             f"of task names, got {order}")
        return orders[order]
    names = (order,) if isinstance(order, str) else tuple(order)
    unknown = [name for name in names if name not in tasks]
    if unknown or not names:
        raise ValueError(f"unknown {stream}task(s) {unknown or list(names)}; tasks: {', '.join(tasks)}")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"task names must be distinct in an order, got {repeated} more than once")
    return names


def pair_problem(prompt: str, answer: str, metric: str = "exact_match") -> Optional[str]:
    """What makes a ``(prompt, answer)`` pair unusable, or None: a prompt with no visible text
    (it tokenizes to nothing, or to the EOS token alone: generation has nothing to continue),
    or a gold answer with none (no prediction can be scored against it: the task's column would
    stay 0); for ``exact_match`` also an answer that O-LoRA's normalisation (lower case, no
    punctuation, :func:`~.metrics.normalize_answer`) makes empty. The one rule every reader
    and :class:`TextStreamTask` apply."""
    if not prompt.strip():
        return (f"its prompt is {'empty' if not prompt else 'whitespace only'} ({prompt[:20]!r}): the model gets "
                "nothing to answer")
    if not answer.strip():
        return (f"its answer is {'empty' if not answer else 'whitespace only'} ({answer[:20]!r}): no prediction "
                "can be scored against it")
    if metric == "exact_match":
        if not normalize_answer(answer):
            return (f"its answer {answer[:40]!r} is empty once exact match normalises it (lower case, punctuation "
                    "dropped): no prediction can be scored against it")
    return None


# --------------------------------------------------------------------------- reading
@dataclass(frozen=True)
class TaskData:
    """One task read from disk: prompts and answers per split, label words, where it was found."""

    task: TextTask
    labels: Tuple[str, ...]
    train: Tuple[Tuple[str, str], ...]  # (prompt, answer)
    test: Tuple[Tuple[str, str], ...]
    folder: Path


def detect_layout(root: Path) -> str:
    """"olora" when ``root`` holds O-LoRA's category folders TC, SC or NLI, else "moram".

    Only the categories that are never a task's name count: the release's task folders QQP,
    COPA, WiC, BoolQA and MultiRC share their names with O-LoRA's other categories.
    """
    return "olora" if any((root / name).is_dir() for name in ("TC", "SC", "NLI")) else "moram"


def find_task_dir(root: Path, task: TextTask, layout: str) -> Path:
    """The task's folder under ``root``; a "missing" DataError listing what was looked for."""
    if layout == "olora":
        candidates = [root / task.olora_dir]
        found = candidates[0] if candidates[0].is_dir() else None
    else:
        spellings = {name.lower() for name in task.folders}
        candidates = [root / name for name in task.folders]
        matches = sorted(p for p in (root.iterdir() if root.is_dir() else ()) if p.is_dir() and p.name.lower() in spellings)
        if len(matches) > 1:
            raise DataError(task.name, f"{len(matches)} folders under {root} match task {task.name!r}: "
                                       f"{', '.join(p.name for p in matches)} (task folders match in any letter "
                                       "case and spelling); which one to read is ambiguous",
                            status="malformed", layout=LAYOUT_TEXT[layout],
                            fix="keep one of them (move or rename the others out of the data root)")
        found = matches[0] if matches else None
    if found is None:
        raise DataError(task.name, f"no folder for task {task.name!r} under {root}", status="missing",
                        expected=" or ".join(str(c) for c in candidates)
                        + (" (any letter case)" if layout == "moram" else ""),
                        layout=LAYOUT_TEXT[layout], fix=FIX[layout])
    return found


def read_json_list(path: Path, task: str, layout: str) -> list:
    """A JSON list from ``path``; a "malformed" DataError with line and column of bad JSON."""
    where = dict(status="malformed", layout=LAYOUT_TEXT[layout], fix=FIX[layout])
    if not path.is_file():
        raise DataError(task, f"missing file {path}", expected=str(path), **where)
    try:
        data = read_json(path)
    except UnreadableJSON as error:
        raise DataError(task, str(error), **where) from None
    if not isinstance(data, list):
        raise DataError(task, f"{path} holds a JSON {type(data).__name__}, expected a list", **where)
    return data


def read_task(root, task: TextTask, layout: str, *, instructions: Optional[Mapping[str, str]] = None,
              task_prefix: bool = True) -> TaskData:
    """Read one task's training and test splits in ``layout`` as (prompt, answer) pairs.

    In the O-LoRA layout prompts are built with :func:`olora_prompt` (``instructions``
    overrides :data:`INSTRUCTIONS` per category; ``task_prefix``, on as in every O-LoRA script,
    adds O-LoRA's "Task:/Dataset:" lines). The release's layout holds its prompts ready and
    they are read verbatim. Every answer must be one of the label words of ``labels.json``.
    """
    root = Path(root).expanduser()
    folder = find_task_dir(root, task, layout)
    where = dict(status="malformed", layout=LAYOUT_TEXT[layout], fix=FIX[layout])
    labels_path = folder / "labels.json"
    labels = read_json_list(labels_path, task.name, layout)
    if not labels or not all(isinstance(label, str) and normalize_answer(label) for label in labels):
        raise DataError(task.name, f"{labels_path} must be a non-empty JSON list of label words, each with "
                                   f"a letter or digit (exact match scores them lower-cased, without "
                                   f"punctuation), got {labels[:5]!r}", **where)
    same = {}
    for label in labels:
        same.setdefault(normalize_answer(label), []).append(label)
    clashes = [words for words in same.values() if len(words) > 1]
    if clashes:
        raise DataError(task.name, f"{labels_path} holds label words that exact match cannot tell apart "
                                   f"(lower-cased, without punctuation): {clashes[0]!r}", **where)
    instruction = {**INSTRUCTIONS, **(instructions or {})}.get(task.category)
    fields = ("sentence", "label") if layout == "olora" else ("prompt", "answer")
    splits = {}
    for split in SPLITS[layout]:
        path = folder / f"{split}.json"
        pairs = []
        for index, item in enumerate(read_json_list(path, task.name, layout)):
            if not isinstance(item, dict) or not all(isinstance(item.get(f), str) for f in fields):
                raise DataError(task.name, f"item {index} of {path} must be an object with string "
                                           f"fields {list(fields)}, got {str(item)[:80]!r}", **where)
            text, answer = item[fields[0]], item[fields[1]]
            problem = pair_problem(text, answer, task.metric)
            if problem:
                raise DataError(task.name, f"item {index} of {path} cannot be used: {problem}", **where)
            if answer not in labels:
                raise DataError(task.name, f"item {index} of {path} has the label {answer!r}, which "
                                           f"is not in {labels_path} ({', '.join(labels)})", **where)
            if layout == "olora":
                prefix = (task.category, task.olora_dir.rpartition("/")[2]) if task_prefix else None
                text = olora_prompt(instruction, labels, text, prefix)
            pairs.append((text, answer))
        if not pairs:
            raise DataError(task.name, f"{path} holds no examples", **where)
        splits[split] = tuple(pairs)
    train_split, test_split = SPLITS[layout]
    return TaskData(task, tuple(labels), splits[train_split], splits[test_split], folder)


@dataclass
class TextTaskReport:
    """What :func:`check_text_data` found for one task."""

    name: str
    status: str  # "found", "missing" or "malformed"
    labels: int = 0
    train: int = 0
    test: int = 0
    folder: str = ""
    message: str = ""

    @property
    def usable(self) -> bool:
        return self.status == "found"


def resolve_layout(root: Path, layout: str) -> str:
    if layout == "auto":
        return detect_layout(root)
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be 'auto' or one of {LAYOUTS}, got {layout!r}")
    return layout


def check_text_data(root, layout: str = "auto", tasks: Sequence[str] = tuple(TASKS)) -> List[TextTaskReport]:
    """One :class:`TextTaskReport` per task of ``tasks`` under ``root``: what a run would find.

    The messages are the readers' (the file, the line and column of bad JSON, the item whose
    label is not in ``labels.json``, how to obtain the data).
    """
    root = Path(root).expanduser()
    if not root.is_dir():
        raise ValueError(f"text data root {root} is not a folder")
    layout = resolve_layout(root, layout)
    reports = []
    for name in order_tasks(tuple(tasks)):
        try:
            data = read_task(root, TASKS[name], layout)
        except DataError as error:
            reports.append(TextTaskReport(name, error.status, message=str(error)))
            continue
        reports.append(TextTaskReport(name, "found", len(data.labels), len(data.train), len(data.test),
                                      str(data.folder)))
    return reports


def report_line(report: TextTaskReport, width: int, found: str) -> str:
    """One task's line of a ``check-data`` report: ``found`` and its folder, or what is wrong."""
    if report.usable:
        return f"  {report.name:<{width}} found      {found} ({report.folder})"
    return f"  {report.name:<{width}} {report.status:<10} {' '.join(report.message.split())}"


def format_text_report(reports: Sequence[TextTaskReport], root) -> str:
    """``check-data --benchmark lm-cl``'s report: one line per task (found with its counts, or
    what is wrong, naming the file), then whether every order can be built."""
    lines = [f"lm-cl in {root} (the 15 classification tasks; orders 1-3 read 4 of them, 4-6 all 15):"]
    lines += [report_line(r, 8, f"{r.labels} labels, {r.train} train, {r.test} test") for r in reports]
    usable = {r.name for r in reports if r.usable}
    ready = [str(order) for order in sorted(ORDERS) if set(ORDERS[order]) <= usable]
    lines.append(f"orders that can be built: {', '.join(ready) if ready else 'none'}")
    return "\n".join(lines)


def read_tasks(root, order=1, layout: str = "auto", **options) -> Tuple[str, Dict[str, TaskData]]:
    """``(layout, {task name: TaskData})`` for every task of ``order``, in order; the first
    problem raises its DataError."""
    root = Path(root).expanduser()
    if not root.is_dir():
        raise ValueError(f"text data root {root} is not a folder")
    layout = resolve_layout(root, layout)
    return layout, {name: read_task(root, TASKS[name], layout, **options) for name in order_tasks(order)}


__all__ = ["format_text_report", "report_line", "FIX", "INSTRUCTIONS", "LAYOUTS", "LAYOUT_TEXT", "ORDERS", "TASKS", "TaskData", "TextTask",
           "TextTaskReport", "check_text_data", "detect_layout", "find_task_dir", "olora_prompt",
           "named_order", "order_tasks", "pair_problem", "read_task", "read_tasks"]
