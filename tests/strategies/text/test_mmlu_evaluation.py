"""MMLU through lm-eval on the adapted model, against a naive multiple-choice loglikelihood."""

import csv
from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("lm_eval")

from moram_avalanche.benchmarks.text.mmlu import local_tasks, mmlu_folder
from moram_avalanche.models.language_model import LanguageModel
from moram_avalanche.strategies.text.plugins.mmlu_evaluation import MMLUEvaluation
from moram_avalanche.text.tiny import tiny_language_model, word_tokenizer

# answers A A A A B B C D: a model that always picks one letter scores 50, 25 or 12.5, so agreeing
# with the naive reference means choosing the same letters
ROWS = [[f"Which colour is thing {i}?", "red", "green", "blue", "black", "AAAABBCD"[i]] for i in range(8)]
# the header lm-eval's registered mmlu_astronomy puts before every prompt (lm_eval/tasks/mmlu/_generate_configs.py:
# "The following are multiple choice questions (with answers) about {subject}." and a blank line), written out here
HEADER = "The following are multiple choice questions (with answers) about astronomy.\n\n"


def naive_accuracy(model, tokenizer, rows):
    """Pick the letter whose continuation " X" after lm-eval's MMLU prompt (the subject's header, then the
    question, its options and "Answer:") is the most likely."""
    hits = 0
    for question, a, b, c, d, answer in rows:
        context = f"{HEADER}{question}\nA. {a}\nB. {b}\nC. {c}\nD. {d}\nAnswer:"
        context_ids = tokenizer(context, add_special_tokens=False)["input_ids"]
        scores = []
        for letter in "ABCD":
            continuation = tokenizer(" " + letter, add_special_tokens=False)["input_ids"]
            ids = torch.tensor([context_ids + continuation])
            with torch.no_grad():
                logprobs = model(ids).logits.log_softmax(-1)[0]
            scores.append(sum(logprobs[len(context_ids) - 1 + i, token].item() for i, token in enumerate(continuation)))
        hits += "ABCD"[max(range(4), key=scores.__getitem__)] == answer
    return 100.0 * hits / len(rows)


def test_mmlu_accuracy_is_the_naive_loglikelihood_choice(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "cache"))
    (tmp_path / "data" / "test").mkdir(parents=True)
    with open(tmp_path / "data" / "test" / "astronomy_test.csv", "w", newline="") as handle:
        csv.writer(handle).writerows(ROWS)
    tokenizer = word_tokenizer([HEADER, *(" ".join(map(str, row)) + " A B C D Answer : ? . Which" for row in ROWS)])
    model = tiny_language_model("llama", tokenizer, seed=1)
    plugin = MMLUEvaluation(folder=str(mmlu_folder(tmp_path)), batch_size=3)
    strategy = SimpleNamespace(model=LanguageModel(model, tokenizer), device=torch.device("cpu"),
                               clock=SimpleNamespace(train_exp_counter=1))
    plugin.after_eval(strategy)
    expected = naive_accuracy(model, tokenizer, ROWS)
    assert plugin.report["subjects"] == {"astronomy": {"acc": pytest.approx(expected), "questions": 8}}
    assert plugin.report["mmlu"] == pytest.approx(expected)
    assert plugin.run_reports()["mmlu.json"] is plugin.report


def test_local_tasks_name_an_unknown_subject(tmp_path):
    (tmp_path / "test").mkdir()
    (tmp_path / "test" / "virology_test.csv").write_text("q,a,b,c,d,A\n")
    with pytest.raises(ValueError, match="not under .*found: virology"):
        local_tasks(tmp_path, ["anatomy"])
    [task] = local_tasks(tmp_path)
    assert task["task"] == "mmlu_local_virology" and "fewshot_split" not in task  # no dev file
