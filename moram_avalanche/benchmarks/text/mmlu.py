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
  make "1.50" the number 1.5 and "N/A" or "None" a missing value). Every row of such a copy is
  checked before lm-eval reads it (:func:`count_questions`; ``check-data`` and ``reproduce
  codealpaca`` check it up front): six columns, an answer letter the template's
  ``doc_to_target`` finds among A-D.

Pure Python: nothing here imports ``lm-eval`` (only the plugin does, when it runs).
"""

from __future__ import annotations

import copy
import csv
import io
import os
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from ..readers import read_text

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


def count_rows(path) -> int:
    """The questions of one hendrycks CSV file, every row checked as lm-eval reads it with
    :func:`local_tasks`' configuration: the six :data:`COLUMNS` (a row of more or fewer has an option
    too many or too few, or no answer), an answer that is one of :data:`LETTERS` once stripped (the
    template's ``doc_to_target``, ``['A', 'B', 'C', 'D'].index(answer.strip())``, raises otherwise);
    blank lines are skipped, as the CSV reader skips them, and a UTF-8 byte order mark is allowed
    (:func:`~..readers.read_text`). A one-line ValueError naming the file and the row otherwise, or a
    file that holds no question."""
    try:
        text = read_text(Path(path))
    except ValueError as error:  # the message starts with the file's name, or says it cannot be read
        raise ValueError(f"MMLU {'file ' if str(error).startswith(str(path)) else ''}{error}") from None
    count = 0
    try:
        for row in csv.reader(io.StringIO(text, newline="")):
            if not row:
                continue
            count += 1
            where = f"MMLU file {path} row {count}"
            if len(row) != len(COLUMNS):
                raise ValueError(f"{where}: {len(row)} columns, not {len(COLUMNS)} ({', '.join(COLUMNS)}): fix or drop "
                                 "that row (hendrycks/test's rows have four options and an answer letter)")
            if row[-1].strip() not in LETTERS:
                raise ValueError(f"{where}: its answer is {row[-1]!r}, not one of {', '.join(LETTERS)}: lm-eval's "
                                 "MMLU template reads the answer as a letter; fix or drop that row")
    except csv.Error as error:
        raise ValueError(f"MMLU file {path} row {count + 1} is not CSV ({error})") from None
    if not count:
        raise ValueError(f"MMLU file {path} holds no question")
    return count


def count_questions(folder, subjects: Optional[Sequence[str]] = None) -> Dict[str, int]:
    """``{subject: test questions}`` of a local copy (:func:`local_subjects`; ``subjects``: a selection,
    None: every one), every row of its test and dev files checked (:func:`count_rows`, whose ValueError
    names the first bad file and row)."""
    found = local_subjects(folder)
    counts = {}
    for subject in (found if subjects is None else [s for s in subjects if s in found]):
        test, dev = found[subject]
        counts[subject] = count_rows(test)
        if dev is not None:
            count_rows(dev)
    return counts


def check_mmlu_copy(folder) -> Optional[str]:
    """None when lm-eval reads every row of the local copy in ``folder``, else the first problem in one line
    (:func:`count_questions`)."""
    try:
        count_questions(folder)
    except ValueError as error:
        return str(error)
    return None


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
    count_questions(folder, wanted)
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


#: the Hugging Face dataset lm-eval's registered MMLU tasks read (``dataset_path`` of lm_eval/tasks/mmlu/default)
CAIS_MMLU = "cais/mmlu"
#: environment variables that keep ``datasets`` off the network (any of them set to 1, true, yes or on)
OFFLINE_VARIABLES = ("HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE")


def cais_mmlu_cached() -> bool:
    """Whether :data:`CAIS_MMLU` is in the Hugging Face caches (the hub's ``datasets--cais--mmlu``, or
    ``datasets``' prepared ``cais___mmlu``), the folders read from the environment as ``huggingface_hub``
    and ``datasets`` read them (``HF_HUB_CACHE``, ``HF_DATASETS_CACHE``, else under ``HF_HOME``)."""
    home = Path(os.environ.get("HF_HOME") or "~/.cache/huggingface").expanduser()
    hub = Path(os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE") or home / "hub").expanduser()
    prepared = Path(os.environ.get("HF_DATASETS_CACHE") or home / "datasets").expanduser()
    return (hub / "datasets--cais--mmlu").is_dir() or (prepared / "cais___mmlu").is_dir()


def registered_mmlu_problem(root) -> Optional[str]:
    """None when lm-eval's registered MMLU tasks can read :data:`CAIS_MMLU` (fetched when online, else
    from the cache: :func:`cais_mmlu_cached`), else the one-line fix, naming ``root`` (where a local
    copy would be found, :func:`mmlu_folder`)."""
    offline = [name for name in OFFLINE_VARIABLES if os.environ.get(name, "").lower() in ("1", "true", "yes", "on")]
    if not offline or cais_mmlu_cached():
        return None
    return (f"MMLU: no local copy under {root} and {CAIS_MMLU} is not in the Hugging Face cache while "
            f"{offline[0]} is set: put hendrycks/test's data/test/<subject>_test.csv (and data/dev/) under {root}, "
            f"or fetch {CAIS_MMLU} once where there is a network (datasets.load_dataset('{CAIS_MMLU}', 'all'))")


def lm_eval_available() -> Optional[str]:
    """None when ``lm-eval`` can be imported, else the one-line fix."""
    try:
        import lm_eval  # noqa: F401
    except ImportError:
        return ("MMLU needs lm-evaluation-harness: pip install 'moram-avalanche[mmlu]' -c constraints.txt "
                "(or pip install lm-eval==0.4.13)")
    return None


__all__ = ["CAIS_MMLU", "COLUMNS", "CSV_AS_WRITTEN", "DESCRIPTION", "GROUPS", "LETTERS", "PLACES", "PROMPT", "STEM_SUBJECTS",
           "OFFLINE_VARIABLES", "cais_mmlu_cached", "check_mmlu_copy", "count_questions", "count_rows", "description", "lm_eval_available", "local_subjects", "local_tasks", "mmlu_folder", "registered_mmlu_problem"]
