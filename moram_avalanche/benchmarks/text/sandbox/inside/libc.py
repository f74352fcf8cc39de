"""The C library's system calls that Python 3.11's ``os`` module lacks (``unshare``, ``mount``,
``mount_setattr``, ``prctl``, ``capset``), through ctypes; each raises OSError with the errno and
the call's name when it fails, as ``os`` functions do.

Standard library only: this module runs in the sandboxed process (see ``__init__``)."""

from __future__ import annotations

import ctypes
import os

#: the C library of this process (``None``: the symbols already loaded, glibc's or musl's)
LIBC = ctypes.CDLL(None, use_errno=True)
LIBC.syscall.restype = ctypes.c_long

# prctl(2) options (linux/prctl.h)
PR_SET_PDEATHSIG = 1
PR_SET_SECCOMP = 22
PR_CAPBSET_READ = 23
PR_CAPBSET_DROP = 24
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4

# unshare(2) flags (linux/sched.h)
CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

# mount(2) flags (linux/mount.h)
MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_NOEXEC = 0x8
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 0x40000

# mount_setattr(2) (Linux 5.12; the same number on every architecture)
SYS_MOUNT_SETATTR = 442
AT_FDCWD = -100
AT_RECURSIVE = 0x8000
MOUNT_ATTR_RDONLY = 0x1


def checked(result: int, what: str) -> int:
    """``result``, or OSError(errno, "<what>: <strerror>") when it is -1 (the C convention)."""
    if result == -1:
        number = ctypes.get_errno()
        raise OSError(number, f"{what}: {os.strerror(number)}")
    return result


def prctl(option: int, arg2: int = 0, arg3: int = 0, arg4: int = 0, arg5: int = 0) -> int:
    """prctl(2)."""
    return checked(LIBC.prctl(ctypes.c_int(option), ctypes.c_ulong(arg2), ctypes.c_ulong(arg3),
                              ctypes.c_ulong(arg4), ctypes.c_ulong(arg5)), f"prctl({option})")


def unshare(flags: int) -> None:
    """unshare(2): move this process into new namespaces."""
    checked(LIBC.unshare(ctypes.c_int(flags)), "unshare")


def _path(value):
    return None if value is None else os.fsencode(value)


def mount(source, target, fstype, flags: int, data=None) -> None:
    """mount(2); ``source``, ``fstype`` and ``data`` may be None."""
    checked(LIBC.mount(_path(source), _path(target), _path(fstype), ctypes.c_ulong(flags), _path(data)),
            f"mount {target}")


class MountAttr(ctypes.Structure):
    """``struct mount_attr`` (linux/mount.h)."""

    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64), ("propagation", ctypes.c_uint64),
                ("userns_fd", ctypes.c_uint64)]


def mount_setattr(path: str, *, set_flags: int = 0, clear_flags: int = 0, recursive: bool = False) -> None:
    """mount_setattr(2): change the flags of the mount at ``path`` (with ``recursive``, of every
    mount below it too, in one call: what a per-mount remount loop does, without its races)."""
    attr = MountAttr(set_flags, clear_flags, 0, 0)
    checked(LIBC.syscall(ctypes.c_long(SYS_MOUNT_SETATTR), ctypes.c_int(AT_FDCWD), os.fsencode(path),
                         ctypes.c_uint(AT_RECURSIVE if recursive else 0), ctypes.byref(attr),
                         ctypes.c_size_t(ctypes.sizeof(attr))), f"mount_setattr {path}")


class CapHeader(ctypes.Structure):
    """``struct __user_cap_header_struct`` (linux/capability.h)."""

    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class CapData(ctypes.Structure):
    """``struct __user_cap_data_struct`` (linux/capability.h); version 3 takes two."""

    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


#: _LINUX_CAPABILITY_VERSION_3 (64-bit capability sets, as two 32-bit halves)
CAPABILITY_VERSION_3 = 0x20080522


def clear_capabilities() -> None:
    """capset(2) with empty effective, permitted and inheritable sets (always allowed: a process
    may give up what it holds)."""
    data = (CapData * 2)()
    checked(LIBC.capset(ctypes.byref(CapHeader(CAPABILITY_VERSION_3, 0)), data), "capset")


__all__ = ["AT_RECURSIVE", "CLONE_NEWCGROUP", "CLONE_NEWIPC", "CLONE_NEWNET", "CLONE_NEWNS", "CLONE_NEWPID",
           "CLONE_NEWUSER", "CLONE_NEWUTS", "LIBC", "MOUNT_ATTR_RDONLY", "MS_BIND", "MS_NODEV", "MS_NOEXEC",
           "MS_NOSUID", "MS_PRIVATE", "MS_RDONLY", "MS_REC", "MountAttr", "PR_CAPBSET_DROP", "PR_CAPBSET_READ",
           "PR_CAP_AMBIENT", "PR_CAP_AMBIENT_CLEAR_ALL", "PR_SET_CHILD_SUBREAPER", "PR_SET_NO_NEW_PRIVS",
           "PR_SET_PDEATHSIG", "PR_SET_SECCOMP", "checked", "clear_capabilities", "mount", "mount_setattr", "prctl",
           "unshare"]
