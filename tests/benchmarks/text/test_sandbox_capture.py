"""The evaluating process's bounded exchange with a sandbox: what it keeps of a flood of output,
and that a process left holding the pipes does not keep it waiting. Real processes, bounded
(a few MiB of output, sleepers of seconds killed by pid afterwards)."""

import subprocess
import sys
import time

from moram_avalanche.benchmarks.text.sandbox.capture import Kept, exchange
from moram_avalanche.benchmarks.text.sandbox.run import stop
from sandbox_cases import kill_marked, new_marker


def test_kept_holds_the_last_bytes_up_to_its_limit_and_counts_the_rest():
    kept = Kept(10)
    for chunk in (b"abcd", b"efghij", b"klm", b""):
        kept.take(chunk)
    assert (bytes(kept.data), kept.dropped) == (b"defghijklm", 3)


def started(code):
    return subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)


def outputs(process, limit):
    return {"stdout": (process.stdout.fileno(), limit), "stderr": (process.stderr.fileno(), limit)}


def test_a_flood_is_read_to_its_end_and_only_the_limit_kept():
    process = started("import os, sys; data = sys.stdin.buffer.read(); "
                      "[os.write(1, data) for _ in range(80)]; os.write(1, b'end'); os.write(2, b'done')")
    try:
        seen = exchange(process, b"y" * 2 ** 16, outputs(process, 2 ** 20), time.monotonic() + 30, 0.5)
    finally:
        stop(process)
    assert seen.ended and process.returncode == 0
    out = seen.outputs["stdout"]
    assert bytes(out.data) == b"y" * (2 ** 20 - 3) + b"end" and out.dropped == 80 * 2 ** 16 + 3 - 2 ** 20
    assert bytes(seen.outputs["stderr"].data) == b"done"


def test_a_process_left_holding_the_pipes_does_not_hold_the_reader():
    marker = new_marker()
    holder = (f"import os, sys; os.posix_spawn(sys.executable, [sys.executable, '-c', "
              f"'import time; time.sleep(20)  # {marker}'], dict(), setsid=True); print('left')")
    process = started(holder)
    try:
        start = time.monotonic()
        seen = exchange(process, b"", outputs(process, 100), start + 30, 0.5)
        waited = time.monotonic() - start
        stop(process)
    finally:
        left = kill_marked(marker)
    assert left, "the sleeper never held the pipes: this test tests nothing"
    assert seen.ended and bytes(seen.outputs["stdout"].data) == b"left\n"
    assert waited < 10, f"the reader waited {waited:.1f} s for a sleeper of 20 s"


def test_the_deadline_ends_the_exchange_with_a_process_that_does_not_end():
    process = started("import time; time.sleep(20)")
    try:
        seen = exchange(process, b"", outputs(process, 100), time.monotonic() + 0.3, 0.5)
        assert not seen.ended and process.poll() is None
    finally:
        stop(process)
    assert process.returncode == -9
