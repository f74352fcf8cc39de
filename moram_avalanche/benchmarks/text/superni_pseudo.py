"""SAPT's pseudo-samples of the SuperNI tasks, as SAPT ships them (read, not generated).

What they are: for each task, inputs (and a task definition) that SAPT's own generator wrote --
a model of the earlier tasks asked to produce examples of them -- and that SAPT's repository
ships pre-generated (circle-hit/SAPT ``generated_data/lora_gen_superni_t5/SuperNI/<task>/
{train,dev,test}.json``, each a SuperNI task file: ``Definition`` and ``Instances`` of ``{"input",
"output"}``; in SAPT's files the three splits are the same file, 2 to 20 instances per task, most
outputs empty). SAPT's attentive reflection reads the ``train`` split of each earlier task's file
(``src/run_t5.py``, ``--gen_data_dir``) and uses the inputs only: the loss is on the attention
weights, not on an answer. This library reads those files; it has no generator.

Prompt: the task's SuperNI prompt (:func:`~.superni.superni_prompt`) of the file's own
``Definition`` and each input (SAPT's replay collator, ``--add_instruction_replay``).

``pseudo_data_root`` names ``lora_gen_superni_t5`` or its ``SuperNI`` sub-folder;
:func:`pseudo_root_beside` finds it next to SAPT's ``CL_Benchmark`` as SAPT's repository lays
them out.
"""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional, Sequence

from ..readers import DataError, UnreadableJSON, read_json
from .superni import superni_prompt
from .tasks import TextTaskReport

#: the split SAPT's reflection reads
PSEUDO_SPLIT = "train"
#: where SAPT's repository keeps the T5 SuperNI pseudo-samples, relative to its root
SAPT_PSEUDO_FOLDER = ("generated_data", "lora_gen_superni_t5")
PSEUDO_LAYOUT = ("SAPT generated_data/lora_gen_superni_t5/SuperNI/<task>/train.json, each a SuperNI task file: "
                 "{\"Definition\": [text], \"Instances\": [{\"input\": text, \"output\": ...}, ...]}")
PSEUDO_FIX = ("get generated_data/lora_gen_superni_t5 from SAPT's repository (circle-hit/SAPT) and pass it as "
              "pseudo_data_root")


def pseudo_root(pseudo_data_root) -> Path:
    """The folder holding the task folders: ``root/SuperNI`` when it exists, else ``root``; a
    one-line error when ``root`` is not a folder."""
    root = Path(pseudo_data_root).expanduser()
    if not root.is_dir():
        raise ValueError(f"pseudo_data_root {root} is not a folder: expected SAPT's pseudo-samples "
                         f"({PSEUDO_LAYOUT}); {PSEUDO_FIX}")
    return root / "SuperNI" if (root / "SuperNI").is_dir() else root


def pseudo_root_beside(data_root) -> Optional[Path]:
    """SAPT's ``generated_data/lora_gen_superni_t5`` next to its ``CL_Benchmark`` (``data_root``
    names ``CL_Benchmark`` or ``CL_Benchmark/SuperNI``), or None when there is none."""
    root = Path(data_root).expanduser().resolve()
    for repository in (root.parent, root.parent.parent):
        candidate = repository.joinpath(*SAPT_PSEUDO_FOLDER)
        if candidate.is_dir():
            return candidate
    return None


def read_pseudo_prompts(pseudo_data_root, task: str) -> List[str]:
    """The prompts of SAPT's pseudo-samples of ``task`` (module docstring), in file order."""
    root = pseudo_root(pseudo_data_root)
    path = root / task / f"{PSEUDO_SPLIT}.json"
    where = dict(layout=PSEUDO_LAYOUT, fix=PSEUDO_FIX)
    if not path.is_file():
        raise DataError(task, f"no pseudo-samples for task {task!r}: missing file {path}", status="missing",
                        expected=str(path), **where)
    try:
        data = read_json(path)
    except UnreadableJSON as error:
        raise DataError(task, str(error), status="malformed", **where) from None
    definition = data.get("Definition") if isinstance(data, dict) else None
    if isinstance(definition, list):
        definition = definition[0] if definition else None
    if not isinstance(definition, str) or not definition.strip():
        raise DataError(task, f"{path} has no \"Definition\" text", status="malformed", **where)
    instances = data.get("Instances")
    if not isinstance(instances, list) or not instances:
        raise DataError(task, f"{path} holds no \"Instances\" list", status="malformed", **where)
    prompts = []
    for index, item in enumerate(instances):
        if not isinstance(item, dict) or not isinstance(item.get("input"), str) or not item["input"].strip():
            raise DataError(task, f"instance {index} of {path} must be an object with a non-empty string \"input\", "
                                  f"got {str(item)[:80]!r}", status="malformed", **where)
        prompts.append(superni_prompt(definition, item["input"]))
    return prompts


def check_pseudo_data(pseudo_data_root, tasks: Sequence[str]) -> List[TextTaskReport]:
    """One report per task: found with its number of pseudo-samples, or missing / malformed."""
    reports = []
    for task in tasks:
        try:
            prompts = read_pseudo_prompts(pseudo_data_root, task)
        except DataError as error:
            reports.append(TextTaskReport(task, error.status, message=str(error)))
            continue
        reports.append(TextTaskReport(task, "found", 0, len(prompts), 0, str(pseudo_root(pseudo_data_root) / task)))
    return reports


def pseudo_data_line(data_root, tasks: Sequence[str]) -> str:
    """``check-data --benchmark superni``'s line on SAPT's pseudo-samples beside ``data_root`` (only
    the ``sapt`` strategy reads them; the stream does not need them)."""
    what = "SAPT's pseudo-samples (read by the sapt row only)"
    found = pseudo_root_beside(data_root)
    if found is None:
        return f"{what}: no {'/'.join(SAPT_PSEUDO_FOLDER)} beside {data_root}"
    reports = check_pseudo_data(found, tasks)
    broken = [r.name for r in reports if not r.usable]
    if broken:
        return f"{what}: {found}, {len(broken)} task(s) missing or broken: {', '.join(broken)}"
    return f"{what}: {found}, {sum(r.train for r in reports)} for {len(reports)} tasks"


__all__ = ["PSEUDO_FIX", "PSEUDO_LAYOUT", "PSEUDO_SPLIT", "SAPT_PSEUDO_FOLDER", "check_pseudo_data", "pseudo_data_line", "pseudo_root",
           "pseudo_root_beside", "read_pseudo_prompts"]
