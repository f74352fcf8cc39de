"""A seccomp filter (seccomp(2), Linux's system-call filter: what bubblewrap's ``--seccomp`` and
nsjail's policies load) that the program and every process it starts inherit and cannot lift:

* ``socket()`` creates only the families in ``socket_families`` (the namespace sandboxes:
  ``AF_INET`` and ``AF_INET6``, which reach only the sandbox's own empty network namespace; the
  Python guard: none). So no ``AF_UNIX`` socket -- a read-only mount does not stop a
  ``connect()`` to a socket file (``/run/...``, a container runtime's), and a unix socket is not
  part of the network namespace -- and no ``AF_VSOCK`` (a VM's host), ``AF_NETLINK`` or
  ``AF_PACKET``; ``socketpair()`` stays allowed (it reaches nothing);
* no new namespace (``unshare``, ``setns``, ``clone`` with a ``CLONE_NEW*`` flag; ``clone3``
  answers ENOSYS, so the C library falls back to ``clone``, as container runtimes do): the program
  cannot regain capabilities inside a user namespace of its own;
* no ``ptrace``, ``process_vm_readv`` / ``process_vm_writev`` (another process's memory), no
  ``io_uring_setup`` (whose operations bypass this filter);
* a system call of another ABI (32-bit ``int 0x80`` or x32 on x86-64) is refused.

A refused call fails with EPERM (ENOSYS for ``clone3``). Written for the two architectures the
package runs on (:data:`ARCHITECTURES`, numbers from the kernel's ``syscall_64.tbl`` and the
generic ``unistd.h``); elsewhere :func:`seccomp_missing` says so.

Standard library only: this module runs in the sandboxed process (see ``__init__``).
"""

from __future__ import annotations

import ctypes
import errno
import platform
from typing import Dict, Iterable, List, Optional, Tuple

from .libc import (
    CLONE_NEWCGROUP,
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWPID,
    CLONE_NEWUSER,
    CLONE_NEWUTS,
    PR_SET_NO_NEW_PRIVS,
    PR_SET_SECCOMP,
    prctl,
)

#: machine -> (AUDIT_ARCH_* of its native ABI, system-call numbers, the bit that marks a call of a
#: second ABI sharing that AUDIT_ARCH: x86-64's x32, ``__X32_SYSCALL_BIT``; 0: none)
ARCHITECTURES: Dict[str, Tuple[int, Dict[str, int], int]] = {
    "x86_64": (0xC000003E, {"socket": 41, "clone": 56, "ptrace": 101, "unshare": 272, "setns": 308,
                            "process_vm_readv": 310, "process_vm_writev": 311, "io_uring_setup": 425,
                            "clone3": 435}, 0x40000000),
    "aarch64": (0xC00000B7, {"socket": 198, "clone": 220, "ptrace": 117, "unshare": 97, "setns": 268,
                             "process_vm_readv": 270, "process_vm_writev": 271, "io_uring_setup": 425,
                             "clone3": 435}, 0),
}
#: the clone flags that make a namespace
NAMESPACE_FLAGS = (CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID
                   | CLONE_NEWNET)
#: system calls refused outright
REFUSED = ("ptrace", "unshare", "setns", "process_vm_readv", "process_vm_writev", "io_uring_setup")

# classic BPF (linux/filter.h, linux/seccomp.h)
LD_W_ABS, JEQ_K, JGE_K, JSET_K, RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
RET_ALLOW, RET_ERRNO = 0x7FFF0000, 0x00050000
SECCOMP_MODE_FILTER = 2
NR_OFFSET, ARCH_OFFSET, ARG0_OFFSET = 0, 4, 16  # struct seccomp_data (little-endian: arg 0's low word)


def seccomp_missing() -> Optional[str]:
    """None when this machine has a filter here, else why not."""
    if platform.machine() not in ARCHITECTURES:
        return (f"the sandbox's seccomp filter is written for {', '.join(ARCHITECTURES)}, not {platform.machine()}")
    return None


def filter_program(socket_families: Iterable[int], machine: Optional[str] = None) -> List[Tuple[int, int, int, int]]:
    """The filter as ``(code, jt, jf, k)`` instructions (module docstring)."""
    arch, numbers, second_abi_bit = ARCHITECTURES[machine or platform.machine()]
    deny, no_syscall = RET_ERRNO | errno.EPERM, RET_ERRNO | errno.ENOSYS
    code: List[tuple] = [(LD_W_ABS, 0, 0, ARCH_OFFSET), (JEQ_K, "next", "deny", arch), (LD_W_ABS, 0, 0, NR_OFFSET)]
    if second_abi_bit:
        code.append((JGE_K, "deny", "next", second_abi_bit))
    code += [(JEQ_K, "deny", "next", numbers[name]) for name in REFUSED]
    code += [(JEQ_K, "no_syscall", "next", numbers["clone3"]), (JEQ_K, "clone", "next", numbers["clone"]),
             (JEQ_K, "socket", "next", numbers["socket"]), (RET_K, 0, 0, RET_ALLOW),
             ("clone",), (LD_W_ABS, 0, 0, ARG0_OFFSET), (JSET_K, "deny", "next", NAMESPACE_FLAGS),
             (RET_K, 0, 0, RET_ALLOW),
             ("socket",), (LD_W_ABS, 0, 0, ARG0_OFFSET)]
    code += [(JEQ_K, "allow", "next", family) for family in socket_families]
    code += [("deny",), (RET_K, 0, 0, deny), ("no_syscall",), (RET_K, 0, 0, no_syscall), ("allow",),
             (RET_K, 0, 0, RET_ALLOW)]
    return assemble(code)


def assemble(code: List[tuple]) -> List[Tuple[int, int, int, int]]:
    """Resolve labels: a 1-tuple ``(name,)`` marks the next instruction; a jump's ``jt`` / ``jf``
    may name a label ("next": the following instruction), turned into BPF's forward offset."""
    labels, at = {}, 0
    for item in code:
        if len(item) == 1:
            labels[item[0]] = at
        else:
            at += 1
    out, at = [], 0
    for item in code:
        if len(item) == 1:
            continue
        op, jt, jf, k = item
        out.append((op, offset(jt, labels, at), offset(jf, labels, at), k))
        at += 1
    return out


def offset(target, labels: Dict[str, int], at: int) -> int:
    """The forward offset from instruction ``at`` to ``target`` (a label, "next" or a number)."""
    if isinstance(target, int):
        return target
    if target == "next":
        return 0
    return labels[target] - at - 1


class SockFilter(ctypes.Structure):
    """``struct sock_filter``."""

    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class SockFprog(ctypes.Structure):
    """``struct sock_fprog``."""

    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(SockFilter))]


def install_seccomp(socket_families: Iterable[int]) -> None:
    """Forbid new privileges (``PR_SET_NO_NEW_PRIVS``, which a filter needs and which keeps any
    ``exec`` from gaining them: set-uid files, file capabilities) and load the filter."""
    missing = seccomp_missing()
    if missing:
        raise OSError(missing)
    program = filter_program(socket_families)
    instructions = (SockFilter * len(program))(*[SockFilter(*instruction) for instruction in program])
    fprog = SockFprog(len(program), instructions)  # kept referenced until the kernel has copied it
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog))


__all__ = ["ARCHITECTURES", "NAMESPACE_FLAGS", "REFUSED", "SockFilter", "SockFprog", "assemble",
           "filter_program", "install_seccomp", "offset", "seccomp_missing"]
