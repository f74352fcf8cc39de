"""One program through one sandbox: the evaluating process's side.

A fresh working folder and a per-run token; the verdict pipe, whose write end only the harness
inherits; the harness started in its own session (so that its process group can be killed
whole) through the sandbox's command line (:attr:`~.isolation.Isolation.wrap`), with an
environment of four variables (``PATH``, ``HOME`` and ``TMPDIR`` the working folder,
``OMP_NUM_THREADS=1``); the bounded exchange (:mod:`.capture`); then, whatever happened, the
session's process group killed and reaped (a bounded wait) and the folder removed."""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from .capture import exchange
from .inside.paths import HARNESS_FOLDER
from .inside.verdict import decode_records
from .isolation import Isolation
from .job import job_bytes
from .limits import KILL_GRACE, OUTPUT_LIMIT, REAP_GRACE, SETTLE, STOP_WAIT, TMPFS_SIZE, VERDICT_LIMIT
from .outcome import Execution, execution_of

log = logging.getLogger(__name__)


def harness_command() -> list:
    """The sandboxed interpreter's command line: this Python, isolated (``-I``: no ``PYTHON*``
    variable, no user site, not the working folder on ``sys.path``), running the harness."""
    return [sys.executable, "-I", os.path.join(HARNESS_FOLDER, "__main__.py")]


def run_job(problem: dict, completion: str, timeout: float, *, memory_limit: int, file_size_limit: int,
            isolation: Isolation) -> Execution:
    """Run ``completion`` against ``problem`` in ``isolation`` (module docstring); the problem and
    the time limit are checked by the caller."""
    folder = tempfile.mkdtemp(prefix="moram-sandbox-")
    token, kill_after = secrets.token_hex(16), timeout + KILL_GRACE
    read_end, write_end = os.pipe()
    try:
        job = job_bytes(problem, completion, timeout=timeout, kill_after=kill_after, memory=memory_limit,
                        file_size=file_size_limit, folder=folder, tmpfs_size=TMPFS_SIZE, token=token,
                        verdict_fd=write_end, isolation=isolation)
        env = {"PATH": os.defpath, "HOME": folder, "TMPDIR": folder, "OMP_NUM_THREADS": "1"}
        try:
            process = subprocess.Popen(isolation.wrap(harness_command(), folder), cwd=folder, env=env,
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       pass_fds=(write_end,), start_new_session=True)
        finally:
            os.close(write_end)
        try:
            outputs = {"stdout": (process.stdout.fileno(), OUTPUT_LIMIT),
                       "stderr": (process.stderr.fileno(), OUTPUT_LIMIT), "verdict": (read_end, VERDICT_LIMIT)}
            seen = exchange(process, job, outputs, time.monotonic() + kill_after + REAP_GRACE, SETTLE)
        finally:
            stop(process)
    finally:
        os.close(read_end)
        shutil.rmtree(folder, ignore_errors=True)
    return execution_of(decode_records(bytes(seen.outputs["verdict"].data), token), isolation,
                        stderr=seen.outputs["stderr"].data, exit_code=process.returncode, ended=seen.ended,
                        backstop=kill_after + REAP_GRACE)


def stop(process: subprocess.Popen) -> None:
    """SIGKILL the harness's process group (its first process not reaped yet, so the group's id is
    still its own), reap it (at most :data:`~.limits.STOP_WAIT` s) and close its pipes."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        process.wait(timeout=STOP_WAIT)
    except subprocess.TimeoutExpired:
        log.warning("a sandboxed process (pid %d) did not end %g s after SIGKILL; left to the system",
                    process.pid, STOP_WAIT)
    for pipe in (process.stdin, process.stdout, process.stderr):
        pipe.close()


__all__ = ["harness_command", "run_job", "stop"]
