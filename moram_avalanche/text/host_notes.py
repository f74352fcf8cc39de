"""Importing this module drops the host libraries' import-time notes that are noise for this
package's users (:func:`~moram_avalanche.utils.log_notes.drop_note`: exactly these messages of
exactly these loggers; every other warning still shows). :mod:`moram_avalanche.text` imports it
before anything imports peft, which imports bitsandbytes when it is installed.

* bitsandbytes 0.50 (``bitsandbytes/backends/cpu/ops.py``), on a CPU with AVX-512 BF16, tries the
  Hub package ``kernels`` for a fused 4-bit CPU matmul when it is imported and logs a warning when
  ``kernels`` is not installed: "Failed to load CPU gemm_4bit_forward from kernels-community: No
  module named 'kernels'. ...". bitsandbytes then uses its own CPU code, with the same results;
  this package never runs 4-bit layers on the CPU through it, so the note only puzzled first runs
  (``moram-avalanche demo --text --device cpu``).
"""

from __future__ import annotations

from ..utils.log_notes import drop_note

__all__ = ["HOST_NOTES"]

#: (logger, the note's opening words) of each note dropped
HOST_NOTES = (
    ("bitsandbytes.backends.cpu.ops", "Failed to load CPU gemm_4bit_forward from kernels-community"),
)

for _logger, _opening in HOST_NOTES:
    drop_note(_logger, _opening)
