"""Files: atomic writes (a reader never sees a half-written file, a crash never loses the old
one), the temporaries a killed write leaves behind, and output folders that can be written."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import Any, Callable, List

#: what :func:`atomic_write` names its temporary file: ``.<name>.<random>.tmp`` beside the target
TEMPORARY = re.compile(r"^\..+\.[A-Za-z0-9_]{8}\.tmp$")


def _read_umask() -> int:
    mask = os.umask(0o022)  # read once, at import, before any thread of ours writes files
    os.umask(mask)
    return mask


_UMASK = _read_umask()


def atomic_write(path, write: Callable[[Any], None], mode: str = "w") -> Path:
    """Call ``write(file)`` on a temporary file next to ``path``, then rename it over ``path``.

    The file gets the permissions of a plainly created one (``0o666`` less the umask), not the
    owner-only ones of :func:`tempfile.mkstemp`. A process killed during the write leaves its
    temporary behind; :func:`remove_temporaries` clears them.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(handle, 0o666 & ~_UMASK)
        with os.fdopen(handle, mode) as file:
            write(file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def atomic_write_text(path, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (:func:`atomic_write`); returns ``path``."""
    return atomic_write(path, lambda f: f.write(text))


def atomic_write_bytes(path, data: bytes) -> Path:
    """Write ``data`` to ``path`` atomically (:func:`atomic_write`); returns ``path``."""
    return atomic_write(path, lambda f: f.write(data), mode="wb")


def remove_temporaries(folder) -> List[Path]:
    """Delete the temporaries that :func:`atomic_write` calls killed mid-write left in ``folder``
    (``.checkpoint.pt.a1b2c3d4.tmp``: as large as the file being written); returns them.

    Only the folder's own files are looked at, not its sub-folders. Call it when a process
    (re)starts writing in ``folder``, never while another one writes there.
    """
    folder = Path(folder)
    if not folder.is_dir():
        return []
    removed = []
    for entry in folder.iterdir():
        if TEMPORARY.match(entry.name) and entry.is_file():
            entry.unlink(missing_ok=True)
            removed.append(entry)
    return removed


def check_output_folder(path, what: str) -> Path:
    """``path`` as a folder this process can write in, or create; else a ValueError naming
    ``what`` (e.g. ``"--log-dir"``), the path, what is wrong and how to fix it.

    Nothing is created: writing is tried in the folder, or in its nearest existing parent (a
    temporary file, removed at once), so read-only mounts and permissions are found here,
    before anything runs.
    """
    path = Path(path).expanduser()
    existing = next(parent for parent in [path, *path.parents] if parent.exists())
    if not existing.is_dir():
        raise ValueError(f"{what} {path}: {existing} is a file, not a folder; give a folder "
                         "path (it is created if missing)")
    try:
        probe_write(existing)
    except OSError as err:
        raise ValueError(f"{what} {path} cannot be written ({err.strerror or err}); give a folder "
                         "you can write in") from None
    return path


def probe_write(folder) -> None:
    """Create and remove a temporary file in ``folder``: an OSError when it cannot be written
    (permissions, a read-only file system, a full disk)."""
    handle, probe = tempfile.mkstemp(dir=folder, prefix=".write-test.", suffix=".tmp")
    os.close(handle)
    os.unlink(probe)


__all__ = ["TEMPORARY", "atomic_write", "atomic_write_bytes", "atomic_write_text",
           "check_output_folder", "remove_temporaries"]
