"""Process reaping: the program runs in a child of the reaper, and no process it starts outlives it.

The reaper is a child subreaper (``PR_SET_CHILD_SUBREAPER``, prctl(2)): a process orphaned below
it -- a daemon that forked twice, a ``setsid`` child that closed its descriptors -- is reparented
to it, not to init, so every descendant stays findable in its subtree. When the program's process
ends, or at the deadline (the program then "killed after N s"), :func:`kill_descendants` sends
SIGKILL to every descendant and reaps it, round after round until none is left (a process killed
between its ``fork`` and the next round is found in the next). In the namespace sandboxes the
kernel does it once more: the PID namespace ends with its first process, killing everything in it.

The waits are bounded: ``sigtimedwait`` until the deadline, and the killing for at most
:data:`KILL_BUDGET` seconds (a process in uninterruptible sleep cannot be reaped sooner).

Standard library only: this module runs in the sandboxed process (see ``__init__``).
"""

from __future__ import annotations

import os
import signal
import time
from typing import Callable, Dict, List, NoReturn

from .libc import PR_SET_CHILD_SUBREAPER, PR_SET_PDEATHSIG, prctl

#: seconds :func:`kill_descendants` keeps killing
KILL_BUDGET = 2.0


def run_reaped(target: Callable[[], NoReturn], kill_after: float) -> str:
    """Run ``target`` in a child process (it must end with ``os._exit``), wait for it at most
    ``kill_after`` seconds, kill every descendant, and say how the child ended: "exit code N",
    "killed by signal N" or "killed after N s"."""
    prctl(PR_SET_CHILD_SUBREAPER, 1)
    deadline = time.monotonic() + kill_after
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
    pid = os.fork()
    if pid == 0:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD})
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the reaper gone, the program goes too
        target()
    ended = wait_for(pid, deadline)
    if ended is None:
        os.kill(pid, signal.SIGKILL)
        ended = f"killed after {kill_after:g} s"
    kill_descendants()
    return ended


def wait_for(pid: int, deadline: float):
    """How ``pid`` ended ("exit code N" / "killed by signal N"), reaping every orphan that ends
    meanwhile; None at the deadline. SIGCHLD must be blocked."""
    while True:
        for child, status in reap_children():
            if child == pid:
                code = os.waitstatus_to_exitcode(status)
                return f"exit code {code}" if code >= 0 else f"killed by signal {-code}"
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        signal.sigtimedwait({signal.SIGCHLD}, min(left, 1.0))


def reap_children() -> List[tuple]:
    """``[(pid, status), ...]`` of every child that has ended (without waiting)."""
    ended = []
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return ended
        if pid == 0:
            return ended
        ended.append((pid, status))


def kill_descendants(budget: float = KILL_BUDGET) -> List[int]:
    """SIGKILL every descendant of this process and reap them, until none is left or ``budget``
    seconds have passed; the pids still there then (empty: all gone)."""
    end = time.monotonic() + budget
    while True:
        reap_children()
        left = descendants(os.getpid())
        if not left or time.monotonic() >= end:
            return left
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.001)


def descendants(root: int) -> List[int]:
    """Every process below ``root`` (from each process's parent in ``/proc/<pid>/stat``; zombies
    included, as they are not reaped yet)."""
    children: Dict[int, List[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:  # ended meanwhile
            continue
        parent = int(stat[stat.rindex(b")") + 2:].split()[1])  # after "(comm) state": the ppid
        children.setdefault(parent, []).append(int(name))
    found, stack = [], [root]
    while stack:
        for child in children.get(stack.pop(), ()):
            found.append(child)
            stack.append(child)
    return found


__all__ = ["KILL_BUDGET", "descendants", "kill_descendants", "reap_children", "run_reaped", "wait_for"]
