"""The built-in sandbox's file system (a mount namespace, mount_namespaces(7)), as bubblewrap's
``--ro-bind / / --dev /dev --proc /proc --tmpfs /tmp`` builds it:

* every mount read-only (one ``mount_setattr(MOUNT_ATTR_RDONLY, AT_RECURSIVE)``, Linux 5.12): no
  file outside can be written, created, truncated, renamed or removed, by any call;
* a private ``/tmp`` and ``/var/tmp`` and the program's working folder, each a fresh tmpfs of
  ``tmpfs_size`` bytes (the only places it can write; gone with the namespace); the home folders
  hidden behind empty read-only ones; the interpreter's folders under any of them bound back
  read-only (:mod:`.paths`);
* a ``/dev`` of its own, a tmpfs holding only ``null``, ``zero``, ``full``, ``random``,
  ``urandom`` and ``tty`` (bound from the host's) -- no disk: root without capabilities still owns
  the host's block devices;
* a read-only ``/proc`` of the sandbox's PID namespace (:func:`mount_proc`): its own processes
  only (no other process's environment), no ``/proc/sys`` or ``/proc/sysrq-trigger`` write.

Mount events stay inside (``/`` made private first: nothing propagates to the host).

Standard library only: this module runs in the sandboxed process (see ``__init__``).
"""

from __future__ import annotations

import os

from .libc import (
    MOUNT_ATTR_RDONLY,
    MS_BIND,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_RDONLY,
    MS_REC,
    mount,
    mount_setattr,
)
from .paths import hidden_folders, kept_paths, scratch_folders

#: the device nodes the sandbox's ``/dev`` holds (bubblewrap's ``--dev`` set, less ``ptmx``)
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
#: the links of a ``/dev`` (as bubblewrap's ``--dev`` makes them)
DEVICE_LINKS = {"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1",
                "stderr": "/proc/self/fd/2"}


def confine_filesystem(folder: str, tmpfs_size: int) -> None:
    """Build the file system of the module docstring in this process's (new) mount namespace, and
    move into ``folder``."""
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    kept = {path: os.open(path, os.O_PATH | os.O_CLOEXEC) for path in kept_paths()}
    devices = {name: os.open(f"/dev/{name}", os.O_PATH | os.O_CLOEXEC) for name in DEVICES
               if os.path.exists(f"/dev/{name}")}
    scratch, tmpfs = scratch_folders(), f"size={int(tmpfs_size)}"
    for private in scratch:
        mount("tmpfs", private, "tmpfs", MS_NOSUID | MS_NODEV, tmpfs + ",mode=1777")
    for hidden in hidden_folders():
        mount("tmpfs", hidden, "tmpfs", MS_NOSUID | MS_NODEV, "size=65536,mode=0755")
    for path, fd in kept.items():
        os.makedirs(path, exist_ok=True)
        mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC)
        os.close(fd)
    os.makedirs(folder, exist_ok=True)
    mount("tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV, tmpfs + ",mode=0700")
    mount("tmpfs", "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "size=65536,mode=0755")
    for name, fd in devices.items():
        open(f"/dev/{name}", "w").close()
        mount(f"/proc/self/fd/{fd}", f"/dev/{name}", None, MS_BIND)
        os.close(fd)
    for name, target in DEVICE_LINKS.items():
        os.symlink(target, f"/dev/{name}")
    mount_setattr("/", set_flags=MOUNT_ATTR_RDONLY, recursive=True)
    for writable in (*scratch, folder):
        mount_setattr(writable, clear_flags=MOUNT_ATTR_RDONLY)
    os.chdir(folder)  # the tmpfs, not the host folder under it


def mount_proc() -> None:
    """A read-only ``/proc`` for this PID namespace (its first process calls it)."""
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY)


__all__ = ["DEVICES", "DEVICE_LINKS", "confine_filesystem", "mount_proc"]
