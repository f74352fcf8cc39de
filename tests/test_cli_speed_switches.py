"""The command line's speed switches (issue 44): --keep-base-casts and --compile-eval reach every strategy
as plugins, are recorded (never checked), and are refused where they cannot work."""

import argparse

import pytest

from moram_avalanche.arguments import check_speed_switches
from moram_avalanche.cli import main
from spies import RunStopped, spy_on_run_stream

RUN = ["run", "--benchmark", "synthetic", "--strategy", "moram", "--model", "moram-synthetic-tiny",
       "--pretrained", "none", "--no-progress", "--device", "cpu", "--iterations", "1"]


@pytest.fixture
def spy_run(monkeypatch):
    """Replace the run loop: record the strategy's plugins and the recorded environment, then stop."""
    return spy_on_run_stream(monkeypatch, lambda strategy, kwargs: dict(
        plugins=[type(p).__name__ for p in strategy.plugins], environment=kwargs["environment"]))


def test_keep_base_casts_reaches_the_strategy_and_the_record(tmp_path, spy_run):
    with pytest.raises(RunStopped):
        main(RUN + ["--log-dir", str(tmp_path / "a"), "--cache-dir", str(tmp_path / "c"), "--keep-base-casts"])
    assert "KeepBaseCasts" in spy_run["plugins"] and "CompiledEvaluation" not in spy_run["plugins"]
    assert spy_run["environment"]["keep_base_casts"] is True and "compile_eval" not in spy_run["environment"]


def test_without_switches_no_plugin_is_added(tmp_path, spy_run):
    with pytest.raises(RunStopped):
        main(RUN + ["--log-dir", str(tmp_path / "a"), "--cache-dir", str(tmp_path / "c")])
    assert not {"KeepBaseCasts", "CompiledEvaluation"} & set(spy_run["plugins"])
    assert "keep_base_casts" not in spy_run["environment"]


def test_compile_eval_on_a_cpu_is_refused_in_one_line_before_anything_is_written(tmp_path, capsys):
    assert main(RUN + ["--log-dir", str(tmp_path / "a"), "--compile-eval"]) == 2
    error = capsys.readouterr().err.strip()
    assert "--compile-eval records the image tower's evaluation as CUDA graphs" in error and "cpu" in error
    assert len(error.splitlines()) == 1 and not (tmp_path / "a").exists()


def test_the_checks_of_the_switches():
    check_speed_switches(argparse.Namespace(compile_eval=True, keep_base_casts=True, fsdp=False), "cuda:0")
    with pytest.raises(ValueError, match="--fsdp shards them"):
        check_speed_switches(argparse.Namespace(compile_eval=False, keep_base_casts=True, fsdp=True), "cuda")


def test_compile_eval_is_a_clip_switch():
    from moram_avalanche.experiments.clip.loaders import clip_run_plugins
    from moram_avalanche.experiments.text.loaders import check_text_arguments

    [plugin] = clip_run_plugins(argparse.Namespace(compile_eval=True))
    assert type(plugin).__name__ == "CompiledEvaluation" and plugin.mode == "reduce-overhead"
    with pytest.raises(ValueError, match="--compile-eval does nothing for a language model"):
        check_text_arguments(argparse.Namespace(benchmark="synthetic-text", compile_eval=True))
