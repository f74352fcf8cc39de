"""The built-in sandbox: new user, mount, PID, network, IPC, UTS and cgroup namespaces
(namespaces(7)) entered with ``unshare`` -- what bubblewrap's ``--unshare-all`` does, for where
bubblewrap is not installed.

* user: this process is root of its own user namespace (mapped to the evaluating user, so it
  gains nothing outside) with the capabilities to build the rest, dropped before the program
  runs (:mod:`.privileges`);
* mount: the read-only file system of :mod:`.filesystem`;
* PID: the reaper is the namespace's first process; when it ends the kernel kills every process
  left in it, and nothing in it sees or signals a process outside;
* network: only a loopback that is down (unix sockets are refused by :mod:`.seccomp`);
* IPC, UTS, cgroup: no shared memory or semaphores of the host, a hostname of its own.

:func:`enter_namespaces` returns in the namespace's first process; the process that called it
waits for that one and leaves with its exit status (a PID namespace is entered by the children
of the process that made it).

Standard library only: this module runs in the sandboxed process (see ``__init__``).
"""

from __future__ import annotations

import os
import signal

from .filesystem import confine_filesystem, mount_proc
from .libc import (
    CLONE_NEWCGROUP,
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWPID,
    CLONE_NEWUSER,
    CLONE_NEWUTS,
    PR_SET_PDEATHSIG,
    prctl,
    unshare,
)

#: the namespaces made
NAMESPACES = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP


def enter_namespaces(folder: str, tmpfs_size: int) -> None:
    """Enter the namespaces (module docstring); returns in the PID namespace's first process."""
    uid, gid = os.geteuid(), os.getegid()
    unshare(NAMESPACES)
    for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
        with open(f"/proc/self/{name}", "w") as handle:
            handle.write(text)
    confine_filesystem(folder, tmpfs_size)
    pid = os.fork()
    if pid:
        os._exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) % 256)
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # its parent killed, the namespace goes
    mount_proc()


__all__ = ["NAMESPACES", "enter_namespaces"]
