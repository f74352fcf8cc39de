"""The sandbox (placeholder docstring)."""

from .check import check_program
from .choice import ISOLATIONS, default_isolation, isolation_missing
from .limits import FILE_SIZE_LIMIT, KILL_GRACE, MEMORY_LIMIT, OUTPUT_LIMIT, TIMEOUT
from .outcome import Execution
from .requirements import human_eval_available

__all__ = ["Execution", "FILE_SIZE_LIMIT", "ISOLATIONS", "KILL_GRACE", "MEMORY_LIMIT", "OUTPUT_LIMIT", "TIMEOUT",
           "check_program", "default_isolation", "human_eval_available", "isolation_missing"]
