"""No capabilities: the program runs with empty effective, permitted, inheritable, ambient and
bounding sets (capabilities(7)). Root without capabilities has no ``CAP_DAC_OVERRIDE`` (it cannot
write other users' files), no ``CAP_SYS_ADMIN`` (no mount), no ``CAP_KILL`` (no signal to other
users' processes), no ``CAP_SYS_RESOURCE`` (the resource limits bind it); with the bounding set
empty and ``no_new_privs`` (:mod:`.seccomp`), no ``exec`` gives any back (a set-uid file, file
capabilities, or root's own rule that ``exec`` refills the permitted set).

Standard library only: this module runs in the sandboxed process (see ``__init__``).
"""

from __future__ import annotations

from .libc import (
    PR_CAP_AMBIENT,
    PR_CAP_AMBIENT_CLEAR_ALL,
    PR_CAPBSET_DROP,
    PR_CAPBSET_READ,
    clear_capabilities,
    prctl,
)


def drop_capabilities() -> None:
    """Give up every capability (module docstring); OSError when one is still held afterwards.

    The bounding set can only be emptied by a process holding ``CAP_SETPCAP`` (root, or root of
    the sandbox's user namespace); a process without it holds no capability to lose, and
    ``no_new_privs`` keeps the bounding set from mattering."""
    with open("/proc/sys/kernel/cap_last_cap") as handle:
        last = int(handle.read())
    for capability in range(last + 1):
        if prctl(PR_CAPBSET_READ, capability) == 1:
            try:
                prctl(PR_CAPBSET_DROP, capability)
            except PermissionError:  # no CAP_SETPCAP: nothing held (checked below)
                pass
    try:
        prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    except OSError:  # a kernel before 4.3 has no ambient set
        pass
    clear_capabilities()
    held = held_capabilities()
    if held:
        raise OSError(f"capabilities still held after dropping them: {held}")


def held_capabilities() -> dict:
    """``{"CapEff": mask, ...}`` of the capability sets of this process that are not empty."""
    with open("/proc/self/status") as handle:
        lines = [line.split(":", 1) for line in handle if line.startswith(("CapEff", "CapPrm", "CapInh", "CapAmb"))]
    return {key: value.strip() for key, value in lines if int(value, 16)}


__all__ = ["drop_capabilities", "held_capabilities"]
