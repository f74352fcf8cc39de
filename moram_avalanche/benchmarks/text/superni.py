"""SuperNI as SAPT lays it out: fifteen generation tasks of Super-NaturalInstructions in a row
(the MoRAM paper's ``tab:sapt``, T5-large, AP and FT).

Facts from SAPT's repository (circle-hit/SAPT, ACL 2024), read, not copied:

* layout: ``CL_Benchmark/SuperNI/<task>/{train,dev,test}.json``, each file one SuperNI task
  (``Definition``, ``Positive Examples``, ``Instances``, ...); an instance is ``{"id", "input",
  "output"}`` with ``output`` a string or a list of acceptable strings. ``--data-root`` may name
  ``CL_Benchmark`` or its ``SuperNI`` folder. The ``dev`` split (SAPT's checkpoint selection) is
  not read: this library has no dev-based selection.
* order (``gen_script_superni_t5.py``, ``order_idx = 1``, the script's default): :data:`SUPERNI_ORDERS`
  ``[1]``; its order 2 is ``[2]``.
* prompt (``src/cl_dataset.py``, ``load_SuperNI_dataset``, zero-shot mode): ``"Definition: " +
  Definition[0].strip() + "\\n\\n" + "Now complete the following example -\\nInput: " + input +
  "\\nOutput: "``; no "Task:/Dataset:" prefix (``--add_task_name False --add_dataset_name False``).
* an instance none of whose outputs has text is left out (SAPT trains on it with an empty
  target; its own ``task511`` training split holds 6 such of 1,000), counted by ``check-data``.
* answer: an instance with several outputs keeps one drawn at random (``random.randint`` over the
  list, ``cl_dataset.py``), for training and as the test reference alike; here the draw is seeded
  by the stream's seed and the task's name (SAPT's Python ``random`` is seeded by the Trainer's
  ``set_seed``, so which one it picks cannot be reproduced here).
* lengths (``gen_script_superni_t5.py``): source 512, target 50, generation 50 tokens; a longer
  prompt keeps its first 512 tokens (``src/cl_collator.py``, :data:`SUPERNI_KEEP`).
* score: ROUGE-L (``src/compute_metrics.py`` ``rougeL_score``: Google's ``rouge_score``
  ``RougeScorer(['rougeL'], use_stemmer=True)``, F-measure, in percent), metric
  ``"rouge_l_stemmed"`` (:func:`~.metrics.rouge_l_stemmed`); AP and FT of the matrix in
  ``score.py`` (:func:`~.metrics.ap_ft`).
"""

from __future__ import annotations

import logging
import random
import zlib
from pathlib import Path
from typing import List, Mapping, Optional, Sequence, Tuple, Union

from ..readers import DataError, UnreadableJSON, read_json
from .stream import TextStreamTask, capped, text_benchmark
from .tasks import TextTaskReport, named_order, pair_problem, report_line

logger = logging.getLogger(__name__)

#: SAPT's two orders of the fifteen tasks (``gen_script_superni_t5.py``: ``order_idx`` 1, the default, and 2)
SUPERNI_ORDERS: Mapping[int, Tuple[str, ...]] = {
    1: ("task1572_samsum_summary", "task363_sst2_polarity_classification", "task1290_xsum_summarization",
        "task181_outcome_extraction", "task002_quoref_answer_generation", "task1510_evalution_relation_extraction",
        "task639_multi_woz_user_utterance_generation", "task1729_personachat_generate_next",
        "task073_commonsenseqa_answer_generation", "task1590_diplomacy_text_generation",
        "task748_glucose_reverse_cause_event_detection", "task511_reddit_tifu_long_text_summarization",
        "task591_sciq_answer_generation", "task1687_sentiment140_classification", "task875_emotion_classification"),
    2: ("task748_glucose_reverse_cause_event_detection", "task073_commonsenseqa_answer_generation",
        "task1590_diplomacy_text_generation", "task639_multi_woz_user_utterance_generation",
        "task1572_samsum_summary", "task1687_sentiment140_classification", "task591_sciq_answer_generation",
        "task363_sst2_polarity_classification", "task1510_evalution_relation_extraction",
        "task1729_personachat_generate_next", "task181_outcome_extraction",
        "task511_reddit_tifu_long_text_summarization", "task002_quoref_answer_generation",
        "task1290_xsum_summarization", "task875_emotion_classification"),
}
#: the fifteen tasks (order 1's)
SUPERNI_TASKS: Tuple[str, ...] = SUPERNI_ORDERS[1]
#: every task's metric (``src/compute_metrics.py``; ``score.py`` reads ``predict_eval_rougeL_for_<task>``)
SUPERNI_METRIC = "rouge_l_stemmed"
#: SAPT's lengths in tokens (``gen_script_superni_t5.py``: ``--max_source_length 512 --max_target_length 50
#: --generation_max_length 50``)
SUPERNI_LENGTHS = {"max_source_length": 512, "max_target_length": 50, "max_new_tokens": 50}
#: which end of a prompt longer than ``max_source_length`` is kept: its beginning (the definition and
#: the input's start; SAPT's ``src/cl_collator.py`` ``seq2seq_call`` keeps the first 512 tokens)
SUPERNI_KEEP = "head"
#: the splits read: (training, test); ``dev`` is SAPT's checkpoint selection, not read here
SUPERNI_SPLITS = ("train", "test")
LAYOUT = ("SAPT CL_Benchmark/SuperNI/<task>/{train,dev,test}.json, each a SuperNI task file: "
          "{\"Definition\": [text], \"Instances\": [{\"input\": text, \"output\": text or [texts]}, ...]}")
FIX = ("get CL_Benchmark from SAPT's repository (circle-hit/SAPT) and pass CL_Benchmark or "
       "CL_Benchmark/SuperNI as --data-root")


def superni_prompt(definition: str, text: str) -> str:
    """SAPT's zero-shot SuperNI prompt of one instance (``src/cl_dataset.py``, module docstring)."""
    return (f"Definition: {definition.strip()}\n\nNow complete the following example -\n"
            f"Input: {text}\nOutput: ")


def superni_root(data_root) -> Path:
    """The folder that holds the task folders: ``data_root/SuperNI`` when it exists, else ``data_root``."""
    root = Path(data_root).expanduser()
    if not root.is_dir():
        raise ValueError(f"SuperNI data root {root} is not a folder; {FIX}")
    return root / "SuperNI" if (root / "SuperNI").is_dir() else root


def _read_split(root: Path, name: str, split: str, seed: int) -> Tuple[List[Tuple[str, str]], int]:
    """``(prompt, answer)`` pairs of one split, one reference drawn per instance (module docstring),
    and how many instances were dropped because none of their outputs has text."""
    path = root / name / f"{split}.json"
    if not (root / name).is_dir():
        raise DataError(name, f"no folder for task {name!r} under {root}", status="missing",
                        expected=str(root / name), layout=LAYOUT, fix=FIX)
    where = dict(status="malformed", layout=LAYOUT, fix=FIX)
    data = _read_task_file(path, name)
    definition = data.get("Definition")
    if isinstance(definition, list):
        definition = definition[0] if definition else None
    if not isinstance(definition, str) or not definition.strip():
        raise DataError(name, f"{path} has no \"Definition\" text (SAPT's prompt starts with it)", **where)
    instances = data.get("Instances")
    if not isinstance(instances, list) or not instances:
        raise DataError(name, f"{path} holds no \"Instances\" list", **where)
    draw = random.Random(seed * 1_000_003 + zlib.crc32(f"{name}/{split}".encode()))
    pairs, dropped = [], 0
    for index, item in enumerate(instances):
        outputs = item.get("output") if isinstance(item, dict) else None
        outputs = [outputs] if isinstance(outputs, str) else outputs
        if (not isinstance(item, dict) or not isinstance(item.get("input"), str) or not isinstance(outputs, list)
                or not outputs or not all(isinstance(o, str) for o in outputs)):
            raise DataError(name, f"instance {index} of {path} must be an object with a string \"input\" and an "
                                  f"\"output\" string or non-empty list of strings, got {str(item)[:80]!r}", **where)
        usable = [o for o in outputs if o.strip()]
        if not usable:  # SAPT's own files hold a few (task511's train split: 6 of 1,000): no score, no target
            dropped += 1
            continue
        answer = usable[draw.randrange(len(usable))]
        prompt = superni_prompt(definition, item["input"])
        problem = pair_problem(prompt, answer, SUPERNI_METRIC)
        if problem:
            raise DataError(name, f"instance {index} of {path} cannot be used: {problem}", **where)
        pairs.append((prompt, answer))
    if not pairs:
        raise DataError(name, f"{path} holds no instance with an output text", **where)
    return pairs, dropped


def _read_task(root: Path, name: str, seed: int):
    """``(train pairs, test pairs, instances dropped)`` of one task (:data:`SUPERNI_SPLITS`)."""
    (train, dropped_train), (test, dropped_test) = (_read_split(root, name, split, seed) for split in SUPERNI_SPLITS)
    return train, test, dropped_train + dropped_test


def _read_task_file(path: Path, name: str) -> dict:
    if not path.is_file():
        raise DataError(name, f"missing file {path}", status="malformed", expected=str(path), layout=LAYOUT, fix=FIX)
    try:
        data = read_json(path)
    except UnreadableJSON as error:
        raise DataError(name, str(error), status="malformed", layout=LAYOUT, fix=FIX) from None
    if not isinstance(data, dict):
        raise DataError(name, f"{path} must hold one SuperNI task object, got a {type(data).__name__}",
                        status="malformed", layout=LAYOUT, fix=FIX)
    return data


def read_superni_task(data_root, name: str, *, seed: int = 0, train_limit: Optional[int] = None,
                      test_limit: Optional[int] = None) -> TextStreamTask:
    """One SuperNI task's training and test splits (a seeded subset of at most ``*_limit``
    examples each, if given)."""
    if name not in SUPERNI_TASKS:
        raise ValueError(f"unknown SuperNI task {name!r}; SAPT's tasks: {', '.join(SUPERNI_TASKS)}")
    root = superni_root(data_root)
    train, test, dropped = _read_task(root, name, seed)
    if dropped:
        logger.warning("SuperNI task %s: %d instance(s) without any output text left out (no target to learn, "
                       "no reference to score against)", name, dropped)
    return TextStreamTask(name, capped(train, train_limit, seed, name), capped(test, test_limit, seed, name),
                          (), SUPERNI_METRIC, keep=SUPERNI_KEEP)


def superni_order(order: Union[int, str, Sequence[str]]) -> Tuple[str, ...]:
    """The task names of ``order``: 1 or 2 (SAPT's, :data:`SUPERNI_ORDERS`) or a list of task names."""
    return named_order(order, SUPERNI_ORDERS, SUPERNI_TASKS, "SAPT's", stream="SuperNI ")


def superni(data_root, order: Union[int, str, Sequence[str]] = 1, *, seed: int = 0,
            train_limit: Optional[int] = None, test_limit: Optional[int] = None):
    """SAPT's SuperNI stream as an Avalanche text benchmark (one experience per task, metric
    ROUGE-L; module docstring).

    Args:
        data_root: SAPT's ``CL_Benchmark`` folder or its ``SuperNI`` sub-folder.
        order: 1 (SAPT's default) or 2, or a list of task names.
        seed: the draw of one reference per multi-output instance, and the capped subsets'.
        train_limit, test_limit: at most this many examples per task (rehearsals, smoke runs;
            None: every example, as SAPT).
    """
    names = superni_order(order)
    return text_benchmark([read_superni_task(data_root, name, seed=seed, train_limit=train_limit,
                                             test_limit=test_limit) for name in names])


def check_superni_data(root, order: Union[int, Sequence[str]] = 1) -> List[TextTaskReport]:
    """One :class:`~.tasks.TextTaskReport` per task of ``order`` under ``root`` (found with
    its counts, or missing / malformed with the reader's message naming the file)."""
    base = superni_root(root)
    reports = []
    for name in superni_order(order):
        try:
            train, test, dropped = _read_task(base, name, 0)
        except DataError as error:
            reports.append(TextTaskReport(name, error.status, message=str(error)))
            continue
        note = f"{dropped} instance(s) without an output text left out" if dropped else ""
        reports.append(TextTaskReport(name, "found", 0, len(train), len(test), str(base / name), note))
    return reports


def format_superni_report(reports: Sequence[TextTaskReport], root) -> str:
    """``check-data --benchmark superni``'s report: one line per task, then whether the stream can be built."""
    width = max(len(name) for name in SUPERNI_TASKS)
    lines = [f"superni in {root} (SAPT's 15 SuperNI tasks, order 1; metric ROUGE-L):"]
    lines += [report_line(r, width, f"{r.train} train, {r.test} test" + (f"; {r.message}" if r.message else ""))
              for r in reports]
    broken = sum(not r.usable for r in reports)
    lines.append("the SuperNI stream can be built" if not broken else
                 f"the SuperNI stream cannot be built: {broken} task(s) missing or broken")
    return "\n".join(lines)


__all__ = ["SUPERNI_KEEP", "SUPERNI_LENGTHS", "SUPERNI_METRIC", "SUPERNI_ORDERS", "SUPERNI_SPLITS", "SUPERNI_TASKS",
           "check_superni_data", "format_superni_report", "read_superni_task", "superni", "superni_order",
           "superni_prompt", "superni_root"]
