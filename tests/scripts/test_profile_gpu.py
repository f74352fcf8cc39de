"""scripts/profile_gpu.py: the quick run writes every section's profile."""

import importlib


def test_the_quick_run_writes_the_profile(scripts, tmp_path, one_thread):
    profile = importlib.import_module("profile_gpu")
    assert profile.main(["--quick", "--out", str(tmp_path)]) == 0
    text = (tmp_path / "profile.txt").read_text()
    for header in ("== 1. moram-synthetic-tiny tower", "== 2. each piece of a layer call",
                   "== 3. each option's micro-benchmark"):
        assert header in text
    assert "profile tower eval bfloat16, moram" in text and "not in this version" in text
    files = {path.name for path in tmp_path.iterdir()}
    assert {"profile.txt", "profile.json", "trace_tower_moram_bfloat16.json.gz",
            "profile_tower_plain_bfloat16.txt", "profile_tower_moram_float32.txt"} <= files
    assert "options" in (tmp_path / "profile.json").read_text()
