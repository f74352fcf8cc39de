"""A local MMLU copy's rows checked where the copy enters (:func:`local_tasks`, ``check-data``): every
row one that lm-eval's MMLU prompt reads (six columns: question, the four options A-D, an answer
letter that ``['A', 'B', 'C', 'D'].index(answer.strip())`` finds), a bad one refused naming its file
and row (issue 46)."""

import csv

import pytest

from fake_text_data import codealpaca_tree, mmlu_tree
from moram_avalanche.benchmarks.text.data_checks import check_codealpaca_layout
from moram_avalanche.benchmarks.text.mmlu import check_mmlu_copy, local_tasks

GOOD = ["Which colour?", "red", "green", "blue", "black", "B"]
BAD_ROWS = [
    ("an answer not in A-D", GOOD[:5] + ["E"], "its answer is 'E', not one of A, B, C, D"),
    ("an empty answer", GOOD[:5] + [""], "its answer is '', not one of A, B, C, D"),
    ("an answer index", GOOD[:5] + ["1"], "its answer is '1', not one of A, B, C, D"),
    ("three options", GOOD[:4] + ["B"], "5 columns, not 6 (question, A, B, C, D, answer)"),
    ("five options", GOOD[:5] + ["purple", "B"], "7 columns, not 6 (question, A, B, C, D, answer)"),
]


def rewrite(path, rows):
    with open(path, "w", newline="") as handle:
        csv.writer(handle).writerows(rows)


@pytest.mark.parametrize("split", ["test", "dev"])
@pytest.mark.parametrize("bad, expected", [c[1:] for c in BAD_ROWS], ids=[c[0] for c in BAD_ROWS])
def test_a_row_lm_eval_cannot_read_is_refused_naming_the_file_and_the_row(tmp_path, split, bad, expected):
    root = mmlu_tree(codealpaca_tree(tmp_path / "data"))
    path = root / "data" / split / f"college_biology_{split}.csv"
    rewrite(path, [GOOD, GOOD, bad, GOOD])
    with pytest.raises(ValueError) as info:
        local_tasks(root / "data")
    message = str(info.value)
    assert message.startswith(f"MMLU file {path} row 3: ") and expected in message and "\n" not in message, message
    assert message == check_mmlu_copy(root / "data")
    reports, text = check_codealpaca_layout(root)
    mmlu = {r.name: r for r in reports}["mmlu"]
    assert mmlu.status == "malformed" and mmlu.message == message and message in text


def test_an_empty_test_file_and_text_that_is_not_utf8_are_refused(tmp_path):
    root = mmlu_tree(tmp_path)
    path = root / "data" / "test" / "astronomy_test.csv"
    path.write_text("")
    assert check_mmlu_copy(root / "data") == f"MMLU file {path} holds no question"
    path.write_bytes(b"Which?,a,b,c,d,A\n\xff,a,b,c,d,B\n")
    assert check_mmlu_copy(root / "data").startswith(f"MMLU file {path} is not UTF-8 text")


def test_a_good_copy_passes_with_a_byte_order_mark_and_answers_padded(tmp_path):
    root = mmlu_tree(codealpaca_tree(tmp_path / "data"), questions=5)
    path = root / "data" / "test" / "astronomy_test.csv"
    rewrite(path, [GOOD[:5] + [" C "]] * 3)  # lm-eval strips the answer
    path.write_text("\ufeff" + path.read_text(), encoding="utf-8")
    assert check_mmlu_copy(root / "data") is None
    reports, text = check_codealpaca_layout(root)
    mmlu = {r.name: r for r in reports}["mmlu"]
    assert (mmlu.status, mmlu.test) == ("found", 3 + 5) and f"MMLU: 8 test questions, every row readable ({root / 'data'})" in text
