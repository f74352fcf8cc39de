"""The two sandboxes the harness builds itself, for where bubblewrap is not installed:

* ``namespaces``: the same walls as bubblewrap's, built with ``unshare`` and ``mount``
  (``inside/namespaces.py``, ``inside/filesystem.py``): new user, mount, PID, network, IPC, UTS
  and cgroup namespaces, a read-only file system with a private ``/tmp`` and working folder, a
  ``/dev`` without disks, its own read-only ``/proc``, no capabilities, the seccomp filter. Needs
  user namespaces (``unshare --user`` works) and Linux 5.12 (``mount_setattr``);
* ``python-guard``: the fallback where the kernel refuses namespaces (a container that forbids
  ``unshare``): the program runs on the host's file system and network, held back by the audit
  hook (``inside/guard.py``: no socket, no process, no signal to another process, no other
  process's environment, no write outside its working folder), without capabilities, and with
  the seccomp filter where the kernel allows one (no socket of any family). What reaches the
  kernel without an audited Python call is not contained.
"""

from __future__ import annotations

import os
import socket
import sys
from typing import List, Optional, Sequence

from .inside.seccomp import seccomp_missing
from .isolation import Isolation


def namespaces_missing() -> Optional[str]:
    """None when this kernel offers the namespaces the built-in sandbox needs (whether it lets
    this process make them, only a trial shows: :func:`~.choice.isolation_missing`)."""
    if not sys.platform.startswith("linux"):
        return f"the built-in sandbox needs Linux's namespaces, not {sys.platform}"
    absent = [kind for kind in ("user", "mnt", "pid", "net") if not os.path.exists(f"/proc/self/ns/{kind}")]
    if absent:
        return f"this kernel has no {', '.join(absent)} namespaces"
    return seccomp_missing()


def started_directly(harness: Sequence[str], folder: str) -> List[str]:
    """The harness's own command line: it builds (or needs) no outer sandbox."""
    return list(harness)


#: the built-in namespaces
NAMESPACES = Isolation(
    name="namespaces",
    contains="its own namespaces (user, mount, PID, network, IPC, UTS, cgroup), a read-only file system with a "
             "private /tmp and working folder, no capabilities, a seccomp filter",
    network="namespace", enter="namespaces", python_guard=False, seccomp_required=True,
    socket_families=(socket.AF_INET, socket.AF_INET6), missing=namespaces_missing, wrap=started_directly)

#: the fallback
PYTHON_GUARD = Isolation(
    name="python-guard",
    contains="an audit hook (no socket, process, signal, other environment or write outside its folder), "
             "no capabilities, a seccomp filter where the kernel allows; the host's file system and network",
    network="python-guard", enter="nothing", python_guard=True, seccomp_required=False, socket_families=(),
    missing=lambda: None, wrap=started_directly)

__all__ = ["NAMESPACES", "PYTHON_GUARD", "namespaces_missing", "started_directly"]
