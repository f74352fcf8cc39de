"""What a killed or misused run leaves behind is named and survived: other settings refused,
damaged checkpoints and result files, stray temporaries, TensorBoard after a resume."""

import json
import warnings

import open_clip
import pytest
import torch
from avalanche.logging import TensorboardLogger
from avalanche.training.plugins import EvaluationPlugin

from moram_avalanche.experiments.checkpoint import DamagedCheckpointError, previous_path
from moram_avalanche.experiments.metrics import AccuracyMatrix
from moram_avalanche.experiments.runner import run_stream
from moram_avalanche.strategies import MoRAM, ZeroShot
from tiny_clip import TINY_CONFIG

warnings.filterwarnings("ignore", message="No loggers specified")


def fresh(make_stream, tokenizer, out_dir=None, tensorboard=None, strategy_class=MoRAM, **kwargs):
    torch.manual_seed(0)
    model = open_clip.CLIP(**TINY_CONFIG)
    metric = AccuracyMatrix(out_dir=out_dir)
    loggers = [TensorboardLogger(tensorboard)] if tensorboard else []
    options = dict(atoms_per_task=2, topk=2, lr=1e-2, iterations=2) if strategy_class is MoRAM else {}
    options.update(kwargs)
    strategy = strategy_class(model=model, tokenizer=tokenizer, train_mb_size=4, progress=False,
                              evaluator=EvaluationPlugin(metric, loggers=loggers), **options)
    return strategy, make_stream("all", train_sizes=(4, 4, 4)), metric


def test_a_run_folder_refuses_other_options_and_benchmarks(make_stream, tokenizer, tmp_path):
    strategy, bench, _ = fresh(make_stream, tokenizer)
    run_stream(strategy, bench, tmp_path, max_experiences=1, progress=False)
    recorded = json.loads((tmp_path / "run.json").read_text())
    assert recorded["strategy"] == "MoRAM" and recorded["options"]["lr"] == 0.01
    assert recorded["benchmark"]["domains"] == ["alpha", "beta", "gamma"]
    other, bench, _ = fresh(make_stream, tokenizer, lr=1e-3)
    with pytest.raises(ValueError, match=r"was made with other settings \(options.lr: 0.01 there, 0.001 now\)"):
        run_stream(other, bench, tmp_path, progress=False)
    other, _, _ = fresh(make_stream, tokenizer)
    with pytest.raises(ValueError, match=r"benchmark.domains: \[\"alpha\", \"beta\", \"gamma\"\] there"):
        run_stream(other, _two_domains(), tmp_path, progress=False)
    assert json.loads((tmp_path / "run.json").read_text()) == recorded  # refused: nothing written
    # starting over is the way out
    other, bench, metric = fresh(make_stream, tokenizer, lr=1e-3)
    assert run_stream(other, bench, tmp_path, resume=False, max_experiences=1, progress=False) == 1
    assert json.loads((tmp_path / "run.json").read_text())["options"]["lr"] == 0.001


def _two_domains():
    from moram_avalanche.benchmarks import Domain, clip_benchmark
    from tiny_clip import TensorDomain

    domains = [Domain("alpha", ("cat", "dog"), "a {}."), Domain("delta", ("x", "y"), "a {}.")]
    return clip_benchmark(domains, [TensorDomain(4, 2, 0), TensorDomain(4, 2, 1)],
                          [TensorDomain(4, 2, 2), TensorDomain(4, 2, 3)], label_space="all")


def test_a_damaged_checkpoint_falls_back_to_the_previous_one(make_stream, tokenizer, tmp_path, caplog):
    strategy, bench, metric = fresh(make_stream, tokenizer)
    run_stream(strategy, bench, tmp_path / "whole", progress=False)
    expected = metric.result().tolist()

    strategy, bench, _ = fresh(make_stream, tokenizer)
    run_stream(strategy, bench, tmp_path / "cut", max_experiences=2, progress=False)
    checkpoint = tmp_path / "cut" / "checkpoint.pt"
    assert previous_path(checkpoint).exists()  # the checkpoint after experience 1
    data = checkpoint.read_bytes()
    checkpoint.write_bytes(data[: len(data) // 2])  # a truncated copy
    strategy, bench, metric = fresh(make_stream, tokenizer)
    with caplog.at_level("WARNING"):
        assert run_stream(strategy, bench, tmp_path / "cut", progress=False) == 3
    assert "checkpoint.pt cannot be read" in caplog.text and "resuming from the previous checkpoint" in caplog.text
    assert metric.result().tolist() == expected  # one experience earlier, the same end


def test_no_readable_checkpoint_stops_with_the_files_named(make_stream, tokenizer, tmp_path):
    strategy, bench, _ = fresh(make_stream, tokenizer)
    run_stream(strategy, bench, tmp_path, max_experiences=2, progress=False)
    for path in (tmp_path / "checkpoint.pt", tmp_path / "checkpoint.prev.pt"):
        path.write_bytes(b"not a checkpoint")
    strategy, bench, _ = fresh(make_stream, tokenizer)
    with pytest.raises(DamagedCheckpointError, match=r"checkpoint.pt cannot be read.*checkpoint.prev.pt cannot "
                                                     r"be read.*start the run over \(--no-resume"):
        run_stream(strategy, bench, tmp_path, progress=False)


def test_temporaries_of_a_killed_write_are_removed(make_stream, tokenizer, tmp_path):
    stray = tmp_path / ".checkpoint.pt.a1b2c3d4.tmp"
    tmp_path.mkdir(exist_ok=True)
    stray.write_bytes(b"\0" * 1000)  # what a kill during atomic_write leaves
    keep = tmp_path / ".notes.tmp"
    keep.write_text("not ours")
    strategy, bench, _ = fresh(make_stream, tokenizer, strategy_class=ZeroShot)
    run_stream(strategy, bench, tmp_path, max_experiences=1, progress=False)
    assert not stray.exists() and keep.exists()


def test_a_finished_run_rewrites_missing_or_broken_result_files(make_stream, tokenizer, tmp_path):
    strategy, bench, metric = fresh(make_stream, tokenizer, out_dir=tmp_path)
    run_stream(strategy, bench, tmp_path, progress=False)
    expected = json.loads((tmp_path / "results.json").read_text())
    (tmp_path / "results.json").write_text('{"matrix": [[1')  # torn
    (tmp_path / "accuracy_matrix.csv").unlink()
    strategy, bench, metric = fresh(make_stream, tokenizer, out_dir=tmp_path)
    assert run_stream(strategy, bench, tmp_path, progress=False) == 3
    assert json.loads((tmp_path / "results.json").read_text()) == expected
    assert (tmp_path / "accuracy_matrix.csv").read_text().startswith("trained_on,alpha,beta,gamma")


def test_tensorboard_has_one_point_per_step_after_a_resume(make_stream, tokenizer, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tb = tmp_path / "tb"
    strategy, bench, _ = fresh(make_stream, tokenizer, tensorboard=tb)
    run_stream(strategy, bench, tmp_path / "run", max_experiences=2, progress=False)
    strategy.evaluator.loggers[0].writer.close()
    # killed after evaluating experience 2, before its checkpoint: the folder holds experience 1's
    run = tmp_path / "run"
    previous_path(run / "checkpoint.pt").replace(run / "checkpoint.pt")
    strategy, bench, _ = fresh(make_stream, tokenizer, tensorboard=tb)
    assert run_stream(strategy, bench, run, progress=False) == 3
    strategy.evaluator.loggers[0].writer.close()
    events = EventAccumulator(str(tb), size_guidance={"scalars": 0})
    events.Reload()
    steps = [event.step for event in events.Scalars("AccMatrix/Last")]
    assert steps == [1, 2, 3]  # step 2 was logged twice; TensorBoard shows it once
    assert [event.step for event in events.Scalars("AccMatrix/alpha")] == [1, 2, 3]


def test_starting_over_clears_the_run_and_hides_old_tensorboard_points(make_stream, tokenizer, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tb = tmp_path / "tb"
    strategy, bench, _ = fresh(make_stream, tokenizer, out_dir=tmp_path / "run", tensorboard=tb)
    run_stream(strategy, bench, tmp_path / "run", progress=False)
    strategy.evaluator.loggers[0].writer.close()
    strategy, bench, _ = fresh(make_stream, tokenizer, out_dir=tmp_path / "run", tensorboard=tb)
    assert run_stream(strategy, bench, tmp_path / "run", resume=False, max_experiences=1, progress=False) == 1
    strategy.evaluator.loggers[0].writer.close()
    assert not previous_path(tmp_path / "run" / "checkpoint.pt").exists()
    assert len(json.loads((tmp_path / "run" / "results.json").read_text())["matrix"]) == 1
    events = EventAccumulator(str(tb), size_guidance={"scalars": 0})
    events.Reload()
    assert [event.step for event in events.Scalars("AccMatrix/Last")] == [1]


def test_progress_off_a_terminal_is_one_line_per_experience(make_stream, tokenizer, tmp_path, capsys):
    strategy, bench, _ = fresh(make_stream, tokenizer, strategy_class=ZeroShot)
    strategy.progress = True
    run_stream(strategy, bench, tmp_path, progress=True)
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(" done in ")[0] for line in lines] == [
        "ZeroShot: experience 1/3 (alpha)", "ZeroShot: experience 2/3 (beta)", "ZeroShot: experience 3/3 (gamma)"]
