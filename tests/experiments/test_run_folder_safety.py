"""A run folder under hostile conditions: its one record, the checkpoint's identity, one owner at a
time, divergence, a full disk, and the 0.2 folders that must still resume.

Each case asserts the refusal (or the resume) and that nothing of another run was mixed in.
"""

import errno
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from clip_runs import fresh_moram
from moram_avalanche.cli import main
from moram_avalanche.experiments.record import RECORD_FORMAT, read_record
from moram_avalanche.experiments.runner import run_stream

CLI_TINY = ["--model", "moram-synthetic-tiny", "--pretrained", "none", "--no-progress", "--batch-size", "8"]


def run_args(tmp_path, *extra, log_dir=None):
    return ["run", "--benchmark", "synthetic", "--strategy", "moram", "--cache-dir", str(tmp_path / "cache"),
            "--log-dir", str(log_dir or tmp_path / "run"), *CLI_TINY, *extra]


# ---------------------------------------------------------------- identity
def test_a_folder_without_its_record_resumes_only_the_run_its_checkpoint_names(make_stream, tokenizer, tmp_path):
    strategy, bench, _ = fresh_moram(make_stream, tokenizer, tmp_path)
    assert run_stream(strategy, bench, tmp_path, max_experiences=1, progress=False) == 1
    (tmp_path / "run.json").unlink()  # the record lost: the checkpoint still says what made it
    other, bench, _ = fresh_moram(make_stream, tokenizer, tmp_path, atoms_per_task=4)
    with pytest.raises(ValueError, match=r"checkpoint.pt was written by another run \(options.atoms_per_task: "
                                         r"2 there, 4 now"):
        run_stream(other, bench, tmp_path, progress=False)
    assert not (tmp_path / "run.json").exists()  # refused: nothing written
    same, bench, metric = fresh_moram(make_stream, tokenizer, tmp_path)
    assert run_stream(same, bench, tmp_path, max_experiences=2, progress=False) == 2
    assert metric.result().shape == (2, 3)


def test_a_checkpoint_that_cannot_say_whose_it_is_is_refused_without_a_record(make_stream, tokenizer, tmp_path):
    strategy, bench, _ = fresh_moram(make_stream, tokenizer, tmp_path)
    run_stream(strategy, bench, tmp_path, max_experiences=1, progress=False)
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    state["identity"] = None  # as 0.2 wrote it
    torch.save(state, tmp_path / "checkpoint.pt")
    (tmp_path / "checkpoint.prev.pt").unlink(missing_ok=True)
    (tmp_path / "run.json").unlink()
    again, bench, _ = fresh_moram(make_stream, tokenizer, tmp_path)
    with pytest.raises(ValueError, match="holds a checkpoint but no record of the run that made it"):
        run_stream(again, bench, tmp_path, progress=False)


def test_a_0_2_folder_resumes_and_its_two_records_become_one(make_stream, tokenizer, tmp_path):
    strategy, bench, _ = fresh_moram(make_stream, tokenizer, tmp_path)
    run_stream(strategy, bench, tmp_path, max_experiences=1, progress=False, settings={"benchmark": "synthetic"},
               environment={"cache_dir": "/c"})
    record = read_record(tmp_path)
    # write the folder as 0.2 did: settings.json (checked) and a flat run.json (for analyze)
    (tmp_path / "settings.json").write_text(json.dumps(
        {"run": {**record["run"], "lr": None}, **{k: record[k] for k in ("strategy", "options", "model", "benchmark")}}))
    (tmp_path / "run.json").write_text(json.dumps({**record["run"], "cache_dir": "/c"}))
    migrated = read_record(tmp_path)
    assert migrated["format"] == RECORD_FORMAT and migrated["environment"] == {"cache_dir": "/c"}
    assert {k: migrated[k] for k in ("run", "strategy", "options", "model", "benchmark")} == {
        k: record[k] for k in ("run", "strategy", "options", "model", "benchmark")}
    again, bench, metric = fresh_moram(make_stream, tokenizer, tmp_path)
    assert run_stream(again, bench, tmp_path, max_experiences=2, progress=False, settings={"benchmark": "synthetic"},
                      environment={"cache_dir": "/c"}) == 2
    assert not (tmp_path / "settings.json").exists()  # migrated: one record from now on
    assert json.loads((tmp_path / "run.json").read_text())["format"] == RECORD_FORMAT


# ---------------------------------------------------------------- divergence and a full disk
def test_divergence_stops_the_run_and_records_nothing(make_stream, tokenizer, tmp_path):
    from moram_avalanche.strategies.plugins import StopOnDivergence, TrainingDiverged

    strategy, bench, _ = fresh_moram(make_stream, tokenizer, tmp_path, plugins=[StopOnDivergence()], lr=1e12,
                               iterations=6)
    with pytest.raises(TrainingDiverged, match=r"MoRAM diverged: .* at iteration \d+ of experience 1 "
                                               r"\(alpha\) with learning rate .*: lower the learning rate"):
        run_stream(strategy, bench, tmp_path, progress=False)
    assert not (tmp_path / "results.json").exists() and not (tmp_path / "checkpoint.pt").exists()


def test_divergence_on_the_command_line_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(run_args(tmp_path, "--lr", "1e12", "--iterations", "6")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "moram-avalanche run: MoRAM diverged" in err[0] and "--lr" in err[0]
    assert not (tmp_path / "run" / "results.json").exists()


def test_results_are_never_ahead_of_the_checkpoint_and_a_full_disk_is_one_line(tmp_path, capsys, monkeypatch):
    from moram_avalanche.experiments import runner

    saved = []

    def full_after_one(strategy, path, identity=None):
        if saved:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        saved.append(path)
        return original(strategy, path, identity=identity)

    original = runner.save_run_state
    monkeypatch.setattr(runner, "save_run_state", lambda s, p, identity=None: full_after_one(s, p, identity))
    assert main(run_args(tmp_path, "--iterations", "1")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"moram-avalanche run: No space left on device writing {tmp_path / 'run' / 'checkpoint.pt'}: "
                   "free some space; the run keeps its last checkpoint and results, so the same command resumes it"]
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert len(results["matrix"]) == 1  # the row the checkpoint backs, not the second one


# ---------------------------------------------------------------- one owner, sizes, paths
def test_a_second_process_on_the_same_run_folder_is_refused_naming_the_first(tmp_path, capsys):
    folder = tmp_path / "run"
    folder.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        from moram_avalanche.utils.lock import RunFolderLock
        lock = RunFolderLock({str(folder)!r}).acquire()
        print("held", flush=True)
        time.sleep(120)
    """)], stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        assert holder.stdout.readline().strip() == "held"
        assert main(run_args(tmp_path, "--iterations", "1")) == 2
        err = capsys.readouterr().err
        assert f"is in use by process {holder.pid}" in err and len(err.strip().splitlines()) == 1
        assert not (folder / "run.json").exists() and not (folder / "tb").exists()
    finally:
        holder.kill()
        holder.wait()
    assert main(run_args(tmp_path, "--iterations", "1")) == 0  # a killed owner never blocks


def test_an_atom_bank_that_cannot_fit_is_refused_before_anything_is_written(tmp_path, capsys):
    assert main(run_args(tmp_path, "--set", "atoms_per_task=1000000000")) == 2
    err = capsys.readouterr().err
    assert "MoRAM's atom banks" in err and "lower atoms_per_task" in err
    assert not (tmp_path / "run").exists() or not any((tmp_path / "run").iterdir())


@pytest.mark.parametrize("where", ["inside", "equal"])
def test_a_log_folder_in_the_data_root_is_refused(tmp_path, capsys, where):
    root = tmp_path / "data"
    root.mkdir()
    log_dir = root / "runs" if where == "inside" else root
    args = ["run", "--benchmark", "synthetic", "--strategy", "moram", "--data-root", str(root),
            "--cache-dir", str(tmp_path / "cache"), "--log-dir", str(log_dir), *CLI_TINY]
    assert main(args) == 2
    assert "--log-dir" in capsys.readouterr().err
    assert sorted(p.name for p in root.iterdir()) == []


def test_an_empty_log_dir_is_refused(tmp_path, capsys):
    args = run_args(tmp_path)
    args[args.index("--log-dir") + 1] = ""
    assert main(args) == 2
    assert "--log-dir is empty" in capsys.readouterr().err


def test_cost_refuses_a_task_count_it_would_take_minutes_on(capsys):
    assert main(["cost", "--params-only", "--tasks", "1000000", "--no-progress"]) == 2
    assert "--tasks" in capsys.readouterr().err


@pytest.mark.parametrize("strategy, benchmark, message", [
    ("ok", "synthetic", "run_stream takes a benchmark with train_stream and test_stream .* got str 'synthetic': "
                        r"build it first, e.g. moram_avalanche.benchmarks.get_benchmark\('synthetic'\)"),
    (object(), "bench", "run_stream takes an Avalanche strategy .* got object"),
])
def test_run_stream_names_what_it_takes(make_stream, tokenizer, tmp_path, strategy, benchmark, message):
    built, bench, _ = fresh_moram(make_stream, tokenizer, None)
    with pytest.raises(TypeError, match=message):
        run_stream(built if strategy == "ok" else strategy, bench if benchmark == "bench" else benchmark, tmp_path)
    assert not any(tmp_path.iterdir())


def test_a_0_6_record_of_an_avalanche_strategy_resumes_though_its_options_were_not_recorded(tmp_path, caplog):
    # 0.4-0.6 recorded options {} for Avalanche's strategies on CLIP (none kept): their options are
    # unknown, not different; any other strategy's empty options still differ from given ones
    from moram_avalanche.experiments.record import check_record, make_record, write_record

    for strategy, refused in (("avalanche.naive", False), ("moram", True)):
        folder = tmp_path / strategy
        folder.mkdir()
        write_record(folder, make_record({"strategy": strategy, "iterations": 6}, strategy="Naive", options={}))
        now = make_record({"strategy": strategy, "iterations": 6}, strategy="Naive", options={"lr": 0.01})
        if refused:
            with pytest.raises(ValueError, match=r'options.lr: "\(absent\)" there, 0.01 now'):
                check_record(folder, now, what="the run", fix="start over")
        else:
            check_record(folder, now, what="the run", fix="start over")
            assert "recorded no options for Avalanche's strategy avalanche.naive" in caplog.text
    changed = make_record({"strategy": "avalanche.naive", "iterations": 7}, strategy="Naive", options={"lr": 0.01})
    with pytest.raises(ValueError, match='run.iterations: 6 there, 7 now'):  # the rest is still compared
        check_record(tmp_path / "avalanche.naive", changed, what="the run", fix="start over")
