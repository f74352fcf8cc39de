"""Resume identity (issue 46, "Reliability IV"): a run folder records what it read -- the weights
by their bytes, ``config.json``, the tokenizer files, ``generation_config.json`` and the decoding
settings -- and a resume that finds any of them changed is refused in one line naming it, with
nothing written. 0.7's checksum (the sum of |w|) did not see a sign flip, two projections swapped
or two embedding rows swapped; each case below asserts that it still does not (the checksum
recorded equals the one now), so the refusal comes from the new fingerprint.
"""

import json
import shutil

import pytest
import torch

from moram_avalanche.cli import main
from tiny_text import tiny_t5
from trace_runs import refused_resume, trace_run_arguments, write_trace_inputs


def pairs(count=3, split="train"):
    return [{"prompt": f"what is the topic {split} {i}", "answer": "sports"} for i in range(count)]


def arguments(root, model, log_dir):
    return trace_run_arguments(root, model, log_dir)


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """One finished tiny T5 MoRAM run on two TRACE tasks: ``(folder, a pristine copy of it)``."""
    base = tmp_path_factory.mktemp("identity")
    model, root = write_trace_inputs(base, pairs)
    assert main(arguments(root, model, base / "run")) == 0
    pristine = tmp_path_factory.mktemp("pristine")
    for name in FOLDERS:
        shutil.copytree(base / name, pristine / name)
    return base, pristine


FOLDERS = ("model", "TRACE", "run")


@pytest.fixture
def text_run(finished):
    """``(argv, log_dir, model folder)`` of the finished run, restored as it was made (the record
    holds the folders' paths, so each test uses the same ones)."""
    base, pristine = finished
    for name in FOLDERS:
        shutil.rmtree(base / name, ignore_errors=True)
        shutil.copytree(pristine / name, base / name)
    return arguments(base / "TRACE", base / "model", base / "run"), base / "run", base / "model"


def record_of(log_dir):
    return json.loads((log_dir / "run.json").read_text())


def edit_weights(model_folder, edit):
    """Load the folder's T5, apply ``edit(state_dict)`` in place, save it back."""
    from transformers import T5ForConditionalGeneration

    model = T5ForConditionalGeneration.from_pretrained(model_folder)
    with torch.no_grad():
        edit(model.state_dict())
    model.save_pretrained(model_folder)


def sign_flip(state):
    state["encoder.block.0.layer.0.SelfAttention.o.weight"].neg_()


def swap_q_k(state):
    q, k = state["encoder.block.1.layer.0.SelfAttention.q.weight"], state["encoder.block.1.layer.0.SelfAttention.k.weight"]
    kept = q.clone()
    q.copy_(k)
    k.copy_(kept)


def swap_embedding_rows(state):
    rows = state["shared.weight"]
    rows[[5, 6]] = rows[[6, 5]]


# ---------------------------------------------------------------- what the record holds
def test_the_record_holds_the_fingerprints_the_decoding_and_its_version(text_run):
    import moram_avalanche

    _, log_dir, _ = text_run
    record = record_of(log_dir)
    contents = record["contents"]
    assert record["version"] == moram_avalanche.__version__
    for key in ("weights", "config", "tokenizer", "generation_config"):
        assert isinstance(contents[key], str) and len(contents[key]) == 16, key
    assert contents["config"] != contents["generation_config"] != contents["tokenizer"]
    # greedy with TRACE's release settings (penalty 1.2, no repeated 3-grams), the tiny T5's ids
    # (config.json: start 0, pad 0; the tokenizer's EOS 1)
    assert contents["decoding"] == {"max_new_tokens": 2, "do_sample": False, "num_beams": 1,
                                    "repetition_penalty": 1.2, "no_repeat_ngram_size": 3, "pad_token_id": 0,
                                    "eos_token_id": 1, "decoder_start_token_id": 0}
    state = torch.load(log_dir / "checkpoint.pt", weights_only=True)
    assert state["identity"]["contents"]["weights"] == contents["weights"]  # the checkpoint carries them too


def test_an_unchanged_folder_resumes(text_run, capsys):
    argv, log_dir, _ = text_run
    results = (log_dir / "results.json").read_bytes()
    assert main(argv) == 0
    assert (log_dir / "results.json").read_bytes() == results
    assert "cannot be checked" not in capsys.readouterr().err


# ---------------------------------------------------------------- one thing changed: refused, named
@pytest.mark.parametrize("edit", [sign_flip, swap_q_k, swap_embedding_rows],
                         ids=["a-projection-sign-flipped", "q-and-k-swapped", "two-embedding-rows-swapped"])
def test_weights_the_checksum_cannot_tell_apart_are_refused(edit, text_run, capsys):
    from moram_avalanche.experiments.record import weights_checksum
    from moram_avalanche.text.load import load_language_model

    argv, log_dir, model = text_run
    recorded = record_of(log_dir)["contents"]
    edit_weights(model, edit)
    assert weights_checksum(load_language_model(str(model))[0]) == pytest.approx(recorded["weights_checksum"],
                                                                                 rel=1e-7)  # 0.7 saw nothing
    line = refused_resume(capsys, argv, log_dir, f"the weights' bytes: hash \"{recorded['weights']}\" in run.json",
                          "another folder")
    assert "config.json" not in line and "tokenizer" not in line  # only what changed is named


def test_two_ids_swapped_in_the_tokenizer_are_refused(text_run, capsys):
    argv, log_dir, model = text_run
    path = model / "tokenizer.json"
    tokenizer = json.loads(path.read_text())
    vocab = tokenizer["model"]["vocab"]
    vocab["sports"], vocab["business"] = vocab["business"], vocab["sports"]
    path.write_text(json.dumps(tokenizer))
    line = refused_resume(capsys, argv, log_dir, "the tokenizer files: hash", "start a new run in another folder")
    assert "weights' bytes" not in line


@pytest.mark.parametrize("field, value", [("dropout_rate", 0.2), ("decoder_start_token_id", 98)],
                         ids=["a-harmless-edit", "a-breaking-edit"])
def test_an_edited_config_is_refused_before_anything_trains(field, value, text_run, capsys):
    argv, log_dir, model = text_run
    path = model / "config.json"
    config = json.loads(path.read_text())
    assert config[field] != value
    path.write_text(json.dumps({**config, field: value}))
    refused_resume(capsys, argv, log_dir, "config.json: hash")


@pytest.mark.parametrize("edit", [
    lambda config: {**config, "repetition_penalty": 1.5},
    lambda config: {**config, "min_new_tokens": 2},
    None,
], ids=["a-repetition-penalty-added", "min-new-tokens-added", "the-file-removed"])
def test_an_edited_generation_config_is_refused(edit, text_run, capsys):
    argv, log_dir, model = text_run
    path = model / "generation_config.json"
    if edit is None:
        path.unlink()
    else:
        path.write_text(json.dumps(edit(json.loads(path.read_text()))))
    refused_resume(capsys, argv, log_dir, "generation_config.json: hash")


def test_other_decoding_settings_are_named_setting_by_setting(text_run, capsys):
    from moram_avalanche.experiments.record import content_differences

    _, log_dir, _ = text_run
    stored = record_of(log_dir)
    now = json.loads(json.dumps(stored))
    now["contents"]["decoding"]["repetition_penalty"] = 1.0
    assert content_differences(stored, now) == [
        "the decoding settings (decoding.repetition_penalty: 1.2 in run.json, 1.0 now)"]


def test_a_finished_folder_without_checkpoints_refuses_other_weights(text_run, capsys):
    argv, log_dir, model = text_run
    for name in ("checkpoint.pt", "checkpoint.prev.pt"):
        (log_dir / name).unlink(missing_ok=True)
    edit_weights(model, sign_flip)
    refused_resume(capsys, argv, log_dir, "the weights' bytes")


# ---------------------------------------------------------------- older records
def as_0_7_0(log_dir):
    """The folder as 0.7.0 wrote it: no version, no fingerprints, no decoding (record and checkpoint)."""
    record = record_of(log_dir)
    del record["version"]
    for key in ("weights", "config", "tokenizer", "generation_config", "decoding"):
        del record["contents"][key]
    (log_dir / "run.json").write_text(json.dumps(record))
    for name in ("checkpoint.pt", "checkpoint.prev.pt"):
        if (log_dir / name).exists():
            state = torch.load(log_dir / name, weights_only=True)
            state["identity"]["contents"] = dict(record["contents"])
            torch.save(state, log_dir / name)
    return record


def test_a_0_7_0_record_resumes_with_one_warning_naming_what_cannot_be_checked(text_run, capsys, caplog):
    argv, log_dir, _ = text_run
    as_0_7_0(log_dir)
    assert main(argv) == 0
    warned = [r.getMessage() for r in caplog.records if "cannot be checked" in r.getMessage()]
    assert len(warned) == 1, warned
    for name in ("the weights' bytes", "config.json", "the tokenizer files", "generation_config.json",
                 "the decoding settings"):
        assert name in warned[0]
    assert record_of(log_dir)["contents"]["weights"]  # recorded from now on


def test_a_0_7_0_record_still_compares_its_checksum(text_run, capsys):
    argv, log_dir, model = text_run
    recorded = as_0_7_0(log_dir)["contents"]["weights_checksum"]
    tiny_t5(seed=1).save_pretrained(model)
    refused_resume(capsys, argv, log_dir, f"the model's weights checksum {recorded!r} in run.json")


@pytest.mark.parametrize("version", ["0.5.0", None], ids=["recorded-0.5.0", "a-record-without-data-hashes"])
def test_a_record_older_than_the_streams_last_change_is_refused(version, text_run, capsys):
    argv, log_dir, _ = text_run
    record = record_of(log_dir)
    if version is None:  # 0.5 wrote neither a version nor data hashes
        del record["version"]
        del record["contents"]
    else:
        record["version"] = version
    (log_dir / "run.json").write_text(json.dumps(record))
    line = refused_resume(capsys, argv, log_dir, "--benchmark trace changed in 0.6.0", "new folder")
    assert ("0.5.0" in line) if version else ("before 0.6.0" in line)


def test_a_record_of_the_streams_change_resumes(text_run):
    argv, log_dir, _ = text_run
    record = record_of(log_dir)
    record["version"] = "0.6.0"
    (log_dir / "run.json").write_text(json.dumps(record))
    assert main(argv) == 0


# ---------------------------------------------------------------- CLIP: the same fingerprint
def test_a_clip_weights_file_with_a_sign_flipped_is_refused(tmp_path, capsys):
    from moram_avalanche.clip.load import load_clip

    torch.manual_seed(0)
    weights = tmp_path / "tiny.pt"
    torch.save(load_clip("moram-synthetic-tiny", pretrained=None)[0].state_dict(), weights)
    argv = ["run", "--benchmark", "synthetic", "--strategy", "zeroshot", "--model", "moram-synthetic-tiny",
            "--pretrained", str(weights), "--cache-dir", str(tmp_path / "cache"), "--log-dir", str(tmp_path / "run"),
            "--batch-size", "8", "--no-progress", "--order", "shapes,digits"]
    assert main(argv) == 0
    recorded = record_of(tmp_path / "run")["contents"]
    assert set(recorded) >= {"weights", "weights_checksum"} and "config" not in recorded  # CLIP: weights alone
    assert main(argv) == 0  # unchanged: resumes
    state = torch.load(weights, weights_only=True)
    name = next(key for key, value in state.items() if value.ndim == 2 and "proj" in key)
    state[name] = -state[name]
    torch.save(state, weights)
    refused_resume(capsys, argv, tmp_path / "run", f"the weights' bytes: hash \"{recorded['weights']}\" in run.json")
