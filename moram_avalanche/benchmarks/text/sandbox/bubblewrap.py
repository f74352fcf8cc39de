"""The sandbox bubblewrap builds (containers/bubblewrap, ``bwrap``: the sandbox of Flatpak and of
many build systems; its options as documented in ``bwrap(1)``), used wherever ``bwrap`` is
installed (``apt-get install bubblewrap``):

* ``--unshare-all --unshare-user``: new user, mount, PID, network, IPC, UTS and cgroup
  namespaces; ``--disable-userns``: no further user namespace inside;
* ``--ro-bind / /``: the whole file system read-only; ``--tmpfs /tmp``, ``/var/tmp`` and the
  working folder (``--size`` :data:`~.limits.TMPFS_SIZE` each): the only places the program can
  write, gone with the sandbox; ``/home``, ``/root`` and the evaluating user's home hidden behind
  empty read-only ones; the interpreter's folders under any of them bound back read-only
  (``inside/paths.py``);
* ``--dev /dev``: a ``/dev`` without disks; ``--proc /proc``: the sandbox's own processes only;
* ``--cap-drop ALL``, ``--new-session`` (no terminal to push input into),
  ``--die-with-parent`` (the sandbox dies with the process that started it); bubblewrap's first
  process is the PID namespace's init: everything dies when the harness's reaper ends.

Inside it the harness adds the seccomp filter (no unix socket: a read-only mount does not stop a
``connect()`` to a socket file) and the audit hook that keeps the verdict's token out of the
program's reach (``inside/seccomp.py``, ``inside/guard.py``).
"""

from __future__ import annotations

import shutil
import socket
from typing import List, Optional, Sequence

from .inside.paths import hidden_folders, kept_paths, scratch_folders
from .inside.seccomp import seccomp_missing
from .isolation import Isolation
from .limits import TMPFS_SIZE


def bubblewrap_missing() -> Optional[str]:
    """None when ``bwrap`` is on the PATH (and the seccomp filter is written for this machine)."""
    if shutil.which("bwrap") is None:
        return ("bubblewrap is not installed: apt-get install bubblewrap (Debian, Ubuntu), dnf install bubblewrap "
                "(Fedora), or your distribution's package")
    return seccomp_missing()


def bubblewrap_argv(harness: Sequence[str], folder: str) -> List[str]:
    """The ``bwrap`` command line that starts ``harness`` (module docstring)."""
    size = ["--size", str(TMPFS_SIZE)]
    scratch = [arg for path in scratch_folders() for arg in (*size, "--tmpfs", path)]
    hidden = hidden_folders()
    kept = [arg for path in kept_paths() for arg in ("--ro-bind", path, path)]
    return [shutil.which("bwrap") or "bwrap", "--unshare-all", "--unshare-user", "--disable-userns",
            "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--ro-bind", "/", "/", "--dev", "/dev",
            "--proc", "/proc", *scratch, *[arg for path in hidden for arg in ("--tmpfs", path)], *kept,
            *[arg for path in hidden for arg in ("--remount-ro", path)], *size, "--tmpfs", folder,
            "--chdir", folder, "--", *harness]


#: bubblewrap's sandbox
BUBBLEWRAP = Isolation(
    name="bubblewrap",
    contains="bubblewrap's namespaces (user, mount, PID, network, IPC, UTS, cgroup), a read-only file system "
             "with a private /tmp and working folder, no capabilities, a seccomp filter",
    network="namespace", enter="nothing", python_guard=False, seccomp_required=True,
    socket_families=(socket.AF_INET, socket.AF_INET6), missing=bubblewrap_missing, wrap=bubblewrap_argv)

__all__ = ["BUBBLEWRAP", "bubblewrap_argv", "bubblewrap_missing"]
