"""Fake data trees of the language-model streams, in each source's layout: the MoRAM release's
LLM-CL-Benchmark_500, TRACE's tasks, CodeAlpaca with HumanEval, and hendrycks/test's MMLU
(SAPT's SuperNI: :mod:`fake_superni`)."""

import json


def release_tree(root, tasks, train=12, test=6):
    """The release's LLM-CL-Benchmark_500 layout for ``tasks``: <Task>/{train,eval,test,labels}.json."""
    from moram_avalanche.benchmarks.text.tasks import TASKS

    for name in tasks:
        folder = root / TASKS[name].folders[-1]
        folder.mkdir(parents=True)
        labels = ["red", "green light"]
        (folder / "labels.json").write_text(json.dumps(labels))
        for split, n in (("train", train), ("eval", 2), ("test", test)):
            (folder / f"{split}.json").write_text(json.dumps(
                [{"prompt": f"What colour is {name} item {i}? Option: red, green light\nAnswer:",
                  "answer": labels[i % 2]} for i in range(n)]))
    return root


def small_release_tree(root, tasks):
    """A fake of the release's LLM-CL-Benchmark_500 layout for ``tasks``: <Task>/{train,eval,test,labels}.json."""
    from moram_avalanche.benchmarks.text.tasks import TASKS

    for name in tasks:
        folder = root / TASKS[name].folders[-1]
        folder.mkdir(parents=True)
        labels = ["red", "green"]
        (folder / "labels.json").write_text(json.dumps(labels))
        for split, n in (("train", 4), ("eval", 1), ("test", 2)):
            (folder / f"{split}.json").write_text(json.dumps(
                [{"prompt": f"lorem {name} {i} Answer:", "answer": labels[i % 2]} for i in range(n)]))
    return root


def trace_tree(root, train=10, test=10):
    """TRACE's layout: <task>/{train,eval,test}.json of {prompt, answer}."""
    from moram_avalanche.benchmarks import TRACE_ORDER

    for name in TRACE_ORDER:
        (root / name).mkdir(parents=True)
        for split, n in (("train", train), ("eval", 2), ("test", test)):
            (root / name / f"{split}.json").write_text(json.dumps(
                [{"prompt": f"Task {name} question {i}. Answer:", "answer": f"A {i % 3}"} for i in range(n)]))
    return root


def codealpaca_tree(root, examples=10):
    """CodeAlpaca's file (a JSON list of instruction / input / output) and a HumanEval file of four
    problems whose outcome does not depend on the model: the rehearsal's word-level tokenizer decodes
    one line, which lands in the comment each prompt ends with, so problems 0-2 pass and 3 fails."""
    root.mkdir(parents=True)
    items = [{"instruction": f"Write a function that adds {i} to x.", "input": "x = 3" if i % 2 else "",
              "output": f"def add{i}(x):\n    return x + {i}"} for i in range(examples)]
    (root / "code_alpaca_20k.json").write_text(json.dumps(items))
    problems = [{"task_id": f"Fake/{i}", "entry_point": f"f{i}",
                 "prompt": f"def f{i}(x):\n    \"\"\"Return x.\"\"\"\n    return x\n    # ",
                 "test": "def check(candidate):\n    assert candidate(2) == " + ("2" if i < 3 else "3") + "\n"}
                for i in range(4)]
    (root / "HumanEval.jsonl").write_text("".join(json.dumps(p) + "\n" for p in problems))
    return root


def mmlu_tree(root, subjects=("astronomy", "college_biology"), questions=6):
    """hendrycks/test's layout: data/{test,dev}/<subject>_<split>.csv, no header, answer letters."""
    import csv

    for split, n in (("test", questions), ("dev", 2)):
        (root / "data" / split).mkdir(parents=True, exist_ok=True)
        for subject in subjects:
            with open(root / "data" / split / f"{subject}_{split}.csv", "w", newline="") as handle:
                csv.writer(handle).writerows([f"Which colour is {subject} item {i}?", "red", "green", "blue", "black",
                                              "ABCD"[i % 4]] for i in range(n))
    return root
