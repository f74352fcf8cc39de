"""Hostile command lines of ``run`` and ``compare`` (issue 35 part B, classes 3 and 5): options
accepted but ignored or out of range, and everything of a text run that can be checked without
the model's weights, refused before any weight loads and before the output folder (or its lock)
exists.

Each case runs the command line (``main([...])``) with the model loaders replaced by ones that
fail if called, and asserts exit status 2, one line on stderr that names the option (or file)
and the fix, and that the output folder was not created.
"""

import json

import pytest

from moram_avalanche.cli import main
from tiny_text import tiny_t5, word_tokenizer

TRACE_TASKS = ("C-STANCE", "FOMC")
PAIRS = [{"prompt": f"what colour is it {i}", "answer": "red"} for i in range(3)]


# ---------------------------------------------------------------- fixtures and helpers
@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """A tiny T5 folder written by save_pretrained (the checks pass it without loading its weights)."""
    folder = tmp_path_factory.mktemp("tiny-t5")
    tiny_t5().save_pretrained(folder)
    word_tokenizer().save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def trace_root(tmp_path_factory):
    """TRACE's layout with two tasks of three items each."""
    root = tmp_path_factory.mktemp("TRACE")
    for name in TRACE_TASKS:
        (root / name).mkdir()
        for split in ("train", "eval", "test"):
            (root / name / f"{split}.json").write_text(json.dumps(PAIRS))
    return root


@pytest.fixture
def no_loading(monkeypatch):
    """Loading any model's weights fails the test: every refusal must come before it."""
    import moram_avalanche.clip.load as clip_load
    import moram_avalanche.text.load as text_load

    def refuse(*args, **kwargs):
        raise AssertionError("a model's weights were loaded before the arguments were refused")

    monkeypatch.setattr(text_load, "load_language_model", refuse)
    monkeypatch.setattr(clip_load, "load_clip", refuse)


def refused(capsys, argv, out, *fragments):
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    assert len(err) == 1, err
    for fragment in fragments:
        assert fragment in err[0], err[0]
    assert not out.exists(), "the output folder was created"
    return err[0]


def text_run(model, out, *extra, strategy="moram", benchmark="synthetic-text"):
    return ["run", "--benchmark", benchmark, "--strategy", strategy, "--model", str(model), "--log-dir", str(out),
            "--iterations", "1", "--batch-size", "2", "--no-progress", *extra]


def clip_run(tmp_path, out, strategy, *extra):
    return ["run", "--benchmark", "synthetic", "--strategy", strategy, "--model", "moram-synthetic-tiny",
            "--pretrained", "none", "--cache-dir", str(tmp_path / "cache"), "--log-dir", str(out), "--iterations", "1",
            "--batch-size", "8", "--no-progress", *extra]


# ---------------------------------------------------------------- class 3: CLIP options on a text run
@pytest.mark.parametrize("extra, fragments", [
    (("--pretrained", "openai"), ("--pretrained does nothing for a language model", "leave --pretrained out")),
    (("--pretrained", "weights.pt"), ("--pretrained does nothing for a language model", "--model")),
    (("--weights-origin", "openai"), ("--weights-origin does nothing for a language model", "leave it out")),
    (("--num-workers", "4"), ("--num-workers does nothing for a language model", "leave it out")),
    (("--no-augment",), ("--no-augment does nothing for a language model", "leave it out")),
], ids=["pretrained-tag", "pretrained-file", "weights-origin", "num-workers", "no-augment"])
def test_clip_options_on_a_text_run_are_refused_not_recorded(extra, fragments, model, tmp_path, capsys, no_loading):
    refused(capsys, text_run(model, tmp_path / "run", *extra), tmp_path / "run", *fragments)


def test_clip_options_on_a_text_comparison_are_refused(model, tmp_path, capsys, no_loading):
    argv = ["compare", "--benchmark", "synthetic-text", "--strategies", "moram,seq-lora", "--model", str(model),
            "--out", str(tmp_path / "cmp"), "--iterations", "1", "--no-augment"]
    refused(capsys, argv, tmp_path / "cmp", "--no-augment does nothing for a language model")


# ---------------------------------------------------------------- class 5: the model, before its weights
def no_config(folder):
    (folder / "config.json").unlink()


def broken_config(folder):
    (folder / "config.json").write_text("{ not json")


def no_weights(folder):
    (folder / "model.safetensors").unlink()


def no_tokenizer(folder):
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (folder / name).unlink(missing_ok=True)


@pytest.mark.parametrize("damage, fragments", [
    (no_config, ("config.json",)),
    (broken_config, ("config.json",)),
    (no_weights, ("weights",)),
    (no_tokenizer, ("tokenizer",)),
], ids=["no-config", "broken-config", "no-weights", "no-tokenizer"])
def test_a_damaged_model_folder_is_refused_before_its_weights_load(damage, fragments, model, tmp_path, capsys,
                                                                   no_loading):
    import shutil

    folder = tmp_path / "model"
    shutil.copytree(model, folder)
    damage(folder)
    line = refused(capsys, text_run(folder, tmp_path / "run"), tmp_path / "run", *fragments)
    assert str(folder) in line


def test_a_missing_model_folder_is_refused_before_anything(tmp_path, capsys, no_loading):
    refused(capsys, text_run(tmp_path / "nowhere", tmp_path / "run"), tmp_path / "run", str(tmp_path / "nowhere"))


def test_float16_is_refused_with_its_reason_before_the_model_is_read(model, tmp_path, capsys, no_loading):
    refused(capsys, text_run(model, tmp_path / "run", "--dtype", "float16"), tmp_path / "run",
            "--dtype float16 is refused", "--dtype bfloat16")


# ---------------------------------------------------------------- class 5: the stream, before the model
def test_an_unknown_task_order_is_refused_before_the_model_loads(model, tmp_path, capsys, no_loading):
    refused(capsys, text_run(model, tmp_path / "run", "--order", "bogus"), tmp_path / "run", "bogus", "tasks:")


def test_lm_cl_order_7_is_refused_before_the_model_loads(model, tmp_path, capsys, no_loading):
    refused(capsys, text_run(model, tmp_path / "run", "--order", "7", "--data-root", str(tmp_path),
                             benchmark="lm-cl"), tmp_path / "run", "order must be one of [1, 2, 3, 4, 5, 6]")


def test_an_unknown_trace_task_is_refused_before_the_model_loads(model, trace_root, tmp_path, capsys, no_loading):
    refused(capsys, text_run(model, tmp_path / "run", "--order", "FOMC,Nope", "--data-root", str(trace_root),
                             benchmark="trace"), tmp_path / "run", "unknown TRACE task(s) ['Nope']")


def test_a_missing_data_file_is_refused_before_the_model_loads(model, trace_root, tmp_path, capsys, no_loading):
    import shutil

    root = tmp_path / "TRACE"
    shutil.copytree(trace_root, root)
    (root / "FOMC" / "test.json").unlink()
    code = main(text_run(model, tmp_path / "run", "--order", "C-STANCE,FOMC", "--data-root", str(root),
                         benchmark="trace"))
    err = capsys.readouterr().err
    # a data error is the data checks' block (what was expected, the layout, the fix), not a traceback
    assert code == 2 and "FOMC" in err and "fix" in err and "Traceback" not in err, err
    assert not (tmp_path / "run").exists()


# ---------------------------------------------------------------- class 3/5: strategy options on text
@pytest.mark.parametrize("setting, fragments", [
    ("topk=0", ("--set topk=0",)),
    ("temperature=0", ("--set temperature=0",)),
    ("threshold=-1", ("--set threshold=-1",)),
    ("dropout=1.5", ("--set dropout=1.5",)),
    ("atoms_per_task=0", ("--set atoms_per_task=0",)),
    ("accumulation_steps=1000000", ("--set accumulation_steps=1000000", "[1, 1024]", "32")),
    ("accumulation_steps=2.5", ("--set accumulation_steps=2.5",)),
    ("accumulation_steps=0", ("--set accumulation_steps=0",)),
], ids=["topk", "temperature", "threshold", "dropout", "atoms", "accumulation-huge", "accumulation-float",
        "accumulation-zero"])
def test_moram_options_on_text_are_refused_before_the_model_loads(setting, fragments, model, tmp_path, capsys,
                                                                  no_loading):
    refused(capsys, text_run(model, tmp_path / "run", "--set", setting), tmp_path / "run", *fragments)


def test_more_accumulation_than_a_task_holds_is_refused_before_the_model_loads(model, tmp_path, capsys, no_loading):
    line = refused(capsys, text_run(model, tmp_path / "run", "--set", "accumulation_steps=1000"), tmp_path / "run",
                   "accumulation_steps 1000 is more minibatches than", "give accumulation_steps <=")
    assert "train_mb_size 2" in line


def test_the_release_preset_with_another_strategy_is_refused(model, trace_root, tmp_path, capsys, no_loading):
    refused(capsys, text_run(model, tmp_path / "run", "--order", "FOMC", "--data-root", str(trace_root),
                             "--preset", "trace-release", benchmark="trace", strategy="seq-lora"),
            tmp_path / "run", "--preset trace-release sets moram's run only", "leave --preset out for seq-lora")


def test_the_release_preset_in_a_comparison_with_another_strategy_is_refused(model, trace_root, tmp_path, capsys,
                                                                             no_loading):
    argv = ["compare", "--benchmark", "trace", "--order", "FOMC", "--data-root", str(trace_root), "--strategies",
            "moram,o-lora", "--model", str(model), "--out", str(tmp_path / "cmp"), "--preset", "trace-release"]
    refused(capsys, argv, tmp_path / "cmp", "changes nothing of strategy o-lora")


# ---------------------------------------------------------------- class 3: Avalanche's strategies' ranges
AVALANCHE_CASES = [
    ("avalanche.ewc", "ewc_lambda=-1", "ewc_lambda must be a finite number >= 0"),
    ("avalanche.ewc", "mode='sideways'", "mode must be one of 'separate', 'online'"),
    ("avalanche.ewc", "mode='online'", "mode 'online' needs decay_factor, a number in [0, 1]"),
    ("avalanche.lwf", "alpha=-1", "alpha must be a finite number >= 0"),
    ("avalanche.lwf", "alpha=[1,-1]", "each of alpha must be a finite number >= 0"),
    ("avalanche.lwf", "temperature=0", "temperature must be a finite number > 0"),
    ("avalanche.lwf", "alpha=()", "alpha must be a number or one per experience, got an empty tuple"),
    ("avalanche.agem", "patterns_per_exp=-1", "patterns_per_exp must be an int >= 1"),
    ("avalanche.agem", "sample_size=0", "sample_size must be an int >= 1"),
    ("avalanche.replay", "mem_size=0", "mem_size must be an int >= 1"),
]


@pytest.mark.parametrize("strategy, setting, fragment", AVALANCHE_CASES + [
    ("avalanche.gem", "memory_strength=-0.5", "memory_strength must be a finite number >= 0"),
    ("avalanche.gem", "patterns_per_exp=0", "patterns_per_exp must be an int >= 1"),
], ids=lambda value: value if isinstance(value, str) and "=" in value else None)
def test_avalanche_strategies_out_of_range_on_text_are_refused(strategy, setting, fragment, model, tmp_path, capsys,
                                                               no_loading):
    refused(capsys, text_run(model, tmp_path / "run", "--set", setting, strategy=strategy), tmp_path / "run",
            fragment, "--set")


@pytest.mark.parametrize("strategy, setting, fragment", AVALANCHE_CASES + [
    ("avalanche.mas", "alpha=2", "alpha must be a finite number in [0, 1]"),
    ("avalanche.mas", "lambda_reg=-1", "lambda_reg must be a finite number >= 0"),
    ("avalanche.der", "beta=-1", "beta must be a finite number >= 0"),
    ("avalanche.der", "batch_size_mem=0", "batch_size_mem must be an int >= 1"),
    ("avalanche.gdumb", "mem_size=-5", "mem_size must be an int >= 1"),
], ids=lambda value: value if isinstance(value, str) and "=" in value else None)
def test_avalanche_strategies_out_of_range_on_clip_are_refused(strategy, setting, fragment, tmp_path, capsys,
                                                               no_loading):
    refused(capsys, clip_run(tmp_path, tmp_path / "run", strategy, "--set", setting), tmp_path / "run", fragment)


def test_an_out_of_range_value_in_a_comparison_names_its_strategy(tmp_path, capsys, no_loading):
    argv = ["compare", "--benchmark", "synthetic", "--strategies", "avalanche.naive,avalanche.ewc", "--model",
            "moram-synthetic-tiny", "--pretrained", "none", "--cache-dir", str(tmp_path / "cache"), "--out",
            str(tmp_path / "cmp"), "--set", "avalanche.ewc.ewc_lambda=-0.4"]
    refused(capsys, argv, tmp_path / "cmp", "--set avalanche.ewc.ewc_lambda=-0.4", ">= 0")


def test_an_alpha_per_experience_shorter_than_the_text_stream_is_refused_before_the_model_loads(model, tmp_path,
                                                                                               capsys, no_loading):
    refused(capsys, text_run(model, tmp_path / "run", "--set", "alpha=(1, 2)", strategy="avalanche.lwf"),
            tmp_path / "run", "alpha holds 2 value(s), one per experience", "give 5 values, or one number")


def test_an_alpha_per_experience_shorter_than_the_clip_stream_is_refused_before_the_folder_exists(tmp_path, capsys):
    refused(capsys, clip_run(tmp_path, tmp_path / "run", "avalanche.lwf", "--set", "alpha=[1]", "--order",
                             "shapes,digits"), tmp_path / "run", "alpha holds 1 value(s)", "give 2 values")


def test_fsdp_on_a_clip_benchmark_is_refused_naming_the_benchmarks_it_is_for(tmp_path, capsys, no_loading):
    # the benchmarks whose family has strategies that train with sharded weights, every one of them (codealpaca too)
    refused(capsys, clip_run(tmp_path, tmp_path / "run", "moram", "--fsdp"), tmp_path / "run",
            "--fsdp shards a language model's frozen weights; no strategy of --benchmark synthetic trains that way",
            "(it is for the text benchmarks: lm-cl, trace, superni, codealpaca, synthetic-text)")


# ---------------------------------------------------------------- issue 46: refused too late
def test_a_dualprompt_pool_smaller_than_the_stream_is_refused_before_the_model_loads(model, tmp_path, capsys,
                                                                                    no_loading):
    # synthetic-text has five tasks: a pool of 3 used to stop the run at task 4, after three tasks trained
    refused(capsys, text_run(model, tmp_path / "run", "--set", "pool_size=3", strategy="dualprompt"),
            tmp_path / "run", "pool_size 3 holds fewer E-prompts than the stream has tasks (5)",
            "give pool_size=5 or more")


@pytest.mark.parametrize("missing", [False, True], ids=["no-folder", "no-file"])
def test_sapts_pseudo_samples_are_checked_before_the_model_loads(missing, model, tmp_path, capsys, no_loading):
    # they were read at the first task, after the model loaded and run.json was written
    root = tmp_path / "pseudo"
    if missing:
        (root / "colour").mkdir(parents=True)  # no train.json for any task
    line = refused(capsys, text_run(model, tmp_path / "run", "--set", f"pseudo_data_root={str(root)!r}",
                                    strategy="sapt"), tmp_path / "run", str(root))
    assert ("missing file" if missing else "is not a folder") in line


@pytest.mark.parametrize("strategy", ["moram", "moram-replay"])
def test_a_forced_triton_path_on_a_cpu_is_refused_before_the_model_loads(strategy, model, tmp_path, capsys,
                                                                       no_loading, monkeypatch):
    # it was a traceback at MoRAM's first forward, after the model loaded and run.json was written
    from moram_avalanche.layers.moram.paths import triton as moram_triton

    monkeypatch.setattr(moram_triton, "interpreting", lambda: False)  # the test suite turns it on for the CPU
    monkeypatch.setenv("MORAM_AVALANCHE_PATH", "triton")
    refused(capsys, text_run(model, tmp_path / "run", "--device", "cpu", strategy=strategy), tmp_path / "run",
            "MoRAM path 'triton' (MORAM_AVALANCHE_PATH=triton) cannot run on device cpu", "unset MORAM_AVALANCHE_PATH")
