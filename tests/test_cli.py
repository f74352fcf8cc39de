"""The command line: names, the synthetic benchmark end to end, reference data for the strategies that take it."""

import json

import pytest

from moram_avalanche.cli import main


def test_cli_rejects_unknown_names(capsys, tmp_path):
    assert main(["run", "--benchmark", "imagenet-r", "--strategy", "moram", "--log-dir", str(tmp_path)]) == 2
    assert "unknown benchmark 'imagenet-r'; available: codealpaca, lm-cl, mtil, mtil-5shot, superni, synthetic, synthetic-text, trace, xtail" in capsys.readouterr().err
    assert main(["run", "--benchmark", "synthetic", "--strategy", "ewc", "--log-dir", str(tmp_path)]) == 2
    from moram_avalanche.strategies import STRATEGIES
    from moram_avalanche.strategies.registry import all_strategies

    err = capsys.readouterr().err  # the package's strategies and Avalanche's (avalanche.ewc, ...)
    assert "unknown strategy 'ewc'; available: " + ", ".join(sorted(all_strategies())) in err
    assert "avalanche.ewc" in err
    assert {"finetune", "lwf", "lwf-vr", "moram", "wiseft", "zeroshot", "zscl"} <= set(STRATEGIES)
    with pytest.raises(SystemExit):
        main(["run", "--strategy", "moram"])  # required options missing


def test_cli_run_on_the_synthetic_benchmark(tmp_path, capsys):
    code = main(["run", "--benchmark", "synthetic", "--strategy", "zeroshot",
                 "--model", "moram-synthetic-tiny", "--pretrained", "none",
                 "--cache-dir", str(tmp_path / "cache"), "--log-dir", str(tmp_path / "run"),
                 "--no-progress"])
    assert code == 0
    assert "Transfer" in capsys.readouterr().out
    report = json.loads((tmp_path / "run" / "results.json").read_text())
    assert report["domains"] == ["shapes", "digits", "colours", "glyphs", "textures"]
    record = json.loads((tmp_path / "run" / "run.json").read_text())  # the one record: what `analyze` rebuilds
    recorded = record["run"]
    assert {k: recorded[k] for k in ("benchmark", "model", "pretrained", "seed", "strategy")} == {
        "benchmark": "synthetic", "model": "moram-synthetic-tiny", "pretrained": "none", "seed": 42,
        "strategy": "zeroshot"}
    assert record["environment"]["weights_checksum"] > 0
    # `run` goes through the one run path: memory and time are recorded as for `compare`
    assert {"memory.json", "time.json"} <= {p.name for p in (tmp_path / "run").iterdir()}


def test_cli_run_zscl_needs_and_takes_reference_data(tmp_path, capsys):
    common = ["run", "--benchmark", "synthetic", "--model", "moram-synthetic-tiny", "--pretrained", "none",
              "--cache-dir", str(tmp_path / "cache"), "--no-progress", "--iterations", "1", "--batch-size", "8"]
    assert main([*common, "--strategy", "zscl", "--log-dir", str(tmp_path / "a")]) == 2
    assert "ZSCL needs reference_images and reference_sentences" in capsys.readouterr().err
    assert main([*common, "--strategy", "lwf", "--ref-images", "synthetic", "--log-dir", str(tmp_path / "b")]) == 2
    assert "--ref-images is for strategies that take reference images: moe-adapters, zscl" in capsys.readouterr().err
    sentences = tmp_path / "captions.txt"
    sentences.write_text("a red circle.\n\na blue square on a striped background.\n")
    with pytest.warns(UserWarning, match="warmup \\(100\\) >= iterations \\(1\\)"):
        assert main([*common, "--strategy", "zscl", "--ref-images", "synthetic", "--ref-sentences",
                     str(sentences), "--log-dir", str(tmp_path / "c")]) == 0
    assert len(json.loads((tmp_path / "c" / "results.json").read_text())["matrix"]) == 5


def test_every_help_text_says_which_protocol_a_benchmark_is():
    from moram_avalanche.cli import build_parser

    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices
    for name in ("run", "compare"):
        benchmark = next(a for a in commands[name]._actions if "--benchmark" in a.option_strings)
        shots = next(a for a in commands[name]._actions if "--shots" in a.option_strings)
        assert "mtil-5shot: few-shot MTIL, the MoRAM paper's MTIL table" in benchmark.help
        assert "mtil: MTIL as ZSCL runs it" in benchmark.help and "16 shots" in benchmark.help
        assert "mtil-5shot 5 -- the paper's MTIL" in shots.help and "mtil full -- ZSCL's MTIL" in shots.help
    check = next(a for a in commands["check-data"]._actions if "--benchmark" in a.option_strings)
    assert "mtil-5shot" in check.help


def tiny_shapes(data_root=None, **options):
    """A user's CLIP benchmark: the synthetic stream's shapes domain, six images per split."""
    from moram_avalanche.benchmarks.images.synthetic import synthetic

    return synthetic(("shapes",), train_size=6, test_size=6, **options)


def test_the_command_lines_benchmark_names_are_the_registrys(registered):
    from moram_avalanche.benchmarks import Benchmark, DataCheck, benchmarks
    from moram_avalanche.cli import build_parser

    registered(Benchmark("tiny", "clip", tiny_shapes, protocol="one toy domain (a user's)",
                         check=DataCheck("json:loads", layout="nothing to read")))
    commands = build_parser()._subparsers._group_actions[0].choices
    check = next(a for a in commands["check-data"]._actions if "--benchmark" in a.option_strings)
    assert set(check.choices) == {*(name for name, entry in benchmarks().items() if entry.check), "all"}
    assert {"tiny", "xtail", "mtil", "lm-cl", "trace", "superni", "codealpaca"} <= set(check.choices)
    assert check.help.endswith("; tiny: nothing to read")
    for name in ("run", "compare"):
        benchmark = next(a for a in commands[name]._actions if "--benchmark" in a.option_strings)
        assert all(f"{entry}: " in benchmark.help for entry in benchmarks())
        assert benchmark.help.endswith("; tiny: one toy domain (a user's)")


def test_a_users_benchmark_runs_through_the_command_line(registered, tmp_path, capsys):
    from moram_avalanche.benchmarks import Benchmark

    registered(Benchmark("tiny", "clip", tiny_shapes, protocol="one toy domain (a user's)"))
    assert main(["run", "--benchmark", "tiny", "--strategy", "zeroshot", "--model", "moram-synthetic-tiny",
                 "--pretrained", "none", "--cache-dir", str(tmp_path / "cache"), "--log-dir", str(tmp_path / "run"),
                 "--no-progress"]) == 0
    assert json.loads((tmp_path / "run" / "results.json").read_text())["domains"] == ["shapes"]
    assert json.loads((tmp_path / "run" / "run.json").read_text())["run"]["benchmark"] == "tiny"
    assert main(["run", "--benchmark", "tiny", "--strategy", "o-lora", "--log-dir", str(tmp_path / "b")]) == 2
    assert "unknown strategy 'o-lora'" in capsys.readouterr().err  # the CLIP family's strategies, by its entry


def test_run_seeds_python_numpy_and_torch_with_the_releases_42(tmp_path, monkeypatch):
    """The generators' states when the model is built equal those right after seeding all three
    with 42 (the release's seed_all); before, only torch was seeded, with 0."""
    import random

    import numpy as np
    import torch

    import moram_avalanche.clip.load as load

    seen = {}
    original = load.load_clip

    def recording(*args, **kwargs):
        seen.update(python=random.random(), numpy=np.random.random(), torch=torch.rand(1).item())
        return original(*args, **kwargs)

    monkeypatch.setattr(load, "load_clip", recording)
    assert main(["run", "--benchmark", "synthetic", "--strategy", "zeroshot", "--model", "moram-synthetic-tiny",
                 "--pretrained", "none", "--cache-dir", str(tmp_path / "cache"), "--log-dir",
                 str(tmp_path / "run"), "--no-progress"]) == 0
    expected = {"python": random.Random(42).random(), "numpy": np.random.RandomState(42).random_sample(),
                "torch": torch.rand(1, generator=torch.Generator().manual_seed(42)).item()}
    assert seen == expected


def test_every_help_text_renders(capsys):
    from moram_avalanche.cli import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    for name in [None, *commands]:
        with pytest.raises(SystemExit) as info:
            main(["--help"] if name is None else [name, "--help"])
        assert info.value.code == 0
    out = capsys.readouterr().out
    assert "analyze" in out and "99%," in out and "cost" in out


def test_the_reproduce_help_describes_every_table():
    import re

    from moram_avalanche.cli import build_parser
    from moram_avalanche.experiments.clip.paper_tables import TABLE_CHOICES
    from moram_avalanche.experiments.text.paper_tables import TEXT_TABLE_NAMES

    commands = next(a for a in build_parser()._actions if a.dest == "command")
    reproduce = commands.choices["reproduce"]
    table = next(a for a in reproduce._actions if a.dest == "table")
    for name in (*TABLE_CHOICES, *TEXT_TABLE_NAMES):
        word = rf"(?<![\w-]){re.escape(name)}(?![\w-])"
        assert re.search(word, reproduce.description) and re.search(word, table.help), name
    for name in TEXT_TABLE_NAMES:  # each language-model table said in words: its model, stream or columns
        assert f"{name} (" in reproduce.description, name


def _words(text: str) -> set:
    return {word.lower().replace("-", "") for word in text.replace(",", " ").replace(":", " ").split()}


def test_the_demo_help_names_what_the_demo_runs():
    from moram_avalanche.cli import build_parser
    from moram_avalanche.experiments.clip.demo import DEMO_STRATEGIES, FULL_DEMO_STRATEGIES
    from moram_avalanche.strategies.registry import get_strategy

    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command")
    demo = commands.choices["demo"]
    summary = next(a.help for a in commands._choices_actions if a.dest == "demo")
    shown = summary.split("(")[0]  # "ZeroShot vs FineTune vs MoRAM on an offline synthetic stream"
    named = {get_strategy(name).__name__.lower() for name in DEMO_STRATEGIES}
    assert named <= _words(shown)
    # no strategy the default demo leaves out is named before "--full"
    others = {get_strategy(name).__name__.lower() for name in FULL_DEMO_STRATEGIES} - named
    assert not others & _words(shown) and not others & _words(demo.description.split("--full")[0])
    full = next(a.help for a in demo._actions if a.dest == "full")
    assert others <= _words(full) and "all eight strategies" in full and len(FULL_DEMO_STRATEGIES) == 8


@pytest.mark.parametrize("argv", [["demo"], ["run", "--benchmark", "synthetic", "--strategy", "moram", "--log-dir", "x"],
                                  ["compare", "--benchmark", "synthetic", "--strategies", "moram", "--out", "x"],
                                  ["analyze", "x"], ["cost"]])
def test_device_defaults_to_auto(argv):
    from moram_avalanche.cli import build_parser

    assert build_parser().parse_args(argv).device == "auto"
