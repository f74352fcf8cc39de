"""Bounded exchange with the sandbox: the job written to its stdin, its stdout, stderr and verdict
descriptor read, every wait bounded.

* Each output keeps its last bytes up to its limit (:data:`~.limits.OUTPUT_LIMIT` for stdout and
  stderr, :data:`~.limits.VERDICT_LIMIT` for the verdict, whose records come last) and reads and
  drops the rest, so the evaluating process's memory does not grow with what a program prints,
  and a program never blocks on a full pipe.
* It ends at the deadline, or :data:`~.limits.SETTLE` seconds after the sandbox's first process
  ended, whether or not every pipe reached end-of-file: a process the sandbox failed to kill that
  still holds a pipe (or a copy of it) cannot hold the evaluating process.
* The first process's end is seen without reaping it (``waitid(..., WNOWAIT)``; a pidfd wakes the
  wait where the kernel has them, else a poll every :data:`POLL` s), so its process group id
  cannot be reused before the caller kills the group.
"""

from __future__ import annotations

import os
import selectors
import subprocess
import time
from dataclasses import dataclass, field
from typing import Dict, Optional, Tuple

#: seconds between looks at the process where no pidfd tells when it ends
POLL = 0.02
#: bytes read or written at a time
CHUNK = 2 ** 16


@dataclass
class Kept:
    """An output's last ``limit`` bytes (what comes last matters: the verdict's records, a
    traceback's last line), and how many bytes before them were dropped."""

    limit: int
    data: bytearray = field(default_factory=bytearray)
    dropped: int = 0

    def take(self, chunk: bytes) -> None:
        """Add ``chunk`` (at most :data:`CHUNK` bytes: the data never holds much more than the limit)."""
        self.data += chunk
        excess = len(self.data) - self.limit
        if excess > 0:
            del self.data[:excess]
            self.dropped += excess


@dataclass
class Exchange:
    """What :func:`exchange` saw: each output, and whether the first process ended in time."""

    outputs: Dict[str, Kept]
    ended: bool


def exchange(process: subprocess.Popen, data: bytes, outputs: Dict[str, Tuple[int, int]], deadline: float,
             settle: float) -> Exchange:
    """Write ``data`` to ``process``'s stdin and read ``outputs`` (name -> (descriptor, limit))
    until the process has ended and every output is at end-of-file, or ``settle`` seconds after it
    ended, or the ``deadline`` (``time.monotonic``) -- whichever comes first (module docstring).
    The descriptors are left open; stdin is closed."""
    selector = selectors.DefaultSelector()
    kept = {name: Kept(limit) for name, (_, limit) in outputs.items()}
    for name, (fd, _) in outputs.items():
        os.set_blocking(fd, False)
        selector.register(fd, selectors.EVENT_READ, name)
    stdin = process.stdin.fileno()
    os.set_blocking(stdin, False)
    selector.register(stdin, selectors.EVENT_WRITE, None)
    pending = memoryview(data)
    watch = exit_watch(process.pid)
    if watch is not None:
        selector.register(watch, selectors.EVENT_READ, watch)
    ended_at: Optional[float] = None
    try:
        while True:
            now = time.monotonic()
            if ended_at is None and has_ended(process.pid):
                ended_at = now
            reading = any(key.data in kept for key in selector.get_map().values())
            end = deadline if ended_at is None else min(deadline, ended_at + settle)
            if (ended_at is not None and not reading) or now >= end:
                break
            wait = end - now if watch is not None or ended_at is not None else min(end - now, POLL)
            for key, _ in selector.select(wait):
                if key.data is None:
                    pending = write_some(selector, stdin, pending)
                    if not pending:  # all written: end-of-file for the harness
                        process.stdin.close()
                elif key.data in kept:
                    read_some(selector, key.fd, kept[key.data])
                else:  # the pidfd: the process ended (seen at the top of the loop)
                    selector.unregister(key.fd)
    finally:
        selector.close()
        process.stdin.close()
        if watch is not None:
            os.close(watch)
    return Exchange(kept, ended_at is not None)


def write_some(selector: selectors.BaseSelector, fd: int, pending: memoryview) -> memoryview:
    """Write what the pipe takes of ``pending``; stop writing (unregister) at its end or a closed pipe."""
    try:
        pending = pending[os.write(fd, pending[:CHUNK]):]
    except BlockingIOError:
        return pending
    except OSError:  # the harness is gone (or closed its stdin)
        pending = pending[:0]
    if not pending:
        selector.unregister(fd)
    return pending


def read_some(selector: selectors.BaseSelector, fd: int, kept: Kept) -> None:
    """Read what is there into ``kept``; stop reading at end-of-file."""
    try:
        chunk = os.read(fd, CHUNK)
    except BlockingIOError:
        return
    if chunk:
        kept.take(chunk)
    else:
        selector.unregister(fd)


def exit_watch(pid: int) -> Optional[int]:
    """A pidfd of ``pid`` (readable once it ends), or None where the kernel or Python has none."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def has_ended(pid: int) -> bool:
    """Whether the child ``pid`` has ended, without reaping it."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


__all__ = ["CHUNK", "Exchange", "Kept", "POLL", "exchange", "exit_watch", "has_ended", "read_some", "write_some"]
