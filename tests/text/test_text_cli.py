"""``moram-avalanche run`` / ``compare`` on a text benchmark with a tiny local model folder."""

import json

import pytest

from command_line import cli
from fake_text_data import small_release_tree
from text_processes import ORDER


def test_run_synthetic_text_moram_end_to_end(model_folder, tmp_path):
    log_dir = tmp_path / "run"
    args = ("run", "--benchmark", "synthetic-text", "--order", ",".join(ORDER), "--strategy", "moram",
            "--model", str(model_folder), "--log-dir", str(log_dir), "--iterations", "2", "--batch-size", "8",
            "--set", "max_new_tokens=2", "--no-progress")
    done = cli(*args)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((log_dir / "results.json").read_text())
    assert results["domains"] == list(ORDER) and len(results["matrix"]) == 2
    record = json.loads((log_dir / "run.json").read_text())
    assert record["strategy"] == "TextMoRAM" and record["run"]["benchmark"] == "synthetic-text"
    assert (log_dir / "checkpoint.pt").exists() and (log_dir / "tb").is_dir()
    again = cli(*args)  # a finished run resumes to the same results
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads((log_dir / "results.json").read_text())["matrix"] == results["matrix"]


def test_text_strategy_names_and_missing_model_are_one_line_errors(model_folder, tmp_path):
    done = cli("run", "--benchmark", "synthetic-text", "--strategy", "zscl", "--model", str(model_folder),
               "--log-dir", str(tmp_path / "a"))
    assert done.returncode == 2 and "unknown strategy 'zscl'" in done.stderr and "o-lora" in done.stderr
    done = cli("run", "--benchmark", "synthetic-text", "--strategy", "moram", "--model", str(tmp_path / "none"),
               "--log-dir", str(tmp_path / "b"), "--iterations", "1")
    assert done.returncode == 2 and "no model folder" in done.stderr


def test_compare_lm_cl_order_1_from_a_data_root(model_folder, tmp_path):
    from moram_avalanche.benchmarks.text.tasks import ORDERS

    root = small_release_tree(tmp_path / "LLM-CL-Benchmark_500", ORDERS[1])
    out = tmp_path / "out"
    done = cli("compare", "--benchmark", "lm-cl", "--order", "1", "--data-root", str(root), "--strategies",
               "seq-lora,o-lora", "--model", str(model_folder), "--out", str(out), "--iterations", "1",
               "--batch-size", "4", "--set", "seq-lora.max_new_tokens=2", "--set", "o-lora.max_new_tokens=2",
               "--no-progress")
    assert done.returncode == 0, done.stderr[-3000:]
    for name in ("seq-lora", "o-lora"):
        results = json.loads((out / name / "results.json").read_text())
        assert results["domains"] == list(ORDERS[1]) and len(results["matrix"]) == 4
    table = (out / "table.md").read_text()  # the language models' table: OP and BWT, no Transfer
    assert "BWT" in table and "Transfer" not in table and "seq-lora" in table


def test_image_options_on_a_text_benchmark_are_one_line_errors(model_folder, tmp_path):
    done = cli("run", "--benchmark", "synthetic-text", "--strategy", "moram", "--model", str(model_folder),
               "--log-dir", str(tmp_path / "a"), "--shots", "4")
    assert done.returncode == 2 and "--benchmark synthetic-text takes no --shots" in done.stderr


def test_dtype_and_gradient_checkpointing_are_recorded_and_checked(model_folder, tmp_path):
    log_dir = tmp_path / "bf16"
    args = ("run", "--benchmark", "synthetic-text", "--order", ",".join(ORDER), "--strategy", "moram",
            "--model", str(model_folder), "--log-dir", str(log_dir), "--iterations", "1", "--batch-size", "4",
            "--set", "max_new_tokens=2", "--no-progress")
    done = cli(*args, "--dtype", "bfloat16", "--gradient-checkpointing")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "BWT" in done.stdout
    record = json.loads((log_dir / "run.json").read_text())
    assert record["run"]["dtype"] == "bfloat16" and record["run"]["gradient_checkpointing"] is True
    results = json.loads((log_dir / "results.json").read_text())
    assert {"op", "bwt"} <= set(results)
    again = cli(*args)  # the same folder with float32 weights: another run, refused
    assert again.returncode == 2 and "dtype" in again.stderr
    done = cli("run", "--benchmark", "synthetic", "--strategy", "moram", "--log-dir", str(tmp_path / "clip"),
               "--dtype", "bfloat16")
    assert done.returncode == 2 and "--dtype is for the text benchmarks" in done.stderr


def test_trace_runs_with_the_papers_trace_setting_and_the_release_preset(model_folder, tmp_path):
    """--benchmark trace: MoRAM's TRACE setting (r 16, k 16, tau 0.03; lr 5e-4, batch 4, bf16)
    unless given; --preset trace-release puts the release's shipped run on top."""
    from moram_avalanche.benchmarks import TRACE_ORDER

    root = tmp_path / "TRACE"
    for name in TRACE_ORDER[:2]:
        (root / name).mkdir(parents=True)
        for split in ("train", "eval", "test"):
            (root / name / f"{split}.json").write_text(json.dumps(
                [{"prompt": f"what colour is it {i}", "answer": "red"} for i in range(3)]))
    log_dir = tmp_path / "trace"
    done = cli("run", "--benchmark", "trace", "--order", ",".join(TRACE_ORDER[:2]), "--data-root", str(root),
               "--strategy", "moram", "--model", str(model_folder), "--log-dir", str(log_dir), "--iterations", "1",
               "--set", "max_new_tokens=2", "--no-progress")
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads((log_dir / "run.json").read_text())
    options = record["options"]
    assert record["run"]["batch_size"] == 4 and record["run"]["dtype"] == "bfloat16"
    assert (options["atoms_per_task"], options["topk"], options["temperature"], options["lr"]) == (16, 16, 0.03, 5e-4)
    assert options["max_source_length"] == 1024 and options["train_mb_size"] == 4
    log_dir = tmp_path / "release"
    done = cli("run", "--benchmark", "trace", "--order", TRACE_ORDER[0], "--data-root", str(root),
               "--strategy", "moram", "--model", str(model_folder), "--log-dir", str(log_dir),
               "--set", "max_new_tokens=2", "--preset", "trace-release", "--batch-size", "2", "--no-progress")
    # no --iterations: the release's epochs for C-STANCE (2) over its 3 prompts, one optimizer step per epoch
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads((log_dir / "run.json").read_text())
    assert (record["options"]["atoms_per_task"], record["options"]["topk"]) == (8, 8)
    assert record["options"]["train_mb_size"] == 2 and record["run"]["preset"] == "trace-release"
    assert record["options"]["accumulation_steps"] == 32  # the release's 32 prompts per step, on one process
    assert record["options"]["epochs"] == {  # runner_moram.sh: epochs="2,1,3,2,1,2,2,3" in TRACE's order
        name: count for name, count in zip(TRACE_ORDER, (2, 1, 3, 2, 1, 2, 2, 3))}
    done = cli("run", "--benchmark", "synthetic-text", "--strategy", "moram", "--model", str(model_folder),
               "--log-dir", str(tmp_path / "bad"), "--preset", "trace-release")
    assert done.returncode == 2 and "--preset trace-release is a setting of --benchmark trace" in done.stderr


def test_icl_runs_and_resumes_from_the_command_line(model_folder, tmp_path):
    log_dir = tmp_path / "icl"
    args = ("run", "--benchmark", "synthetic-text", "--order", ",".join(ORDER), "--strategy", "icl",
            "--model", str(model_folder), "--log-dir", str(log_dir), "--set", "shots=1",
            "--set", "max_new_tokens=2", "--no-progress")
    done = cli(*args)
    assert done.returncode == 0, done.stderr[-3000:]
    results = json.loads((log_dir / "results.json").read_text())
    assert len(results["matrix"]) == 2 and results["bwt"] is not None
    again = cli(*args)
    assert again.returncode == 0 and json.loads((log_dir / "results.json").read_text())["matrix"] == results["matrix"]


@pytest.mark.parametrize("strategy,options", [("l2p", ("--set", "pool_size=4", "--set", "top_k=2")),
                                              ("dualprompt", ("--set", "pool_size=2"))])
def test_prompt_strategies_run_in_bf16_with_gradient_checkpointing_and_resume(model_folder, tmp_path, strategy,
                                                                              options):
    """L2P and DualPrompt from the command line: the options reach the strategy, bf16 weights and
    gradient checkpointing keep the prompts' gradients, and a finished run resumes to its results."""
    log_dir = tmp_path / strategy
    args = ("run", "--benchmark", "synthetic-text", "--order", ",".join(ORDER), "--strategy", strategy,
            "--model", str(model_folder), "--log-dir", str(log_dir), "--iterations", "2", "--batch-size", "4",
            "--set", "max_new_tokens=2", *options, "--dtype", "bfloat16", "--gradient-checkpointing", "--no-progress")
    done = cli(*args)
    assert done.returncode == 0, done.stderr[-3000:]
    record = json.loads((log_dir / "run.json").read_text())
    assert record["strategy"] == {"l2p": "TextL2P", "dualprompt": "TextDualPrompt"}[strategy]
    assert record["options"]["pool_size"] == {"l2p": 4, "dualprompt": 2}[strategy]
    results = json.loads((log_dir / "results.json").read_text())
    assert len(results["matrix"]) == 2
    again = cli(*args)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads((log_dir / "results.json").read_text())["matrix"] == results["matrix"]
    import torch
    from transformers import AutoModelForSeq2SeqLM

    state = torch.load(log_dir / "checkpoint.pt", map_location="cpu", weights_only=False)["model"]
    assert all(key.startswith("prefix.") for key in state)  # the prompts only, not the model
    # the prompts started as rows of the (bf16) embedding table, undivided for both (L2P: BeyonderXX/TRACE
    # model/Dynamic_network/L2P.py:31, rows copied as they are since commit 2eedb15; 0.6 divided them by 100)
    table = AutoModelForSeq2SeqLM.from_pretrained(model_folder).get_input_embeddings().weight.detach()
    table = table.to(torch.bfloat16).float() / 1.0
    vectors = torch.cat([v.reshape(-1, table.shape[1]) for k, v in state.items()
                         if k in ("prefix.weight", "prefix.g_prompt", "prefix.e_prompts")])
    moved = [not any(torch.allclose(v, row) for row in table) for v in vectors]
    assert any(moved)  # the prompts trained in bf16 with gradient checkpointing
    if strategy == "l2p":  # the pool's unchosen prompts kept their initial rows (seeded run: the same each time)
        assert not all(moved)
        # a folder of 0.6's L2P (its prompts divided by 100) records no prompt_init_divisor: refused, not continued
        assert record["options"]["prompt_init_divisor"] == 1.0
        del record["options"]["prompt_init_divisor"]
        (log_dir / "run.json").write_text(json.dumps(record))
        refused = cli(*args)
        assert refused.returncode == 2
        assert 'options.prompt_init_divisor: "(absent)" there, 1.0 now' in refused.stderr, refused.stderr[-2000:]
