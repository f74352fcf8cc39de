"""Version gates (issue 46): a record written before its stream's last change of prompts or
metric does not resume."""

import pytest


def test_versions_compare_as_numbers():
    from moram_avalanche.experiments.stream_changes import parse_version

    assert parse_version("0.10.0") > parse_version("0.9.9")
    assert parse_version("0.6") == parse_version("0.6.0") == (0, 6, 0)
    assert parse_version("0.8.0.dev1") == (0, 8, 0) and parse_version("1.0rc1") == (1, 0, 0)


@pytest.mark.parametrize("record, newest", [
    ({"version": "0.7.1", "contents": {}}, (0, 7, 1)),
    ({"contents": {"train": "ab"}}, (0, 7, 0)),  # 0.6.0 or 0.7.0: data hashes, no version
    ({"run": {}}, (0, 6, -1)),  # before 0.6.0: no data hashes
])
def test_a_records_version_is_the_newest_that_can_have_written_it(record, newest):
    from moram_avalanche.experiments.stream_changes import record_version

    assert record_version(record)[0] == newest


def test_every_gated_stream_is_a_registered_benchmark_and_lm_cl_changed_in_0_6_0():
    from moram_avalanche.benchmarks import benchmark_entry
    from moram_avalanche.experiments.stream_changes import STREAM_CHANGES, last_change

    for change in STREAM_CHANGES:
        assert benchmark_entry(change.stream).name == change.stream
    assert last_change("lm-cl").version == "0.6.0"  # CHANGELOG.md: O-LoRA's prompts
    assert last_change("synthetic-text") is None


@pytest.mark.parametrize("stream, record, refused", [
    ("lm-cl", {"run": {}}, True),  # a 0.5.0 folder under 0.6.0's prompts
    ("lm-cl", {"version": "0.5.0"}, True),
    ("lm-cl", {"contents": {}}, False),  # 0.6.0 or 0.7.0
    ("codealpaca", {"version": "0.6.0", "contents": {}}, True),
    ("codealpaca", {"contents": {}}, False),  # possibly 0.7.0: not certainly older
    ("synthetic-text", {"run": {}}, False),  # never changed
])
def test_the_gate_refuses_only_records_certainly_older(stream, record, refused):
    from moram_avalanche.experiments.stream_changes import check_stream_version

    record = {**record, "run": {"benchmark": stream}}
    if refused:
        with pytest.raises(ValueError, match=f"--benchmark {stream} changed in .*new folder"):
            check_stream_version(record, "the run in x")
    else:
        check_stream_version(record, "the run in x")
