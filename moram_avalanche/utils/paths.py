"""Paths named by the user, checked before anything is loaded or written.

Output folders (:func:`check_run_path`): an empty path (``--log-dir ''`` is the current folder
and would overwrite its ``results.json``), a folder inside, equal to or around a data root (it
would become a class of the dataset on the next run), symbolic-link loops, dangling links, a
file where a folder is expected and a folder where a file is expected among the entries a run
writes, and folders that cannot be written. Input paths (:func:`check_input_path`): exists,
is of the right kind, can be read, holds no link loop.

Every refusal is a :class:`PathError` (a ValueError and a
:class:`~moram_avalanche.utils.errors.UserError`): one line with what was expected, what was
found and the fix.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Iterable, Optional, Sequence

from .errors import UserError
from .files import probe_write

#: the lock file :class:`~moram_avalanche.utils.lock.RunFolderLock` keeps in a run folder
LOCK_NAME = ".moram-run.lock"

#: the files a run writes in its folder (``experiments/runner.py`` RUN_FILES and the record)
RUN_FOLDER_FILES = ("checkpoint.pt", "checkpoint.prev.pt", "bad_images.jsonl", "settings.json",
                    "run.json", "results.json", "accuracy_matrix.csv", "accuracy_matrix.png",
                    "memory.json", "time.json", "atom_usage.png", LOCK_NAME)
#: the folders a run writes in its folder (TensorBoard's log)
RUN_FOLDER_DIRS = ("tb",)
#: the files a comparison writes at its top (``experiments/compare.py``)
COMPARE_FOLDER_FILES = ("compare.json", "table.md", "table.csv", "summary.md",
                        "accuracy_matrices.png", LOCK_NAME)
COMPARE_FOLDER_DIRS = ("tensorboard",)


class PathError(UserError, ValueError):
    """A path the user named cannot serve: the message says what, where and the fix."""


def _text(path) -> str:
    return os.fspath(path) if isinstance(path, (str, os.PathLike)) else repr(path)


def _check_given(path, what: str) -> Path:
    """``path`` as a Path; an empty or non-path value refused (``Path('')`` is the current folder)."""
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, (str, os.PathLike)):
        raise PathError(f"{what} must be a path (str or os.PathLike), got {type(path).__name__} "
                        f"{path!r}")
    text = os.fspath(path)
    if not isinstance(text, str) or not text.strip():
        raise PathError(f"{what} is empty ({text!r}): an empty path means the current folder, whose "
                        "files a run would overwrite; give a folder name, e.g. runs/moram-xtail")
    if "\x00" in text:
        raise PathError(f"{what} {text!r} holds a NUL character; give a plain path")
    return Path(text).expanduser()


def _link_problem(path: Path) -> Optional[str]:
    """Why ``path`` cannot be followed (a dangling link, a loop), or None; a missing path is fine."""
    try:
        os.stat(path)
        return None
    except FileNotFoundError:
        if os.path.lexists(path):
            return f"is a symbolic link to {os.readlink(path)!r}, which does not exist (a dangling link)"
        # a component above may be a dangling link: find it
        for parent in path.parents:
            if os.path.islink(parent) and not parent.exists():
                return f"lies under {parent}, a symbolic link to {os.readlink(parent)!r}, which does not exist"
        return None
    except OSError as err:
        if err.errno == errno.ELOOP:
            return "is (or lies under) a symbolic link that loops back on itself"
        if err.errno == errno.ENOTDIR:
            return None  # reported as "a file where a folder is expected" by the caller
        if err.errno == errno.EACCES:
            return f"cannot be looked at ({err.strerror}: a folder above it may not be searchable)"
        return f"cannot be looked at ({err.strerror or err})"


def _resolved(path: Path) -> Path:
    return Path(os.path.realpath(path))


def _overlaps(folder: Path, root: Path) -> Optional[str]:
    """How ``folder`` and the data root ``root`` overlap (both resolved), or None."""
    if folder == root:
        return "is the data root itself"
    if root in folder.parents:
        return "lies inside the data root"
    if folder in root.parents:
        return "holds the data root"
    return None


def check_run_path(path, what: str = "--log-dir", *, data_roots: Iterable = (),
                   files: Sequence[str] = RUN_FOLDER_FILES, dirs: Sequence[str] = RUN_FOLDER_DIRS,
                   subfolders: Sequence[str] = ()) -> Path:
    """``path`` as a run (or comparison) folder that can be created or written; a
    :class:`PathError` otherwise.

    Args:
        path: the folder given (a ``str`` or ``os.PathLike``; ``""`` is refused).
        what: the option or argument that named it, for messages (``"--log-dir"``, ``"--out"``).
        data_roots: folders that hold datasets (``--data-root``, ``--ref-images``): the run folder
            must be neither one of them, nor inside one, nor around one.
        files: entries that, where present, must be files (``checkpoint.pt``, ``results.json``,
            ...: :data:`RUN_FOLDER_FILES`).
        dirs: entries that, where present, must be folders (``tb``: :data:`RUN_FOLDER_DIRS`).
        subfolders: further entries that must be folders (the strategies of a comparison).

    Nothing is created; writing is tried (a temporary file, removed at once) in the folder or
    its nearest existing parent. Returns the path (``~`` expanded, not resolved).
    """
    folder = _check_given(path, what)
    problem = _link_problem(folder)
    if problem:
        raise PathError(f"{what} {folder} {problem}; remove or repair the link, or give another folder")
    existing = folder
    while not os.path.lexists(existing) and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise PathError(f"{what} {folder}: expected a folder, found a file ({existing} is a file, not a folder); "
                        "give a folder path (it is created if missing), or move the file away")
    resolved = _resolved(folder)
    for root in data_roots:
        if root is None or (isinstance(root, str) and root in ("", "synthetic", "none")):
            continue
        root_path = _resolved(Path(os.fspath(root)).expanduser())
        overlap = _overlaps(resolved, root_path)
        if overlap:
            raise PathError(f"{what} {folder} {overlap} {root}: a run's files would be read as data "
                            "(a new class, a new domain) on the next run, or the data overwritten; "
                            "give a folder outside the data root")
    if folder.is_dir():
        _check_entries(folder, what, files, dirs, subfolders)
    try:
        probe_write(existing)
    except OSError as err:
        raise PathError(f"{what} {folder} cannot be written ({err.strerror or err}) at {existing}; "
                        "give a folder you can write in") from None
    return folder


def _check_entries(folder: Path, what: str, files: Sequence[str], dirs: Sequence[str],
                   subfolders: Sequence[str]) -> None:
    for name in (*files, *dirs, *subfolders):
        entry = folder / name
        if not os.path.lexists(entry):
            continue
        problem = _link_problem(entry)
        if problem:
            raise PathError(f"{what} {folder}: {name} {problem}; remove it (the run writes it anew)")
        want_dir = name not in files
        if want_dir and not entry.is_dir():
            kind = "a file" if entry.is_file() else "not a folder"
            raise PathError(f"{what} {folder}: {name} should be a folder, found {kind} ({entry}); "
                            "move it away or give another folder")
        if not want_dir and not entry.is_file():
            kind = "a folder" if entry.is_dir() else "not a regular file"
            raise PathError(f"{what} {folder}: {name} should be a file, found {kind} ({entry}); "
                            "move it away or give another folder")


def check_compare_path(path, strategies: Sequence[str], what: str = "--out", *,
                       data_roots: Iterable = ()) -> Path:
    """:func:`check_run_path` for a comparison folder: its own files, ``tensorboard/``, one
    folder per strategy, and each strategy folder's entries (a run folder each)."""
    folder = check_run_path(path, what, data_roots=data_roots, files=COMPARE_FOLDER_FILES,
                            dirs=COMPARE_FOLDER_DIRS, subfolders=tuple(strategies))
    for name in strategies:
        if (folder / name).is_dir():
            check_run_path(folder / name, f"{what} {name}/", files=RUN_FOLDER_FILES, dirs=())
    return folder


INPUT_KINDS = ("dir", "file", "any")


def check_input_path(path, what: str, *, kind: str = "dir", fix: str = "") -> Path:
    """``path`` as an existing, readable input of ``kind`` ("dir", "file" or "any"): a data
    root, a ``--ref-images`` folder, a ``--ref-sentences`` file; a :class:`PathError` naming
    ``what``, what was found and ``fix`` otherwise. A folder must be listable; a file openable."""
    if kind not in INPUT_KINDS:
        raise ValueError(f"kind must be one of {INPUT_KINDS}, got {kind!r}")
    given = _check_given(path, what)
    fix = fix or ("give an existing folder" if kind == "dir" else "give an existing file")
    problem = _link_problem(given)
    if problem:
        raise PathError(f"{what} {given} {problem}; {fix}")
    if not os.path.exists(given):
        raise PathError(f"{what} {given}: no such {'folder' if kind == 'dir' else 'file'}; {fix}")
    if kind == "dir" and not given.is_dir():
        raise PathError(f"{what} {given}: expected a folder, found a file; {fix}")
    if kind == "file" and not given.is_file():
        found = "a folder" if given.is_dir() else "not a regular file"
        raise PathError(f"{what} {given}: expected a file, found {found}; {fix}")
    try:
        if given.is_dir():
            with os.scandir(given):
                pass
        else:
            with open(given, "rb") as handle:
                handle.read(1)
    except OSError as err:
        raise PathError(f"{what} {given} cannot be read ({err.strerror or err}); check its "
                        "permissions, or " + fix) from None
    return given


def is_new_folder(path) -> bool:
    """Whether ``path`` is missing, or holds nothing but a run lock and temporaries of
    interrupted writes (a folder a run may treat as new)."""
    from .files import TEMPORARY

    path = Path(path)
    if not path.is_dir():
        return not os.path.lexists(path)
    return all(entry.name == LOCK_NAME or TEMPORARY.match(entry.name) for entry in path.iterdir())


def folder_status(path, option: str = "--data-root") -> Optional[str]:
    """Why ``path`` (given as ``option``) is not a folder to read, in a few words, or None when it
    is one (or was not given): what a dry run prints instead of "not checked", so that a
    mistyped data root is flagged before the real run is started."""
    if path is None:
        return None
    folder = Path(path).expanduser()
    if folder.is_dir():
        return None
    if folder.exists():
        return f"{option} {folder} is a file, not a folder"
    return f"{option} {folder} does not exist: give the folder that holds the datasets"


__all__ = ["COMPARE_FOLDER_DIRS", "COMPARE_FOLDER_FILES", "INPUT_KINDS", "LOCK_NAME", "PathError",
           "RUN_FOLDER_DIRS", "RUN_FOLDER_FILES", "check_compare_path", "check_input_path",
           "check_run_path", "folder_status", "is_new_folder"]
