"""SAPT's SuperNI stream: the on-disk layout, the prompt, the orders, one reference drawn per
instance, check-data; ROUGE-L as SAPT scores it and SAPT's AP / FT against hand-computed values."""

import json
import subprocess
import sys

import numpy as np
import pytest

from fake_superni import superni_tree
from moram_avalanche.benchmarks.readers import DataError
from moram_avalanche.benchmarks.text.metrics import TEXT_METRICS, ap_ft, op_bwt, rouge_l, rouge_l_stemmed
from moram_avalanche.benchmarks.text.superni import (
    SUPERNI_ORDERS,
    SUPERNI_TASKS,
    check_superni_data,
    read_superni_task,
    superni,
    superni_prompt,
)


def test_the_orders_are_sapts_two_permutations_of_fifteen_tasks():
    assert len(SUPERNI_TASKS) == 15 and set(SUPERNI_ORDERS[2]) == set(SUPERNI_TASKS)
    assert SUPERNI_ORDERS[1][0] == "task1572_samsum_summary" and SUPERNI_ORDERS[1][-1] == "task875_emotion_classification"
    assert SUPERNI_ORDERS[2][0] == "task748_glucose_reverse_cause_event_detection"


def test_the_prompt_is_sapts_zero_shot_template():
    assert superni_prompt("  Say hi.  ", "Bob") == ("Definition: Say hi.\n\nNow complete the following example -\n"
                                                   "Input: Bob\nOutput: ")


def test_a_stream_reads_either_root_in_order_with_its_metric(tmp_path):
    root = superni_tree(tmp_path / "CL_Benchmark", SUPERNI_ORDERS[1][:3])
    for data_root in (root, root / "SuperNI"):
        benchmark = superni(data_root, SUPERNI_ORDERS[1][:3])
        assert [e.task_name for e in benchmark.train_stream] == list(SUPERNI_ORDERS[1][:3])
        assert {e.metric for e in benchmark.test_stream} == {"rouge_l_stemmed"}
        first = benchmark.tasks[0]
        assert len(first.train) == 6 and len(first.test) == 4  # dev is not read
        assert first.train[1] == (f"Definition: Answer the question of {first.name}.\n\nNow complete the following "
                                  f"example -\nInput: {first.name} item 1\nOutput: ", "answer 1")
    # a string output is its own reference; "--order 2" from the command line is a string
    superni_tree(tmp_path / "two", SUPERNI_ORDERS[2], outputs={SUPERNI_ORDERS[2][0]: lambda i: f"plain {i}"})
    benchmark = superni(tmp_path / "two", "2")
    assert benchmark.tasks[0].name == SUPERNI_ORDERS[2][0] and benchmark.tasks[0].test[2][1] == "plain 2"


def test_a_long_prompt_keeps_its_beginning_as_sapts_collator(tmp_path):
    from moram_avalanche.models.language_model import PromptCut, prompt_cuts

    name = SUPERNI_TASKS[0]
    superni_tree(tmp_path, [name])
    task = read_superni_task(tmp_path, name)
    # every prompt of the task is cut at the model's limit keeping its head (the definition first)
    assert prompt_cuts([task], [0, 0]) == [PromptCut(None, "head")] * 2


def test_one_reference_is_drawn_per_instance_and_the_draw_is_seeded(tmp_path):
    name = SUPERNI_TASKS[0]
    superni_tree(tmp_path, [name], train=40, test=40, outputs={name: lambda i: ["x", "y", "z"]})
    answers = {seed: [a for _, a in read_superni_task(tmp_path, name, seed=seed).train] for seed in (0, 1)}
    assert set(answers[0]) == {"x", "y", "z"}  # every reference is drawn somewhere in 40 draws
    assert answers[0] == [a for _, a in read_superni_task(tmp_path, name, seed=0).train]
    assert answers[0] != answers[1]


def test_limits_keep_a_seeded_subset(tmp_path):
    name = SUPERNI_TASKS[0]
    superni_tree(tmp_path, [name], train=20, test=10)
    task = read_superni_task(tmp_path, name, train_limit=5, test_limit=3, seed=4)
    full = read_superni_task(tmp_path, name, seed=4)
    assert len(task.train) == 5 and len(task.test) == 3 and set(task.train) <= set(full.train)


def test_bad_files_name_the_file_and_the_fix(tmp_path):
    name = SUPERNI_TASKS[0]
    superni_tree(tmp_path, [name])
    path = tmp_path / "SuperNI" / name / "test.json"
    path.write_text(json.dumps({"Definition": ["d"], "Instances": [{"input": "a", "output": []}]}))
    with pytest.raises(DataError, match="instance 0 of .*test.json") as error:
        read_superni_task(tmp_path, name)
    assert "circle-hit/SAPT" in str(error.value)
    path.write_text(json.dumps({"Instances": [{"input": "a", "output": "b"}]}))
    with pytest.raises(DataError, match="Definition"):
        read_superni_task(tmp_path, name)
    with pytest.raises(DataError, match="no folder for task"):
        read_superni_task(tmp_path, SUPERNI_TASKS[1])
    with pytest.raises(ValueError, match="order must be one of"):
        superni(tmp_path, 3)
    with pytest.raises(ValueError, match=r"distinct in an order, got \['" + SUPERNI_TASKS[0] + r"'\]"):
        superni(tmp_path, [SUPERNI_TASKS[0], SUPERNI_TASKS[1], SUPERNI_TASKS[0]])  # trained twice, scored once


def test_instances_without_output_text_are_left_out_and_counted(tmp_path):
    name = SUPERNI_TASKS[0]
    # SAPT's own task511 training split has such instances (an empty output string)
    superni_tree(tmp_path, [name], train=5, outputs={name: lambda i: "" if i in (1, 3) else ["", f"kept {i}"]})
    task = read_superni_task(tmp_path, name)
    assert [answer for _, answer in task.train] == ["kept 0", "kept 2", "kept 4"]  # an empty reference is never drawn
    (report,) = [r for r in check_superni_data(tmp_path, [name])]
    # two of the five training and two of the four test instances
    assert report.usable and (report.train, report.test) == (3, 2)
    assert "4 instance(s) without an output text" in report.message
    superni_tree(tmp_path / "none", [name], outputs={name: lambda i: " "})
    with pytest.raises(DataError, match="no instance with an output text"):
        read_superni_task(tmp_path / "none", name)


def test_check_data_reports_every_task(tmp_path):
    superni_tree(tmp_path, SUPERNI_TASKS[:14])
    (tmp_path / "SuperNI" / SUPERNI_TASKS[1] / "train.json").write_text("{broken")
    reports = {r.name: r for r in check_superni_data(tmp_path)}
    assert len(reports) == 15
    assert reports[SUPERNI_TASKS[0]].usable and (reports[SUPERNI_TASKS[0]].train, reports[SUPERNI_TASKS[0]].test) == (6, 4)
    assert reports[SUPERNI_TASKS[1]].status == "malformed" and reports[SUPERNI_TASKS[14]].status == "missing"
    done = subprocess.run([sys.executable, "-m", "moram_avalanche", "check-data", "--benchmark", "superni",
                           "--root", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert done.returncode != 0
    assert "cannot be built: 2 task(s)" in done.stdout and SUPERNI_TASKS[14] in done.stdout


# --------------------------------------------------------------------------- metrics
def test_rouge_l_stemmed_by_hand():
    # the, cat, on, the, mat in both (LCS 5 of 6 tokens each way): F = 5/6; nothing is stemmed (<= 3 letters)
    assert rouge_l_stemmed(["The cat sat on the mat."], ["the cat is on the mat"]) == pytest.approx(100 * 5 / 6)
    # Porter stemming: running -> run, dogs -> dog, runs -> run; LCS of [run, dog] and [dog, run] is 1: F = 1/2
    assert rouge_l_stemmed(["running dogs"], ["dog runs"]) == pytest.approx(50.0)
    # punctuation separates tokens ("state-of-the-art" is 4 tokens); an empty prediction scores 0; the mean is over examples
    assert rouge_l_stemmed(["state-of-the-art", ""], ["state of the art", "x"]) == pytest.approx(50.0)
    # pltrdy's ROUGE-L (TRACE's) does not stem: the same pair scores 0 there
    assert rouge_l(["running dogs"], ["dog runs"]) == 0.0
    assert TEXT_METRICS["rouge_l_stemmed"](["a b"], ["a b"]) == pytest.approx(100.0)


def naive_ap_ft(matrix):
    """SAPT's score.py read literally: rows 0..N-2 of each earlier column, zeros above the diagonal."""
    n = len(matrix)
    padded = [[matrix[i][j] if j <= i else 0 for j in range(n)] for i in range(n)]
    fgt = [max(row[t] for row in padded[:-1]) - padded[-1][t] for t in range(n - 1)]
    return sum(padded[-1]) / n, sum(fgt) / len(fgt)


def test_ap_and_ft_by_hand_and_against_sapts_definition():
    matrix = [[50, 0, 0], [40, 60, 0], [30, 50, 70]]
    # AP = (30 + 50 + 70) / 3; FT = ((50 - 30) + (60 - 50)) / 2
    assert ap_ft(matrix) == {"ap": pytest.approx(50.0), "ft": pytest.approx(15.0)}
    # FT uses each task's best before the last, not the diagonal: task 0 peaks after task 1
    peak = [[20, 0, 0], [45, 60, 0], [30, 60, 70]]
    assert ap_ft(peak)["ft"] == pytest.approx(((45 - 30) + 0) / 2)
    assert op_bwt(peak)["bwt"] == pytest.approx(((20 - 30) + 0) / 2)  # BWT differs
    rng = np.random.default_rng(0)
    for n in (2, 5, 15):
        m = np.tril(rng.uniform(0, 100, (n, n)))
        assert tuple(ap_ft(m).values()) == pytest.approx(naive_ap_ft(m.tolist()))
    assert np.isnan(ap_ft([[40.0]])["ft"]) and ap_ft([[40.0]])["ap"] == 40.0
    with pytest.raises(ValueError, match="square"):
        ap_ft([[1, 2]])
    with pytest.raises(ValueError, match="missing"):
        ap_ft([[1, float("nan")], [1, 2]])


def test_run_reads_superni_by_name_with_sapts_loop(tmp_path):
    """``run --benchmark superni`` (the registry's builder) trains moram-replay with SAPT's settings."""
    from tiny_text import tiny_t5, word_tokenizer

    tasks = SUPERNI_ORDERS[2][:2]
    superni_tree(tmp_path / "CL_Benchmark", tasks)
    folder = tmp_path / "tiny-t5"
    tiny_t5().save_pretrained(folder)
    word_tokenizer().save_pretrained(folder)
    log_dir = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "moram_avalanche", "run", "--benchmark", "superni",
                           "--data-root", str(tmp_path / "CL_Benchmark"), "--order", ",".join(tasks),
                           "--strategy", "moram-replay", "--model", str(folder), "--log-dir", str(log_dir),
                           "--iterations", "1", "--batch-size", "1",  # SAPT's 4 accumulation steps fit 6 examples
                           "--set", "max_new_tokens=2", "--set", "mem_size=3", "--no-progress"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((log_dir / "results.json").read_text())
    assert results["domains"] == list(tasks) and np.array(results["matrix"]).shape == (2, 2)
    options = json.loads((log_dir / "run.json").read_text())["options"]
    assert options["lr"] == 3e-4 and options["accumulation_steps"] == 4 and options["max_source_length"] == 512
