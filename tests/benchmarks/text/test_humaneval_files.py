"""A HumanEval problems file refused or read where it enters (:func:`read_problems`, the shared
JSON-lines reader), and ``check-data`` saying the same: a repeated ``task_id``, a ``.gz`` that is
not gzip data, a UTF-8 byte order mark (issue 46)."""

import gzip
import json

import pytest

from fake_text_data import codealpaca_tree
from moram_avalanche.benchmarks.text.codealpaca import codealpaca
from moram_avalanche.benchmarks.text.data_checks import check_codealpaca_layout
from moram_avalanche.benchmarks.text.humaneval import read_problems


def test_a_repeated_task_id_is_refused_naming_the_file_the_id_and_both_lines(tmp_path):
    root = codealpaca_tree(tmp_path / "data")
    path = root / "HumanEval.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines + [lines[1]]) + "\n")  # Fake/1 on line 2, and again on line 5
    with pytest.raises(ValueError) as info:
        read_problems(path)
    message = str(info.value)
    for fragment in (str(path), "'Fake/1'", "line 2", "line 5"):
        assert fragment in message, (fragment, message)
    assert "\n" not in message
    reports, text = check_codealpaca_layout(root)  # no longer counted as 4 problems
    assert reports[0].status == "malformed" and message in reports[0].message and "cannot be built" in text
    with pytest.raises(ValueError, match="'Fake/1'"):
        codealpaca(root)


def test_a_gz_file_that_is_not_gzip_is_refused_naming_the_file_and_what_it_holds(tmp_path):
    root = codealpaca_tree(tmp_path / "data")
    path = (root / "HumanEval.jsonl").rename(root / "HumanEval.jsonl.gz")
    with pytest.raises(ValueError) as info:
        read_problems(path)
    message = str(info.value)
    assert message == (f"{path} is not gzip data: it starts with '{{'; rename it to HumanEval.jsonl or gzip it"), message
    reports, _ = check_codealpaca_layout(root)
    assert reports[0].status == "malformed" and message in reports[0].message
    path.write_bytes(b"\x1f\x8b\x08\x00" + b"\x00" * 6)  # a gzip header cut short: an interrupted copy
    with pytest.raises(ValueError, match=f"{path} is not whole gzip data"):
        read_problems(path)


@pytest.mark.parametrize("gzipped", [False, True], ids=["jsonl", "jsonl.gz"])
def test_a_byte_order_mark_is_accepted_as_every_other_reader_accepts_it(tmp_path, gzipped):
    root = codealpaca_tree(tmp_path / "data")
    plain = root / "HumanEval.jsonl"
    text = "\ufeff" + plain.read_text()
    if gzipped:
        plain.unlink()
        with gzip.open(root / "HumanEval.jsonl.gz", "wt", encoding="utf-8") as handle:
            handle.write(text)
    else:
        plain.write_text(text, encoding="utf-8")
    problems = read_problems(root / ("HumanEval.jsonl.gz" if gzipped else "HumanEval.jsonl"))
    assert list(problems) == [f"Fake/{i}" for i in range(4)]
    data = root / "code_alpaca_20k.json"  # the CodeAlpaca file, through the same reader
    data.write_text("\ufeff" + data.read_text(), encoding="utf-8")
    reports, _ = check_codealpaca_layout(root)
    assert (reports[0].status, reports[0].train, reports[0].test) == ("found", 10, 4)
    assert len(codealpaca(root).tasks[0].train) == 10


def test_a_line_that_is_not_utf8_names_the_file(tmp_path):
    path = tmp_path / "HumanEval.jsonl"
    path.write_bytes(json.dumps({"task_id": "x"}).encode() + b"\n\xff\xfe\n")
    with pytest.raises(ValueError, match=f"{path} is not UTF-8 text"):
        read_problems(path)
