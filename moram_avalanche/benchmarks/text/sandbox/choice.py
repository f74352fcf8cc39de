"""Which sandbox: the registry :data:`ISOLATIONS`, strongest first, and the one used by default
(:func:`default_isolation`: the first that works here, said once in the log)."""

from __future__ import annotations

import functools
import logging
import threading
from typing import Dict, Optional

from .bubblewrap import BUBBLEWRAP
from .builtin import NAMESPACES, PYTHON_GUARD
from .isolation import Isolation
from .limits import MEMORY_LIMIT, TIMEOUT
from .run import run_job

log = logging.getLogger(__name__)

#: name -> sandbox, strongest first
ISOLATIONS: Dict[str, Isolation] = {isolation.name: isolation for isolation in (BUBBLEWRAP, NAMESPACES, PYTHON_GUARD)}
#: held while a sandbox is tried (parallel workers' first programs wait for one trial, not run four)
CHOOSING = threading.RLock()
#: a program every sandbox must pass: the trial run of :func:`isolation_missing`
PROBE = {"task_id": "sandbox-probe", "prompt": "def probe():\n", "entry_point": "probe",
         "test": "def check(candidate):\n    assert candidate() == 1\n"}


def isolation_missing(name: str) -> Optional[str]:
    """None when the sandbox ``name`` works here, else why not and the fix: its own look first
    (:attr:`~.isolation.Isolation.missing`), then one program run through it (namespaces a kernel
    or a container refuses show only then). Looked at once per process."""
    if name not in ISOLATIONS:
        raise ValueError(f"no sandbox named {name!r}; the sandboxes are {', '.join(ISOLATIONS)}")
    with CHOOSING:
        return tried(ISOLATIONS[name])


@functools.lru_cache(maxsize=None)
def tried(isolation: Isolation) -> Optional[str]:
    """:func:`isolation_missing` of one sandbox, looked at once."""
    name = isolation.name
    missing = isolation.missing()
    if missing:
        return missing
    trial = run_job(PROBE, "    return 1\n", TIMEOUT, memory_limit=MEMORY_LIMIT, file_size_limit=2 ** 20,
                    isolation=isolation)
    return None if trial.passed else f"the {name} sandbox does not start here: {trial.result}"


def default_isolation() -> str:
    """The strongest sandbox that works here (:data:`ISOLATIONS`' order), said once in the log."""
    with CHOOSING:
        return strongest()


@functools.lru_cache(maxsize=None)
def strongest() -> str:
    """:func:`default_isolation`, found once."""
    missing = {}
    for name in ISOLATIONS:
        missing[name] = isolation_missing(name)
        if missing[name] is None:
            break
    else:
        raise RuntimeError("no sandbox works here: " + "; ".join(f"{k}: {v}" for k, v in missing.items()))
    why_not = "; ".join(f"not {k}: {v}" for k, v in missing.items() if v)
    say = log.warning if ISOLATIONS[name].python_guard else log.info  # the fallback is worth a warning
    say("generated code runs in the %s sandbox (%s)%s", name, ISOLATIONS[name].contains,
        f"; {why_not}" if why_not else "")
    return name


__all__ = ["CHOOSING", "ISOLATIONS", "PROBE", "default_isolation", "isolation_missing", "strongest", "tried"]
