"""``moram-avalanche run --strategy lfpt5`` on a tiny local T5: options through ``--set``, the run
record, resume, and a bad option as a one-line error."""

import json

from command_line import cli
from text_processes import ORDER


def test_run_lfpt5_from_the_command_line_and_resume(model_folder, tmp_path):
    log_dir = tmp_path / "run"
    args = ("run", "--benchmark", "synthetic-text", "--order", ",".join(ORDER), "--strategy", "lfpt5",
            "--model", str(model_folder), "--log-dir", str(log_dir), "--iterations", "2", "--batch-size", "4",
            "--set", "max_new_tokens=2", "--set", "prompt_length=4", "--set", "pseudo_draws=4",
            "--set", "pseudo_max_tokens=4", "--set", "kd_lambda=0.05", "--no-progress")
    done = cli(*args)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((log_dir / "results.json").read_text())
    assert results["domains"] == list(ORDER) and len(results["matrix"]) == 2
    record = json.loads((log_dir / "run.json").read_text())
    assert record["strategy"] == "TextLFPT5"
    again = cli(*args)  # a finished run resumes to the same results
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads((log_dir / "results.json").read_text())["matrix"] == results["matrix"]


def test_a_bad_lfpt5_option_is_a_one_line_error(model_folder, tmp_path):
    done = cli("run", "--benchmark", "synthetic-text", "--order", ",".join(ORDER), "--strategy", "lfpt5",
               "--model", str(model_folder), "--log-dir", str(tmp_path / "bad"), "--set", "kd_lambda=2",
               "--no-progress")
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if line.startswith("moram-avalanche")]  # not library warnings
    assert len(errors) == 1 and "--set kd_lambda=2: kd_lambda must be a finite number in [0, 1]" in errors[0]
    assert not (tmp_path / "bad" / "checkpoint.pt").exists()
