"""Resuming a run whose data or weights changed, a 0.2.0 checkpoint, and what dry runs and
``analyze`` say (issue 35 part B, classes 2 and 7).

A resumed run compares what it reads now with what its record says it read: a hash per split
of the data (an answer edited with the same number of items) and the base weights' checksum. A
difference is refused in one line naming the recorded and the current value and the way out,
with nothing written. A 0.2.0 checkpoint, whose plugin states are numbered as 0.2.0 ordered the
plugins, resumes to the uninterrupted run's matrix.
"""

import json

import pytest
import torch

from moram_avalanche.cli import main
from tiny_text import tiny_t5
from trace_runs import error_lines, refused_resume, snapshot, trace_run_arguments, write_trace_inputs


def pairs(answer="red", count=3, split="train"):
    return [{"prompt": f"what colour is {split} item {i}", "answer": answer} for i in range(count)]


@pytest.fixture
def text_run(tmp_path):
    """A finished tiny T5 MoRAM run on two TRACE tasks: ``(argv, log_dir, data_root, model_folder)``."""
    model, root = write_trace_inputs(tmp_path, pairs)
    log_dir = tmp_path / "run"
    argv = trace_run_arguments(root, model, log_dir)
    assert main(argv) == 0
    return argv, log_dir, root, model


# ---------------------------------------------------------------- class 2: data and weights on resume
def test_the_record_holds_a_hash_per_split_and_the_weights_checksum(text_run):
    _, log_dir, _, _ = text_run
    record = json.loads((log_dir / "run.json").read_text())
    contents = record["contents"]
    assert len(contents["train"]) == len(contents["test"]) == 16 and contents["train"] != contents["test"]
    assert contents["weights_checksum"] == record["environment"]["weights_checksum"] > 0


@pytest.mark.parametrize("task, split, edit, name", [
    ("C-STANCE", "train", lambda items: items[:2] + [{**items[2], "answer": "blue"}], "train"),
    ("FOMC", "test", lambda items: [{**items[0], "prompt": "what colour is the sky"}] + items[1:], "test"),
    ("FOMC", "train", lambda items: items[::-1], "train"),
], ids=["an-answer-edited", "a-test-prompt-edited", "the-same-items-reordered"])
def test_data_edited_with_the_same_number_of_items_is_refused_on_resume(task, split, edit, name, text_run, capsys):
    argv, log_dir, root, _ = text_run
    recorded = json.loads((log_dir / "run.json").read_text())["contents"][name]
    path = root / task / f"{split}.json"
    path.write_text(json.dumps(edit(json.loads(path.read_text()))))
    line = refused_resume(capsys, argv, log_dir, f"the {name} data's hash {recorded} in run.json",
                          "restore the data files", "another folder")
    assert "now" in line.split(recorded, 1)[1]


def test_other_weights_under_the_same_model_folder_are_refused_on_resume(text_run, capsys):
    argv, log_dir, _, model = text_run
    recorded = json.loads((log_dir / "run.json").read_text())["contents"]["weights"]
    tiny_t5(seed=1).save_pretrained(model)  # the same architecture and size, other weights
    line = refused_resume(capsys, argv, log_dir, f"the weights' bytes: hash \"{recorded}\" in run.json",
                          "restore the data files and the weights")
    assert "checksum" not in line  # the bytes' hash says it; 0.7's checksum only where a record lacks it


def test_a_folder_without_its_record_is_refused_by_its_checkpoint_when_the_data_changed(text_run, capsys):
    argv, log_dir, root, _ = text_run
    (log_dir / "run.json").unlink()  # the record lost: the checkpoint still says what the run read
    path = root / "C-STANCE" / "train.json"
    path.write_text(json.dumps(pairs("green")))
    refused_resume(capsys, argv, log_dir, "checkpoint", "the train data's hash", "restore the data files")


def test_a_record_made_before_the_hashes_still_resumes(text_run, capsys):
    argv, log_dir, root, _ = text_run
    record = json.loads((log_dir / "run.json").read_text())
    del record["contents"]
    del record["environment"]["weights_checksum"]
    (log_dir / "run.json").write_text(json.dumps(record))
    state = torch.load(log_dir / "checkpoint.pt", weights_only=True)
    state["identity"].pop("contents")  # a 0.5 checkpoint's identity
    torch.save(state, log_dir / "checkpoint.pt")
    assert main(argv) == 0  # a finished run, resumed: its results rewritten, nothing compared
    assert json.loads((log_dir / "run.json").read_text())["contents"]["train"]


def test_a_clip_run_records_its_data_and_refuses_another(tmp_path, capsys):
    argv = ["run", "--benchmark", "synthetic", "--strategy", "zeroshot", "--model", "moram-synthetic-tiny",
            "--pretrained", "none", "--cache-dir", str(tmp_path / "cache"), "--log-dir", str(tmp_path / "run"),
            "--batch-size", "8", "--no-progress", "--order", "shapes,digits"]
    assert main(argv) == 0
    path = tmp_path / "run" / "run.json"
    record = json.loads(path.read_text())
    assert record["contents"]["train"] and record["contents"]["test"]
    record["contents"]["test"] = "0123456789abcdef"  # as if another test set had been read
    path.write_text(json.dumps(record))
    refused_resume(capsys, argv, tmp_path / "run", "the test data's hash 0123456789abcdef in run.json", "now",
                   "restore the data files")


def test_image_files_hash_their_paths_and_labels(tmp_path):
    from moram_avalanche.benchmarks.images.datasets import ImageFiles

    paths = [tmp_path / f"{i}.png" for i in range(3)]
    one = ImageFiles(paths, [0, 1, 1], name="x").fingerprint()
    assert one == ImageFiles(paths, [0, 1, 1], name="x").fingerprint()
    assert one != ImageFiles(paths, [0, 1, 0], name="x").fingerprint()  # relabelled
    assert one != ImageFiles(paths[:2] + [tmp_path / "9.png"], [0, 1, 1], name="x").fingerprint()  # renamed


# ---------------------------------------------------------------- class 2: a 0.2.0 checkpoint
def test_a_0_2_0_checkpoint_with_0_2_0_plugin_numbers_resumes_to_the_uninterrupted_matrix(make_stream, tokenizer,
                                                                                       tmp_path):
    from clip_runs import fresh_moram as fresh
    from moram_avalanche.experiments.record import read_record
    from moram_avalanche.experiments.runner import run_stream

    whole, bench, metric = fresh(make_stream, tokenizer, tmp_path / "whole")
    run_stream(whole, bench, tmp_path / "whole", progress=False)
    expected = metric.result().tolist()

    cut = tmp_path / "cut"
    strategy, bench, _ = fresh(make_stream, tokenizer, cut)
    run_stream(strategy, bench, cut, max_experiences=1, progress=False, settings={"benchmark": "synthetic"})
    record = read_record(cut)
    state = torch.load(cut / "checkpoint.pt", weights_only=True)
    assert "plugin3:MoRAMPlugin" in state["stateful"]  # after the loop's budget, schedule and progress
    # 0.2.0 numbered MoRAM's plugin first (the loop's plugins did not exist) and wrote no identity
    state["stateful"] = {("plugin0:MoRAMPlugin" if key.endswith(":MoRAMPlugin") else key): value
                         for key, value in state["stateful"].items()}
    state["identity"] = None
    torch.save(state, cut / "checkpoint.pt")
    (cut / "checkpoint.prev.pt").unlink(missing_ok=True)
    (cut / "settings.json").write_text(json.dumps(  # and its two records
        {"run": record["run"], **{k: record[k] for k in ("strategy", "options", "model", "benchmark")}}))
    (cut / "run.json").write_text(json.dumps(record["run"]))
    again, bench, metric = fresh(make_stream, tokenizer, cut)
    assert run_stream(again, bench, cut, progress=False, settings={"benchmark": "synthetic"}) == 3
    assert metric.result().tolist() == expected
    moram = next(p for p in again.plugins if type(p).__name__ == "MoRAMPlugin")
    assert len(moram.history) == 3  # the first task's record came from the 0.2.0 state


def test_a_checkpoint_holding_a_plugin_the_strategy_lacks_is_refused_in_one_line(make_stream, tokenizer, tmp_path):
    from clip_runs import fresh_moram as fresh
    from moram_avalanche.experiments.runner import run_stream

    strategy, bench, _ = fresh(make_stream, tokenizer, tmp_path)
    run_stream(strategy, bench, tmp_path, max_experiences=1, progress=False)
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    state["stateful"]["plugin0:LoadBalancePlugin"] = {}
    torch.save(state, tmp_path / "checkpoint.pt")
    (tmp_path / "checkpoint.prev.pt").unlink(missing_ok=True)
    before = snapshot(tmp_path)
    again, bench, _ = fresh(make_stream, tokenizer, tmp_path)
    with pytest.raises(ValueError) as caught:
        run_stream(again, bench, tmp_path, progress=False)
    message = str(caught.value)
    assert "\n" not in message and "checkpoint.pt holds state for plugin0:LoadBalancePlugin" in message
    assert "start over (--no-resume" in message
    assert snapshot(tmp_path) == before


# ---------------------------------------------------------------- class 7: dry runs and analyze
def test_the_trace_dry_run_names_traces_data_and_settings(capsys):
    assert main(["reproduce", "trace", "--dry-run"]) == 0
    out = capsys.readouterr().out
    data = next(line for line in out.splitlines() if line.strip().startswith("data:"))
    assert "trace" in data and "lm-cl" not in data
    assert "TRACE paragraph" in out and "temperature 0.03" in out  # MoRAM's TRACE setting, with its source


@pytest.mark.parametrize("table", ["trace", "t5-standard", "xtail"])
def test_a_dry_run_flags_a_data_root_that_does_not_exist(table, tmp_path, capsys):
    missing = tmp_path / "no-such-data"
    assert main(["reproduce", table, "--dry-run", "--data-root", str(missing)]) == 0
    out = capsys.readouterr().out
    assert f"MISSING, --data-root {missing} does not exist" in out
    assert not missing.exists()


def test_analyze_on_a_text_run_says_what_it_supports(text_run, capsys):
    _, log_dir, _, _ = text_run
    before = snapshot(log_dir)
    capsys.readouterr()
    assert main(["analyze", str(log_dir), "--no-progress"]) == 2
    err = error_lines(capsys)
    assert len(err) == 1 and "analyze draws the figures of CLIP runs" in err[0] and "results.json" in err[0], err
    assert "inconsistent" not in err[0]
    assert snapshot(log_dir) == before and not (log_dir / "analysis").exists()


def test_an_image_renamed_in_a_data_root_changes_a_split_hash(fresh_root):
    """MTIL reads EuroSAT by its class folders: an image renamed (the same number of images) is
    another (path, label) list."""
    from moram_avalanche.benchmarks import get_benchmark
    from moram_avalanche.benchmarks.fingerprint import split_hashes

    build = get_benchmark("mtil")
    before = split_hashes(build(fresh_root))
    images = sorted((fresh_root / "eurosat").rglob("*.jpg"))
    images[0].rename(images[0].with_name("renamed-" + images[0].name))  # the same number of images
    after = split_hashes(build(fresh_root))
    assert sum(before[split] != after[split] for split in ("train", "test")) >= 1
    assert all(value and len(value) == 16 for value in after.values())
