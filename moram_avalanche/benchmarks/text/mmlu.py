"""MMLU (Hendrycks et al. 2021) for lm-evaluation-harness: the out-of-domain columns of the
CodeAlpaca table (``tab:llm_ood_main``: MMLU accuracy after fine-tuning on code).

Two ways to the questions, both scored by ``lm-eval``'s own multiple-choice loglikelihood
(:class:`~moram_avalanche.strategies.text.plugins.mmlu_evaluation.MMLUEvaluation`):

* ``lm-eval``'s registered tasks (``mmlu``, ``mmlu_<subject>``: the Hugging Face dataset
  ``cais/mmlu``, found in the Hugging Face cache or downloaded);
* a local copy in the authors' layout (hendrycks/test ``data.tar``: ``data/test/<subject>_test.csv``
  and ``data/dev/<subject>_dev.csv``, no header, columns question, A, B, C, D, answer letter), for
  which :func:`local_tasks` writes one ``lm-eval`` task configuration per subject that builds, for
  the same question, the prompt ``lm-eval``'s registered ``mmlu_<subject>`` task builds from
  ``cais/mmlu``: the subject's description header (:func:`description`, ``lm-eval``'s
  ``lm_eval/tasks/mmlu/_generate_configs.py``: "The following are multiple choice questions (with
  answers) about <subject, its underscores as spaces>." and a blank line), then its MMLU template
  (``lm_eval/tasks/mmlu/default/_default_template_yaml``: the stripped question, the four lettered
  options, "Answer:"; choices A-D; few-shot examples from dev, first n), every cell read as the text
  the file holds (:data:`CSV_AS_WRITTEN`: ``cais/mmlu`` holds strings, while the CSV reader would
  make "1.50" the number 1.5 and "N/A" or "None" a missing value).

Pure Python: nothing here imports ``lm-eval`` (only the plugin does, when it runs).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

#: the columns of a hendrycks MMLU CSV file
COLUMNS = ("question", "A", "B", "C", "D", "answer")
#: lm-eval's MMLU prompt (lm_eval/tasks/mmlu/default/_default_template_yaml), over the CSV's columns
PROMPT = "{{question.strip()}}\nA. {{A}}\nB. {{B}}\nC. {{C}}\nD. {{D}}\nAnswer:"
#: the header before every prompt of a subject (lm-eval's lm_eval/tasks/mmlu/_generate_configs.py, the
#: ``description`` of each registered ``mmlu_<subject>`` task); :func:`description` fills it in
DESCRIPTION = "The following are multiple choice questions (with answers) about {subject}.\n\n"
#: how the CSV reader (``datasets``' csv builder, pandas ``read_csv``) must read a local copy so that every cell
#: is the text the file holds, as in ``cais/mmlu``: no type guessed (``converters``: each cell as its string),
#: no missing value guessed (``na_filter`` off: "N/A", "None", "NaN" and empty cells stay text)
CSV_AS_WRITTEN = {"converters": {column: str for column in COLUMNS}, "na_filter": False}
LETTERS = ("A", "B", "C", "D")
#: where a local copy's ``test`` and ``dev`` folders are looked for under a root, in order
PLACES = ("data", ".", "mmlu/data", "mmlu")
#: lm-eval's ``stem`` group of MMLU (``mmlu_stem``: the subjects ``lm_eval/tasks/mmlu/_generate_configs.py``
#: files under "stem", 3153 test questions), the CodeAlpaca table's "STEM" column
STEM_SUBJECTS = ("abstract_algebra", "anatomy", "astronomy", "college_biology", "college_chemistry",
                 "college_computer_science", "college_mathematics", "college_physics", "computer_security",
                 "conceptual_physics", "electrical_engineering", "elementary_mathematics", "high_school_biology",
                 "high_school_chemistry", "high_school_computer_science", "high_school_mathematics",
                 "high_school_physics", "high_school_statistics", "machine_learning")
#: lm-eval's MMLU groups this package scores from their subjects' accuracies -> their subjects
GROUPS = {"mmlu_stem": STEM_SUBJECTS}


def mmlu_folder(root) -> Optional[Path]:
    """The folder holding ``test/`` (and ``dev/``) of a local MMLU copy under ``root``, or None."""
    root = Path(root).expanduser()
    for place in PLACES:
        folder = root / place
        if (folder / "test").is_dir() and any((folder / "test").glob("*_test.csv")):
            return folder
    return None


def local_subjects(folder) -> Dict[str, Tuple[Path, Optional[Path]]]:
    """``{subject: (test csv, dev csv or None)}`` of a local copy (:func:`mmlu_folder`)."""
    folder = Path(folder)
    found = {}
    for test in sorted((folder / "test").glob("*_test.csv")):
        subject = test.name[: -len("_test.csv")]
        dev = folder / "dev" / f"{subject}_dev.csv"
        found[subject] = (test, dev if dev.is_file() else None)
    return found


def description(subject: str) -> str:
    """The header lm-eval's registered task of ``subject`` puts before each prompt (:data:`DESCRIPTION`,
    the subject's underscores as spaces)."""
    return DESCRIPTION.format(subject=" ".join(subject.split("_")))


def local_tasks(folder, subjects: Optional[Sequence[str]] = None) -> List[dict]:
    """One ``lm-eval`` task configuration (a dict ``simple_evaluate`` takes) per subject of a local
    copy, building the prompts of lm-eval's registered ``mmlu_<subject>`` (module docstring);
    ``subjects``: a selection (None: every one found). An unknown subject is a ValueError naming the
    ones found."""
    found = local_subjects(folder)
    if not found:
        raise ValueError(f"no MMLU subject under {folder}: expected test/<subject>_test.csv (hendrycks/test data.tar)")
    wanted = list(found) if subjects is None else list(subjects)
    unknown = [s for s in wanted if s not in found]
    if unknown:
        raise ValueError(f"MMLU subject(s) {unknown} not under {folder}; found: {', '.join(found)}")
    tasks = []
    for subject in wanted:
        test, dev = found[subject]
        files = {"test": str(test), **({"dev": str(dev)} if dev else {})}
        task = {"task": f"mmlu_local_{subject}", "dataset_path": "csv",
                "dataset_kwargs": {"data_files": files, "column_names": list(COLUMNS),
                                   **copy.deepcopy(CSV_AS_WRITTEN)},
                "test_split": "test", "output_type": "multiple_choice", "description": description(subject),
                "doc_to_text": PROMPT,
                "doc_to_choice": list(LETTERS), "doc_to_target": "{{['A', 'B', 'C', 'D'].index(answer.strip())}}",
                "metric_list": [{"metric": "acc", "aggregation": "mean", "higher_is_better": True}]}
        if dev:
            task.update(fewshot_split="dev", fewshot_config={"sampler": "first_n"})
        tasks.append(task)
    return tasks


def lm_eval_available() -> Optional[str]:
    """None when ``lm-eval`` can be imported, else the one-line fix."""
    try:
        import lm_eval  # noqa: F401
    except ImportError:
        return ("MMLU needs lm-evaluation-harness: pip install 'moram-avalanche[mmlu]' -c constraints.txt "
                "(or pip install lm-eval==0.4.13)")
    return None


__all__ = ["COLUMNS", "CSV_AS_WRITTEN", "DESCRIPTION", "GROUPS", "LETTERS", "PLACES", "PROMPT", "STEM_SUBJECTS",
           "description", "lm_eval_available", "local_subjects", "local_tasks", "mmlu_folder"]
