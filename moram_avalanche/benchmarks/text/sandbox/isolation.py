"""What a sandbox is, as data: :class:`Isolation`, one record per way of containing a program,
registered in :data:`~.choice.ISOLATIONS` and read by the evaluating process (how to start the
harness) and by the harness (what to build, what to forbid). A new sandbox is a new record, not a
branch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, List, Optional, Sequence, Tuple


@dataclass(frozen=True)
class Isolation:
    """One way to contain a program.

    Attributes:
        name: what :attr:`~.outcome.Execution.isolation` says ("bubblewrap", "namespaces", "python-guard").
        contains: one sentence of what it contains (the module docstrings say what it does not).
        network: how the network is cut, as :attr:`~.outcome.Execution.network` says it
            ("namespace": a network namespace of its own; "python-guard": refused by the audit hook).
        enter: what the harness builds before the program runs (a key of its ``ENTER``:
            "namespaces", or "nothing" when the program that starts it built the sandbox).
        python_guard: whether the audit hook also refuses sockets, processes, signals, other
            processes' environments and writes outside the working folder (``inside/guard.py``).
        seccomp_required: whether the harness refuses to run the program without its seccomp
            filter (``inside/seccomp.py``); otherwise the filter is loaded where the kernel allows.
        socket_families: the address families the seccomp filter lets ``socket()`` create.
        missing: ``() -> None`` when what it needs is present here, else why not and the fix (a
            cheap look; :func:`~.choice.isolation_missing` also runs a program through it once).
        wrap: ``(harness argv, working folder) -> argv`` that starts the harness inside it.
    """

    name: str
    contains: str
    network: str
    enter: str
    python_guard: bool
    seccomp_required: bool
    socket_families: Tuple[int, ...]
    missing: Callable[[], Optional[str]]
    wrap: Callable[[Sequence[str], str], List[str]]

    def policy(self) -> dict:
        """What the harness reads of it (the job's ``policy``)."""
        return {"isolation": self.name, "network": self.network, "enter": self.enter,
                "python_guard": self.python_guard, "seccomp_required": self.seccomp_required,
                "socket_families": list(self.socket_families)}


__all__ = ["Isolation"]
