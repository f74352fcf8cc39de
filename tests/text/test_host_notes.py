"""The text room's imports leave bitsandbytes' "kernels-community" note out of stderr (it was the
first line of ``moram-avalanche demo --text --device cpu`` on CPUs with AVX-512 BF16), and only it."""

import subprocess
import sys

# the room the quick text demo loads its model and adapters through (it imports peft, which imports
# bitsandbytes), then the note as bitsandbytes 0.50 logs it on such a CPU (bitsandbytes/backends/cpu/ops.py),
# then another warning of the same logger
CODE = """
import logging
logging.basicConfig(format="%(levelname)s %(name)s: %(message)s", level=logging.INFO)
import moram_avalanche.text
note = logging.getLogger("bitsandbytes.backends.cpu.ops")
note.warning("Failed to load CPU gemm_4bit_forward from kernels-community: %s. Please make sure you already "
             "`pip install kernels` and the kernels >= 0.11.1", "No module named 'kernels'")
note.warning("a real bitsandbytes warning")
"""


def test_the_text_room_drops_the_kernels_community_note_and_nothing_else():
    done = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "kernels-community" not in done.stderr
    assert "WARNING bitsandbytes.backends.cpu.ops: a real bitsandbytes warning" in done.stderr
