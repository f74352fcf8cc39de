"""The verdict channel and the rule that turns its records into an Execution: records written by
hand, read back; every malformed or foreign line skipped, never an error."""

import pytest

from moram_avalanche.benchmarks.text.sandbox.builtin import NAMESPACES
from moram_avalanche.benchmarks.text.sandbox.inside.verdict import (
    FIELD_LIMIT,
    REAPER,
    SETUP,
    TEST,
    decode_records,
    encode_record,
)
from moram_avalanche.benchmarks.text.sandbox.outcome import execution_of

TOKEN = "0123456789abcdef0123456789abcdef"


def test_a_record_is_the_token_its_author_and_hex_fields():
    assert encode_record(TOKEN, TEST, {"result": "passed"}) == f"\n{TOKEN} test result={b'passed'.hex()}\n".encode()
    line = encode_record(TOKEN, REAPER, {"ended": "exit code 0", "isolation": "bubblewrap"})
    assert decode_records(line, TOKEN) == {REAPER: {"ended": "exit code 0", "isolation": "bubblewrap"}}


def test_a_field_is_clipped_and_any_text_survives():
    text = "failed: ünïcode \n with a newline and \udcff a lone surrogate " + "é" * FIELD_LIMIT
    line = encode_record(TOKEN, TEST, {"result": text})
    assert len(line) < 4096  # PIPE_BUF: written at once
    record = decode_records(b"unfinished junk" + line, TOKEN)[TEST]
    assert record["result"].startswith("failed: ünïcode \n with a newline and ? a lone surrogate éé")
    assert len(record["result"].encode()) <= FIELD_LIMIT + 2  # clipped (a cut character becomes one U+FFFD)


def test_foreign_malformed_and_cut_lines_are_skipped():
    good = encode_record(TOKEN, TEST, {"result": "failed: wrong"})
    lines = [
        encode_record("f" * 32, TEST, {"result": "passed"}),  # another token
        f"{TOKEN} test result=zz\n".encode(),  # not hex
        f"{TOKEN} test result\n".encode(),  # no '='
        f"{TOKEN} test result=\xff\n".encode("latin-1"),  # not ASCII
        b"passed\n", b"\n", b"\xff\xfe" * 10 + b"\n",
        TOKEN.encode() + b"\n",  # no author
        good,
        encode_record(TOKEN, TEST, {"result": "passed"}),  # a second test record: the first counts
        encode_record(TOKEN, SETUP, {"failure": "cut"})[:-9],  # cut short: odd hex
    ]
    assert decode_records(b"".join(lines), TOKEN) == {TEST: {"result": "failed: wrong"}}
    assert decode_records(b"", TOKEN) == {}


def execution(records, *, ended=True, stderr=b"", exit_code=0):
    return execution_of(records, NAMESPACES, stderr=stderr, exit_code=exit_code, ended=ended, backstop=8.0)


@pytest.mark.parametrize("records,result", [
    ({TEST: {"result": "passed"}, REAPER: {"ended": "exit code 0"}}, "passed"),
    ({TEST: {"result": "timed out"}, REAPER: {"ended": "exit code 0"}}, "timed out"),
    ({TEST: {"result": "failed: boom"}, REAPER: {"ended": "killed after 5 s"}}, "failed: boom"),
    ({SETUP: {"failure": "OSError: mount"}}, "failed: the sandbox could not be built: OSError: mount"),
    ({REAPER: {"ended": "killed after 5 s"}}, "killed after 5 s"),
    ({REAPER: {"ended": "exit code 0"}}, "failed: the program ended before its test finished (exit code 0)"),
    ({REAPER: {"ended": "killed by signal 11"}},
     "failed: the program ended before its test finished (killed by signal 11)"),
])
def test_the_result_is_the_first_record_that_tells_it(records, result):
    outcome = execution(records)
    assert outcome.result == result and outcome.passed == (result == "passed")
    assert (outcome.isolation, outcome.network) == ("namespaces", "namespace")


def test_without_any_record_the_result_says_why_and_no_sandbox_is_claimed():
    assert execution({}, ended=False).result == "killed after 8 s"
    assert execution({}, stderr=b"bwrap: setting up uid map: Permission denied\n", exit_code=1).result == (
        "failed: no verdict from the sandbox (bwrap: setting up uid map: Permission denied)")
    silent = execution({}, exit_code=-9)
    assert silent.result == "failed: no verdict from the sandbox (exit code -9)"
    assert (silent.passed, silent.isolation, silent.network) == (False, "", "")
