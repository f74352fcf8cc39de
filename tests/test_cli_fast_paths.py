"""The command line's machine-dependent defaults: --device auto, --num-workers, --eval-batch-size."""

import pytest

from moram_avalanche.cli import main
from spies import RunStopped, spy_on_run_stream

RUN = ["run", "--benchmark", "synthetic", "--strategy", "zeroshot", "--model", "moram-synthetic-tiny",
       "--pretrained", "none", "--no-progress"]


@pytest.fixture
def spy_run(monkeypatch):
    """Replace the run loop: record the strategy and the loader options, then stop."""
    return spy_on_run_stream(monkeypatch, lambda strategy, kwargs: dict(
        device=str(strategy.device), eval_mb_size=strategy.eval_mb_size, train_mb_size=strategy.train_mb_size,
        **kwargs))


def test_auto_device_is_the_cpu_without_a_gpu_and_eval_batches_are_larger(tmp_path, spy_run, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RunStopped):
        main(RUN + ["--log-dir", str(tmp_path / "a"), "--cache-dir", str(tmp_path / "c"),
                    "--batch-size", "8"])
    assert spy_run["device"] == "cpu"
    assert spy_run["num_workers"] == 0  # no --data-root: in-memory images, no workers
    assert (spy_run["train_mb_size"], spy_run["eval_mb_size"]) == (8, 32)  # 4 x the training batch


def test_explicit_values_win(tmp_path, spy_run):
    with pytest.raises(RunStopped):
        main(RUN + ["--log-dir", str(tmp_path / "a"), "--cache-dir", str(tmp_path / "c"),
                    "--device", "cpu", "--num-workers", "2", "--eval-batch-size", "5"])
    assert (spy_run["device"], spy_run["num_workers"], spy_run["eval_mb_size"]) == ("cpu", 2, 5)


@pytest.mark.parametrize("option, value, message", [
    ("--eval-batch-size", "0", "argument --eval-batch-size: must be a positive integer (1 or more), got '0'"),
    ("--num-workers", "-1", "argument --num-workers: must be an integer >= 0, got '-1'"),
])
def test_bad_values_are_one_line_errors(tmp_path, capsys, option, value, message):
    with pytest.raises(SystemExit) as stop:  # argparse's own exit, status 2
        main(RUN + ["--log-dir", str(tmp_path / "a"), option, value])
    assert stop.value.code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "a").exists()
