"""``python -m moram_avalanche ARGS`` in a new process, its output captured (the command line as a user runs it)."""

import subprocess
import sys


def cli(*args, cwd=None, timeout=900):
    """The finished process of ``python -m moram_avalanche ARGS`` (``cwd``: where it runs)."""
    return subprocess.run([sys.executable, "-m", "moram_avalanche", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=timeout)
