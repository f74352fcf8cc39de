"""One process owns a run folder at a time: an OS lock (``fcntl.flock``) on a file in it.

The operating system releases the lock when its owner exits, however it exits (``kill -9``
included), so a stale lock file never blocks: only a live owner does. The owner writes its
process id, host, command line and start time into the file, and a refused process names them.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import Optional

from .errors import UserError
from .paths import LOCK_NAME, PathError

try:
    import fcntl
except ImportError:  # Windows: no flock; the lock is then advisory only (see RunFolderLock)
    fcntl = None


class FolderLockedError(UserError, RuntimeError):
    """Another live process holds the run folder's lock."""


#: lock files this process holds, by resolved path (locking a folder twice is refused clearly)
_HELD: dict = {}


class RunFolderLock:
    """Hold ``folder``'s lock while the ``with`` block runs (or between :meth:`acquire` and
    :meth:`release`).

    Args:
        folder: the run (or comparison) folder; created if missing.
        what: how messages name it (``"--log-dir"``, ``"--out"``).

    Acquiring never waits: when another live process holds the folder, a
    :class:`FolderLockedError` names that process (pid, host, command, start time) and the
    fix. The same process locking the folder a second time is refused the same way (it would
    be two runs writing one folder). The lock file (:data:`~moram_avalanche.utils.paths.LOCK_NAME`)
    stays in the folder after release: it is neither a temporary of an interrupted write nor a
    sign that the folder holds a run (:func:`~moram_avalanche.utils.paths.is_new_folder`).
    """

    def __init__(self, folder, what: str = "run folder") -> None:
        self.folder = Path(folder).expanduser()
        self.what = what
        self.path = self.folder / LOCK_NAME
        self._handle = None

    def acquire(self) -> "RunFolderLock":
        if self._handle is not None:
            return self
        key = os.path.realpath(self.path)
        if key in _HELD:
            raise FolderLockedError(
                f"{self.what} {self.folder} is already in use by this process (pid {os.getpid()}): "
                "one run writes a folder at a time; give each run its own folder")
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            handle = open(self.path, "a+", encoding="utf-8")
        except OSError as err:
            raise PathError(f"{self.what} {self.folder} cannot be locked: {err.strerror or err} "
                            f"({err.filename or self.path}); give a folder you can write in") from None
        if fcntl is not None:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except (BlockingIOError, PermissionError):
                handle.seek(0)
                owner = _describe_owner(handle.read())
                handle.close()
                raise FolderLockedError(
                    f"{self.what} {self.folder} is in use by {owner}: one run writes a folder at a "
                    "time; wait for it to finish (or stop it), or give another folder") from None
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                 "command": " ".join(sys.argv)[:500],
                                 "started": time.strftime("%Y-%m-%d %H:%M:%S %Z")}) + "\n")
        handle.flush()
        self._handle = handle
        _HELD[key] = self
        return self

    def release(self) -> None:
        if self._handle is None:
            return
        _HELD.pop(os.path.realpath(self.path), None)
        if fcntl is not None:
            fcntl.flock(self._handle.fileno(), fcntl.LOCK_UN)
        self._handle.close()
        self._handle = None

    @property
    def held(self) -> bool:
        return self._handle is not None

    def __enter__(self) -> "RunFolderLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()

    def __del__(self):
        try:
            self.release()
        except Exception:
            pass


def _describe_owner(text: str) -> str:
    """``"process 1234 on host (started ..., command: ...)"`` from the lock file's record."""
    try:
        owner = json.loads(text.strip().splitlines()[0]) if text.strip() else None
    except (ValueError, IndexError):
        owner = None
    if not isinstance(owner, dict):
        return "another process (it has not recorded itself yet)"
    details = [f"started {owner.get('started', '?')}"]
    if owner.get("command"):
        details.append(f"command: {owner['command']}")
    return f"process {owner.get('pid', '?')} on {owner.get('host', '?')} ({', '.join(details)})"


def folder_owner(folder) -> Optional[str]:
    """Who holds ``folder``'s lock now (as a refusal would name them), or None when nobody does."""
    path = Path(folder) / LOCK_NAME
    if fcntl is None or not path.is_file():
        return None
    with open(path, "r", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        except (BlockingIOError, PermissionError):
            return _describe_owner(handle.read())
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
    return None


__all__ = ["FolderLockedError", "RunFolderLock", "folder_owner"]
