"""scripts/gpu_check.sh: its steps fit the 8 minutes, each has its command, and without CUDA a GPU run stops."""

import re
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gpu_check.sh"


def run(*args, **kwargs):
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=120, **kwargs)


def test_the_steps_fit_the_eight_minutes_and_each_has_its_command():
    listed = run("--list")
    assert listed.returncode == 0, listed.stderr
    steps = dict(re.findall(r"^  (\w+)\s+(\d+) s  -> ", listed.stdout, re.M))
    assert list(steps) == ["numerics", "table", "profile", "tool", "suite", "compile"]
    limit, reserve = (int(v) for v in re.search(r"stops at (\d+) s, (\d+) s kept", listed.stdout).groups())
    assert limit == 480 and sum(int(s) for s in steps.values()) + reserve <= limit - 20  # 20 s: wheels, environment
    source = SCRIPT.read_text()
    for name in steps:
        assert f"\nrun_{name}() {{" in source
    assert "profile_gpu.py" in source and "gpu_profile.py" in source and "MORAM_GPU_PROFILE_TOOL" in source


def test_a_gpu_run_without_cuda_stops_after_recording_the_environment(tmp_path):
    import torch

    if torch.cuda.is_available():
        return
    result = run(str(tmp_path / "out"))
    assert result.returncode == 2 and "--dry-run" in result.stdout
    environment = (tmp_path / "out" / "environment.txt").read_text()
    assert "command: bash scripts/gpu_check.sh" in environment and "commit:" in environment
    assert "torch" in environment and "cuda available: False" in environment
