"""Text data that cannot be scored, refused where it is read (issue 35, class 4).

Empty gold answers, empty or whitespace-only prompts, answers or label words that exact match
normalises to nothing or to the same word, two folders that match one task, JSON that Python's
reader refuses without naming the file. Each case asserts the error's type, that the message
names the task, the file (and item) and the fix, that the command line prints it without a
traceback, and that nothing was written into the data.
"""

import json

import pytest

from moram_avalanche.benchmarks.readers import DataError
from moram_avalanche.benchmarks.text.tasks import TASKS

PAIRS = [{"prompt": f"question {i}", "answer": "A"} for i in range(3)]


def write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data))


def tree(root):
    return sorted((str(p.relative_to(root)), p.stat().st_size) for p in root.rglob("*"))


# ---------------------------------------------------------------- TRACE layout
def trace_task(root, name="FOMC", train=PAIRS, test=PAIRS, folder=None):
    for split, items in (("train", train), ("eval", PAIRS[:1]), ("test", test)):
        write(root / (folder or name) / f"{split}.json", items)
    return root


def read_trace(root, name="FOMC"):
    from moram_avalanche.benchmarks import trace

    return trace(root, [name])


def trace_empty_answer(t):
    return read_trace(trace_task(t, test=PAIRS[:2] + [{"prompt": "question 2", "answer": ""}]))


def trace_whitespace_answer(t):
    return read_trace(trace_task(t, "MeetingBank", train=[{"prompt": "meeting", "answer": " \n\t"}]), "MeetingBank")


def trace_empty_prompt(t):
    return read_trace(trace_task(t, train=[{"prompt": "", "answer": "A"}] + PAIRS))


def trace_whitespace_prompt(t):
    return read_trace(trace_task(t, "Py150", test=[*PAIRS, {"prompt": "   \n  ", "answer": "x = 1"}]), "Py150")


def trace_two_folders(t):
    trace_task(t, "ScienceQA")
    trace_task(t, "ScienceQA", folder="scienceqa")
    return read_trace(t, "ScienceQA")


def trace_deep_json(t):
    trace_task(t)
    write(t / "FOMC" / "test.json", "[" * 100_000 + "]" * 100_000)
    return read_trace(t)


def trace_long_integer(t):
    trace_task(t)
    write(t / "FOMC" / "train.json", '[{"prompt": "p", "answer": "A", "id": ' + "7" * 5000 + "}]")
    return read_trace(t)


def trace_check_data(t):
    from moram_avalanche.benchmarks.text.trace import check_trace_data

    trace_task(t, test=[{"prompt": "question", "answer": ""}])
    report = {r.name: r for r in check_trace_data(t, ["FOMC"])}["FOMC"]
    assert report.status == "malformed"
    raise DataError("FOMC", report.message.splitlines()[0], status=report.status)  # the report's line


# ---------------------------------------------------------------- lm-cl, both layouts
def moram_task(root, name="sst-2", labels=("Good", "Bad"), train=None, folder=None):
    target = root / (folder or name.upper())
    write(target / "labels.json", list(labels))
    items = train or [{"prompt": f"review {i}", "answer": labels[i % len(labels)]} for i in range(3)]
    write(target / "train.json", items)
    write(target / "test.json", items)
    return root


def olora_task(root, name="sst-2", labels=("Good", "Bad"), train=None):
    target = root / TASKS[name].olora_dir
    write(target / "labels.json", list(labels))
    items = train or [{"sentence": f"review {i}", "label": labels[i % len(labels)]} for i in range(3)]
    for split in ("train", "dev", "test"):
        write(target / f"{split}.json", items)
    return root


def read_lm_cl(root, name="sst-2"):
    from moram_avalanche.benchmarks import lm_cl

    return lm_cl(root, [name])


def lm_cl_empty_prompt(t):
    return read_lm_cl(moram_task(t, train=[{"prompt": "", "answer": "Good"}]))


def lm_cl_whitespace_sentence(t):
    return read_lm_cl(olora_task(t, train=[{"sentence": "\n \t", "label": "Bad"}]))


def lm_cl_empty_label(t):
    return read_lm_cl(moram_task(t, labels=("Good", "")))


def lm_cl_punctuation_label(t):
    return read_lm_cl(olora_task(t, labels=("Good", "...")))


def lm_cl_labels_alike(t):
    return read_lm_cl(moram_task(t, labels=("Good", "good.")))


def lm_cl_two_folders_in_other_case(t):
    moram_task(t, folder="SST-2")
    moram_task(t, folder="sst-2")
    return read_lm_cl(t)


def lm_cl_two_spellings(t):
    moram_task(t, "ag", labels=("World", "Sports"), folder="agnews")
    moram_task(t, "ag", labels=("World", "Sports"), folder="AG_NEWS")
    return read_lm_cl(t, "ag")


def lm_cl_deep_labels(t):
    moram_task(t)
    write(t / "SST-2" / "labels.json", "[" * 100_000 + "]" * 100_000)
    return read_lm_cl(t)


# ---------------------------------------------------------------- the API
def task_with(answer="A", prompt="question", metric="exact_match"):
    from moram_avalanche.benchmarks import TextStreamTask

    return TextStreamTask("mine", [("fine", "A"), (prompt, answer)], [("fine", "A")], metric=metric)


HOSTILE = [
    ("TRACE: an empty gold answer", trace_empty_answer,
     ["FOMC: item 2 of", "FOMC/test.json cannot be used: its answer is empty", "no prediction can be scored"]),
    ("TRACE: a whitespace-only answer", trace_whitespace_answer,
     ["MeetingBank: item 0 of", "MeetingBank/train.json", "answer is whitespace only"]),
    ("TRACE: an empty prompt", trace_empty_prompt,
     ["FOMC: item 0 of", "FOMC/train.json", "its prompt is empty", "the model gets nothing to answer"]),
    ("TRACE: a whitespace-only prompt", trace_whitespace_prompt,
     ["Py150: item 3 of", "Py150/test.json", "prompt is whitespace only"]),
    ("TRACE: two folders for one task", trace_two_folders,
     ["2 folders under", "match task 'ScienceQA': ScienceQA, scienceqa", "keep one of them"]),
    ("TRACE: JSON nested too deep", trace_deep_json,
     ["bad JSON in", "FOMC/test.json", "nested deeper than"]),
    ("TRACE: a 5000-digit integer", trace_long_integer,
     ["bad JSON in", "FOMC/train.json", "4300 digits"]),
    ("check-data: an empty answer", trace_check_data, ["FOMC/test.json cannot be used: its answer is empty"]),
    ("lm-cl: an empty prompt", lm_cl_empty_prompt,
     ["sst-2: item 0 of", "SST-2/train.json", "its prompt is empty"]),
    ("lm-cl (O-LoRA): a whitespace-only sentence", lm_cl_whitespace_sentence,
     ["sst-2: item 0 of", "SC/SST-2/train.json", "prompt is whitespace only"]),
    ("lm-cl: an empty label word", lm_cl_empty_label,
     ["labels.json must be a non-empty JSON list of label words, each with a letter or digit", "['Good', '']"]),
    ("lm-cl (O-LoRA): a punctuation label word", lm_cl_punctuation_label,
     ["SC/SST-2/labels.json must be", "['Good', '...']"]),
    ("lm-cl: label words exact match confuses", lm_cl_labels_alike,
     ["labels.json holds label words that exact match cannot tell apart", "['Good', 'good.']"]),
    ("lm-cl: one task folder in two letter cases", lm_cl_two_folders_in_other_case,
     ["2 folders under", "match task 'sst-2': SST-2, sst-2", "any letter case", "keep one of them"]),
    ("lm-cl: one task under two spellings", lm_cl_two_spellings,
     ["2 folders under", "match task 'ag': AG_NEWS, agnews"]),
    ("lm-cl: labels.json nested too deep", lm_cl_deep_labels, ["bad JSON in", "SST-2/labels.json", "nested deeper"]),
    ("a task of empty answers", lambda t: task_with(answer=""),
     ["task 'mine': item 1 of its train split cannot be used: its answer is empty", "drop or fix that item"]),
    ("a task whose answer exact match empties", lambda t: task_with(answer="?!"),
     ["its answer '?!' is empty once exact match normalises it"]),
    ("a task of a whitespace prompt", lambda t: task_with(prompt="\t"), ["its prompt is whitespace only"]),
]


@pytest.mark.parametrize("call, fragments", [c[1:] for c in HOSTILE], ids=[c[0] for c in HOSTILE])
def test_text_data_that_cannot_be_scored_is_refused_where_it_is_read(call, fragments, tmp_path):
    from moram_avalanche.arguments import is_user_error, report_error

    with pytest.raises(ValueError) as info:
        call(tmp_path)
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    assert is_user_error(info.value), type(info.value)
    if not isinstance(info.value, DataError):  # a dataset's report lists its problems line by line
        assert "\n" not in report_error("run", info.value), message
    else:
        assert "\n" not in info.value.problem, message  # the problem itself is one line
    assert not [p for p, _ in tree(tmp_path) if p.endswith((".tmp", ".lock"))]  # nothing written into the data


def test_a_json_file_with_a_byte_order_mark_reads():
    """Windows editors write a UTF-8 byte order mark; it is not an error."""
    import tempfile
    from pathlib import Path

    from moram_avalanche.benchmarks import trace

    with tempfile.TemporaryDirectory() as root:
        trace_task(Path(root))
        path = Path(root) / "FOMC" / "train.json"
        path.write_text("\ufeff" + path.read_text(), encoding="utf-8")
        assert len(trace(root, ["FOMC"]).train_stream[0].dataset) == 3


def test_rouge_and_code_answers_keep_their_punctuation_and_one_task_folder_in_any_case_is_found(tmp_path):
    """Only exact match empties an answer of punctuation; a single folder matches in any case."""
    from moram_avalanche.benchmarks import trace

    task = task_with(answer="?!", metric="rouge_l")
    assert task.train[1] == ("question", "?!")
    trace_task(tmp_path, "Py150", train=[{"prompt": "def f():", "answer": "):"}], folder="py150")
    assert list(trace(tmp_path, ["Py150"]).train_stream[0].dataset[0][:2]) == ["def f():", "):"]


def test_a_coop_split_file_nested_too_deep_names_the_file(tmp_path):
    """The image readers share the one JSON reader: their errors name the file too."""
    from moram_avalanche.benchmarks.readers import read_coop_split

    path = tmp_path / "split_zhou_OxfordPets.json"
    path.write_text('{"a":' * 100_000 + "1" + "}" * 100_000)
    with pytest.raises(DataError, match=r"split_zhou_OxfordPets\.json: not readable JSON \(bad JSON in .*nested deeper"):
        read_coop_split(path, domain="OxfordPets", layout="CoOp", fix="download it")
