"""Text streams from fake trees in both layouts: orders, counts, prompts, label words, errors."""

import json

import pytest

from moram_avalanche.benchmarks.readers import DataError
from moram_avalanche.benchmarks.text.tasks import ORDERS, TASKS

TRAIN, TEST = 3, 2
LABELS = {"amazon": ["very negative", "negative", "neutral", "positive", "very positive"],
          "sst-2": ["Good", "Bad"], "dbpedia": ["Company", "Artist", "Village"]}


def labels_of(name):
    return LABELS.get(name, ["yes", "no"])


def write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def olora_tree(root):
    """O-LoRA's CL_Benchmark: <category>/<dataset>/{train,dev,test,labels}.json."""
    for name, task in TASKS.items():
        folder = root / task.olora_dir
        labels = labels_of(name)
        write(folder / "labels.json", labels)
        for split, n in (("train", TRAIN), ("dev", 1), ("test", TEST)):
            write(folder / f"{split}.json", [{"sentence": f"{name} {split} {i}", "label": labels[i % len(labels)]}
                                              for i in range(n)])
    return root


def moram_tree(root):
    """The release's LLM-CL-Benchmark_500: <Task>/{train,eval,test,labels}.json (mixed-case folders)."""
    for name, task in TASKS.items():
        folder = root / task.folders[-1].upper()  # any letter case is found
        labels = labels_of(name)
        write(folder / "labels.json", labels)
        for split, n in (("train", TRAIN), ("eval", 1), ("test", TEST)):
            write(folder / f"{split}.json", [{"prompt": f"P {name} {split} {i}", "answer": labels[i % len(labels)]}
                                              for i in range(n)])
    return root


def test_orders_are_the_papers():
    assert ORDERS[1] == ("dbpedia", "amazon", "yahoo", "ag")
    assert ORDERS[3] == ("yahoo", "amazon", "ag", "dbpedia")
    for order in (4, 5, 6):
        assert len(ORDERS[order]) == 15 and set(ORDERS[order]) == set(TASKS)
    assert ORDERS[5][:3] == ("multirc", "boolqa", "wic") and ORDERS[6][-1] == "wic"


def test_the_olora_prompt_string():
    from moram_avalanche.benchmarks.text.tasks import INSTRUCTIONS, olora_prompt

    prompt = olora_prompt(INSTRUCTIONS["SC"], ["Good", "Bad"], "A fine film.")
    assert prompt == ("What is the sentiment of the following paragraph? Choose one from the option.\n"
                      "Option: Good, Bad \nA fine film.\nAnswer:")
    prefixed = olora_prompt("I\n", ["x"], "s", prefix=("TC", "agnews"))
    assert prefixed == "Task:TC\nDataset:agnews\nI\nOption: x \ns\nAnswer:"


@pytest.mark.parametrize("order", range(1, 7))
@pytest.mark.parametrize("make, layout", [(olora_tree, "olora"), (moram_tree, "moram")])
def test_streams_in_both_layouts(tmp_path, make, layout, order):
    from moram_avalanche.benchmarks import lm_cl

    benchmark = lm_cl(make(tmp_path), order)
    assert benchmark.layout == layout  # detected
    assert [e.task_name for e in benchmark.train_stream] == list(ORDERS[order])
    for index, (train, test) in enumerate(zip(benchmark.train_stream, benchmark.test_stream)):
        assert len(train.dataset) == TRAIN and len(test.dataset) == TEST
        assert train.task_label == test.task_label == index
        assert train.label_words == tuple(labels_of(train.task_name)) and train.metric == "exact_match"
        prompt, answer, task = train.dataset[1]
        assert answer == labels_of(train.task_name)[1] and task == index
        assert list(train.dataset.targets) == [i % len(train.label_words) for i in range(TRAIN)]


def test_a_hand_written_example_becomes_the_exact_prompt(tmp_path):
    from moram_avalanche.benchmarks import lm_cl

    root = olora_tree(tmp_path)
    write(root / "SC/SST-2/train.json", [{"sentence": "A fine film.", "label": "Good"}])
    benchmark = lm_cl(root, ["sst-2"])
    # every O-LoRA script passes --add_task_name True --add_dataset_name True (src/uie_collator.py)
    assert benchmark.train_stream[0].dataset[0][:2] == [
        "Task:SC\nDataset:SST-2\n"
        "What is the sentiment of the following paragraph? Choose one from the option.\n"
        "Option: Good, Bad \nA fine film.\nAnswer:", "Good"]
    bare = lm_cl(root, ["sst-2"], task_prefix=False)
    assert bare.train_stream[0].dataset[0][0].startswith("What is the sentiment")
    # COPA (src/uie_dataset_lora.py load_COPA_dataset): the sentence and "\nAnswer:" alone
    copa = "Which sentence is the effect of \"The man turned on the faucet.\"? Choose one between A and B.\n" \
           "A: The toilet filled with water.\nB: Water flowed from the spout."
    write(root / "COPA/COPA/train.json", [{"sentence": copa, "label": "yes"}])
    assert lm_cl(root, ["copa"]).train_stream[0].dataset[0][0] == "Task:COPA\nDataset:COPA\n" + copa + "\nAnswer:"
    moram = lm_cl(moram_tree(tmp_path / "release"), ["sst-2"])
    assert moram.train_stream[0].dataset[0][:2] == ["P sst-2 train 0", "Good"]  # prompts as shipped


def test_broken_trees_name_task_file_and_place(tmp_path):
    from moram_avalanche.benchmarks import check_text_data, lm_cl

    root = olora_tree(tmp_path)
    (root / "TC/yahoo/test.json").unlink()
    (root / "SC/amazon/train.json").write_text('[{"sentence": "x", "label": "neutral"},\n  {"sentence": }]')
    write(root / "TC/dbpedia/test.json", [{"sentence": "x", "label": "Company"}, {"sentence": "y", "label": "Plant"}])
    reports = {r.name: r for r in check_text_data(root, tasks=ORDERS[1])}
    assert reports["ag"].usable and reports["ag"].train == TRAIN and reports["ag"].labels == 2
    assert reports["yahoo"].status == "malformed" and "missing file" in reports["yahoo"].message
    assert "TC/yahoo/test.json" in reports["yahoo"].message
    assert "bad JSON in" in reports["amazon"].message and "line 2, column" in reports["amazon"].message
    assert "SC/amazon/train.json" in reports["amazon"].message
    message = reports["dbpedia"].message
    assert "item 1 of" in message and "TC/dbpedia/test.json" in message and "'Plant'" in message
    assert "TC/dbpedia/labels.json" in message
    with pytest.raises(DataError, match="dbpedia: item 1 of .*test.json has the label 'Plant'"):
        lm_cl(root, 1)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(DataError, match=r"no folder for task 'dbpedia'.*\n.*expected:.*any letter case"):
        lm_cl(empty, 1, layout="moram")
    assert {r.status for r in check_text_data(empty, layout="moram")} == {"missing"}


def test_bad_orders_and_layouts():
    from moram_avalanche.benchmarks.text.tasks import order_tasks, resolve_layout

    with pytest.raises(ValueError, match="order must be one of"):
        order_tasks(7)
    with pytest.raises(ValueError, match=r"unknown task\(s\) \['agnews'\]"):
        order_tasks(["dbpedia", "agnews"])
    with pytest.raises(ValueError, match="distinct"):
        order_tasks(["ag", "ag"])
    with pytest.raises(ValueError, match="layout must be"):
        resolve_layout(None, "trace")


def test_synthetic_text_stream_is_deterministic():
    from moram_avalanche.benchmarks.text.synthetic import synthetic_text, synthetic_text_tasks

    a, b = synthetic_text_tasks(seed=3), synthetic_text_tasks(seed=3)
    assert a == b and a != synthetic_text_tasks(seed=4)
    assert [t.name for t in a] == ["colour", "mood", "topic", "size", "animal"]
    benchmark = synthetic_text(("mood", "topic"), train_per_label=2, test_per_label=1)
    mood = benchmark.train_stream[0]
    assert mood.label_words == ("good", "bad") and len(mood.dataset) == 4
    prompt, answer, task = mood.dataset[0]
    assert prompt.startswith("What is the sentiment") and prompt.endswith("\nAnswer:")
    assert answer in ("good", "bad") and task == 0
    cue = next(w for w in prompt.split() if w.startswith("mood0"))
    assert cue.startswith(f"mood0{answer}")  # the planted cue names the answer
    with pytest.raises(ValueError, match="unknown synthetic text task"):
        synthetic_text_tasks(["weather"])


def test_trace_stream_with_each_tasks_metric(tmp_path):
    from moram_avalanche.benchmarks import TRACE_ORDER, trace
    from moram_avalanche.benchmarks.text.trace import TRACE_METRICS

    for name in TRACE_ORDER:
        for split, n in (("train", 4), ("eval", 1), ("test", 2)):
            write(tmp_path / name / f"{split}.json", [{"prompt": f"{name} {i}", "answer": "A"} for i in range(n)])
    benchmark = trace(tmp_path, limit=3)
    assert [e.task_name for e in benchmark.train_stream] == list(TRACE_ORDER)
    assert [e.metric for e in benchmark.test_stream] == [TRACE_METRICS[n] for n in TRACE_ORDER]
    # the release's scoring per task (evaluations/eval_*.py, infer_multi_command.py)
    assert [TRACE_METRICS[n] for n in TRACE_ORDER] == [
        "option_letter", "option_letter", "rouge_l", "code_similarity", "answer_letter", "math_accuracy",
        "math_accuracy", "sari"]
    first = benchmark.train_stream[0]
    assert len(first.dataset) == 3 and first.label_words == ("A", "B", "C")
    assert list(first.dataset[0]) == ["C-STANCE 0", "A", 0] and list(first.dataset.targets) == [0, 0, 0]
    py150 = benchmark.train_stream[3]
    assert py150.label_words == () and list(py150.dataset.targets) == [-1, -1, -1]  # open generation
    # MeetingBank keeps the head of its transcripts, up to its own 4,096 tokens; the others the
    # model's end (the causal models TRACE runs: their end, the release's left truncation)
    tasks = {task.name: task for task in benchmark.tasks}
    assert (tasks["MeetingBank"].keep, tasks["MeetingBank"].prompt_limit) == ("head", 4096)
    assert all((task.keep, task.prompt_limit) == (None, None) for name, task in tasks.items() if name != "MeetingBank")
    write(tmp_path / "FOMC" / "test.json", [{"prompt": "p"}])
    with pytest.raises(DataError, match=r"FOMC: item 0 of .*FOMC/test.json must be an object"):
        trace(tmp_path, ["FOMC"])
    with pytest.raises(ValueError, match="unknown TRACE task"):
        trace(tmp_path, ["MMLU"])


def test_check_data_on_the_command_line_names_each_broken_task(tmp_path, capsys):
    from moram_avalanche.cli import main

    root = olora_tree(tmp_path)
    assert main(["check-data", "--root", str(root), "--benchmark", "lm-cl"]) == 0
    out = capsys.readouterr().out
    assert "orders that can be built: 1, 2, 3, 4, 5, 6" in out and out.count(" found ") == 15
    (root / "TC/yahoo/test.json").unlink()
    assert main(["check-data", "--root", str(root), "--benchmark", "lm-cl"]) == 1
    out = capsys.readouterr().out
    assert "yahoo" in out and "TC/yahoo/test.json" in out and "orders that can be built: none" in out


def test_check_data_trace_names_each_broken_task(tmp_path, capsys):
    from moram_avalanche.benchmarks import TRACE_ORDER
    from moram_avalanche.cli import main

    for name in TRACE_ORDER:
        for split, n in (("train", 3), ("eval", 1), ("test", 2)):
            write(tmp_path / name / f"{split}.json", [{"prompt": f"{name} {i}", "answer": "A"} for i in range(n)])
    assert main(["check-data", "--root", str(tmp_path), "--benchmark", "trace"]) == 0
    out = capsys.readouterr().out
    assert out.count(" found ") == 8 and "metric sari" in out and "can be built" in out
    (tmp_path / "Py150" / "test.json").write_text("[{\"prompt\": \"p\",")
    import shutil

    shutil.rmtree(tmp_path / "FOMC")
    assert main(["check-data", "--root", str(tmp_path), "--benchmark", "trace"]) == 1
    out = capsys.readouterr().out
    assert "FOMC" in out and "missing" in out
    assert "Py150" in out and "Py150/test.json" in out and "cannot be built: 2 task(s)" in out


def test_the_metrics_are_public_from_the_top():
    from moram_avalanche import edit_similarity, exact_match, rouge_l, sari

    assert exact_match(["Red."], ["red"]) == 100.0 and exact_match(["The red"], ["red"]) == 0.0
    assert rouge_l(["the cat sat"], ["the cat sat down"]) == pytest.approx(100 * 6 / 7)
    assert edit_similarity(["abcd"], ["abce"]) == 75  # fuzz ratio: round(100 * 2 * 3 / 8)
    assert sari(["About 95 you now get in."], [["About 95 species are currently known.",
                                                 "About 95 species are now accepted.",
                                                 "95 species are now accepted."]],
                sources=["About 95 species are currently accepted."]) == pytest.approx(26.9536, abs=1e-4)
