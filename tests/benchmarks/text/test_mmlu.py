"""A local MMLU copy (hendrycks/test's CSV files) gives lm-eval exactly the requests its registered
``mmlu_<subject>`` task builds from ``cais/mmlu`` for the same questions: both built here by lm-eval
itself, the registered task's own configuration reading the hand-made rows in ``cais/mmlu``'s layout."""

import csv
import json
from pathlib import Path

import pytest

pytest.importorskip("lm_eval")

from moram_avalanche.benchmarks.text.mmlu import description, local_tasks, mmlu_folder

SUBJECT = "high_school_microeconomics"
# hand-made rows that a CSV reader guessing types would change: a question with spaces, a comma, quotes and a
# line break around it; options pandas reads as missing ("N/A", "None", "") or as numbers ("1.50", "007")
TEST = [[" What does \"1.50, N/A\" mean?\nSay. ", "None", "N/A", "1.50", "True", "C"],
        ["Which is largest?", "007", "0.10", "1e3", "-0", "A"],
        ["Pick the empty one.", "x", "", "NaN", "null", "B"]]
DEV = [["Dev question one?", "a", "b", "c", "d", "D"], ["Dev question two?", "1", "2", "3", "4", "B"]]


def registered_task_manager():
    """lm-eval's registered MMLU subject tasks (their YAML files: mmlu/default)."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    return TaskManager(include_path=str(Path(lm_eval.__file__).parent / "tasks" / "mmlu" / "default"),
                       include_defaults=False)


def built_requests(config, shots, manager):
    """``[(context, continuation), ...]`` and the targets lm-eval builds for every test question of ``config``."""
    (task,) = manager.load([config])["tasks"].values()
    task.set_config(key="num_fewshot", value=shots)
    task.set_fewshot_seed(seed=1234)
    task.build_all_requests(rank=0, world_size=1)
    return ([instance.args for instance in task.instances],
            [task.doc_to_target(doc) for doc in task.test_docs()])


@pytest.fixture
def copies(tmp_path, monkeypatch):
    """The rows as a local copy (CSV, answer letters) and in cais/mmlu's layout (JSON lines: question, subject,
    choices, answer index)."""
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "cache"))
    for split, rows in (("test", TEST), ("dev", DEV)):
        (tmp_path / "data" / split).mkdir(parents=True)
        with open(tmp_path / "data" / split / f"{SUBJECT}_{split}.csv", "w", newline="") as handle:
            csv.writer(handle).writerows(rows)
        with open(tmp_path / f"{split}.jsonl", "w") as handle:
            for question, *choices, letter in rows:
                handle.write(json.dumps({"question": question, "subject": SUBJECT, "choices": choices,
                                         "answer": "ABCD".index(letter)}) + "\n")
    return tmp_path


@pytest.mark.parametrize("shots", [0, 2])
def test_a_local_copy_builds_the_registered_tasks_requests(copies, shots):
    manager = registered_task_manager()
    registered = dict(manager.task_index[f"mmlu_{SUBJECT}"].cfg, dataset_path="json", dataset_name=None,
                      dataset_kwargs={"data_files": {s: str(copies / f"{s}.jsonl") for s in ("test", "dev")}})
    expected = built_requests(registered, shots, manager)
    (local,) = local_tasks(mmlu_folder(copies))
    assert built_requests(local, shots, manager) == expected
    # what that is, by hand: the subject's header, the few-shot examples, the stripped question, " <letter>" each
    contexts = [context for context, _ in expected[0]]
    header = "The following are multiple choice questions (with answers) about high school microeconomics.\n\n"
    shown = "".join(f"Dev question {n}?\nA. {a}\nB. {b}\nC. {c}\nD. {d}\nAnswer: {letter}\n\n"
                    for n, (a, b, c, d, letter) in (("one", "abcdD"), ("two", "1234B")))[: None if shots else 0]
    assert contexts[:4] == [header + shown + 'What does "1.50, N/A" mean?\nSay.\nA. None\nB. N/A\nC. 1.50\nD. True'
                            "\nAnswer:"] * 4
    assert [continuation for _, continuation in expected[0][:4]] == [" A", " B", " C", " D"]
    assert contexts[8].endswith("Pick the empty one.\nA. x\nB. \nC. NaN\nD. null\nAnswer:")
    assert expected[1] == [2, 0, 1]


def test_every_registered_subject_has_the_header_of_its_name():
    manager = registered_task_manager()
    subjects = {name.removeprefix("mmlu_"): entry.cfg for name, entry in manager.task_index.items()
                if entry.cfg and "description" in entry.cfg}
    assert len(subjects) == 57
    for subject, config in subjects.items():
        assert description(subject) == config["description"], subject
