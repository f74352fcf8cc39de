"""``analyze`` writes report.md, every picture it lists, the numbers and the TensorBoard images."""

import json
import re
import shutil

import pytest
import torch
from PIL import Image

from moram_avalanche.cli import main
from moram_avalanche.experiments.clip.analysis import AnalysisOptions, analyze
from tiny_runs import fresh_model, tiny_run, tokenizer


def pictures(report_path):
    return re.findall(r"!\[[^\]]*\]\(([^)]+)\)", report_path.read_text())


def tensorboard_images(folder):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(folder), size_guidance={"images": 0})
    events.Reload()
    return set(events.Tags()["images"])


@pytest.fixture
def pruned_copy(tmp_path):
    log_dir, benchmark, _ = tiny_run(prune_mass=0.9)
    shutil.copytree(log_dir, tmp_path / "run")
    return tmp_path / "run", benchmark


def test_analyze_writes_the_report_and_every_picture_it_lists(pruned_copy):
    log_dir, benchmark = pruned_copy
    report = analyze(log_dir, model=fresh_model(), benchmark=benchmark, tokenizer=tokenizer(),
                     options=AnalysisOptions(images=3), progress=False)
    listed = pictures(report)
    maps = [f"activation_map_task{d}_after{a}.png" for d, a in ((1, 1), (1, 2), (1, 3), (2, 1), (2, 2))]
    assert listed == [*maps, "activation_ratios.png", "atoms_for_99.png", "cumulative_mass.png", "pruning.png"]
    for name in listed:
        with Image.open(report.parent / name) as image:
            assert image.format == "PNG" and min(image.size) > 100
    assert sorted(p.name for p in report.parent.glob("*.png")) == sorted(listed)
    numbers = json.loads((report.parent / "analysis.json").read_text())
    assert numbers["run"]["tasks"] == 3 and len(numbers["activations"]) == 5
    assert numbers["pruning"]["hypothetical"] is False and 0 < numbers["pruning"]["saved_share"] < 1
    text = report.read_text()
    assert "image L1 k" in text and "covering 90%" in text and "saved" in text
    tags = tensorboard_images(log_dir / "tb" / "analysis")
    assert tags == {f"Analysis/{name[:-4]}" for name in listed}
    # analysing again replaces the TensorBoard run (one point per picture, not two)
    report = analyze(log_dir, options=AnalysisOptions(maps=False), progress=False)
    assert sorted(p.name for p in report.parent.glob("*.png")) == sorted(pictures(report))  # no stale maps
    assert tensorboard_images(log_dir / "tb" / "analysis") == {
        "Analysis/atoms_for_99", "Analysis/cumulative_mass", "Analysis/pruning"}


def test_a_wrong_layer_or_scenario_is_a_clear_error(pruned_copy):
    log_dir, benchmark = pruned_copy
    with pytest.raises(ValueError, match="no MoRAM layer at image layer 5 k"):
        analyze(log_dir, options=AnalysisOptions(layer=5), model=fresh_model(), benchmark=benchmark)
    with pytest.raises(ValueError, match="tasks are numbered 1..3"):
        analyze(log_dir, options=AnalysisOptions(scenarios="1@4"), model=fresh_model(), benchmark=benchmark)
    assert not (log_dir / "analysis").exists()  # nothing written


def test_cli_analyze_without_maps_needs_only_the_records(tmp_path, capsys):
    shutil.copytree(tiny_run()[0], tmp_path / "run")
    assert main(["analyze", str(tmp_path / "run"), "--no-maps", "--no-progress"]) == 0
    report = tmp_path / "run" / "analysis" / "report.md"
    assert str(report) in capsys.readouterr().out
    assert pictures(report) == ["atoms_for_99.png", "cumulative_mass.png", "pruning.png"]
    assert "did not prune" in report.read_text() and "covers 99% of the mass" in report.read_text()
    pruning = json.loads((report.parent / "analysis.json").read_text())["pruning"]
    assert pruning["hypothetical"] is True and 0 <= pruning["saved_share"] < 1


def test_cli_analyze_errors_are_one_line(tmp_path, capsys):
    assert main(["analyze", str(tmp_path)]) == 2
    assert "has no checkpoint.pt" in capsys.readouterr().err
    from moram_avalanche.experiments.checkpoint import FORMAT_VERSION

    # a run checkpoint as `run` reads it (analyze reads it the same way)
    torch.save({"version": FORMAT_VERSION, "strategy": "FineTune", "experiences_done": 1, "clock": {},
                "model": {"visual.proj": torch.zeros(2)}, "stateful": {}, "seen_domains": [], "rng": {}},
               tmp_path / "checkpoint.pt")
    assert main(["analyze", str(tmp_path)]) == 2
    assert "holds a FineTune run without MoRAM atoms" in capsys.readouterr().err
    shutil.copytree(tiny_run()[0], tmp_path / "moram")
    assert main(["analyze", str(tmp_path / "moram")]) == 2  # maps need the run's model and data
    assert "records no settings" in capsys.readouterr().err


def test_cli_analyze_rebuilds_the_model_and_data_a_run_recorded(tmp_path, capsys):
    """A MoRAM run on the synthetic stream, recorded as ``run`` records it, analysed by name only."""
    from avalanche.training.plugins import EvaluationPlugin

    from moram_avalanche.benchmarks.images.synthetic import synthetic
    from moram_avalanche.clip.load import load_clip
    from moram_avalanche.clip.registry import TINY_NAME
    from moram_avalanche.experiments.clip.analysis.source import weights_checksum
    from moram_avalanche.experiments.record import read_record, write_record
    from moram_avalanche.experiments.runner import run_stream
    from moram_avalanche.strategies import MoRAM

    name = TINY_NAME
    torch.manual_seed(3)
    model, train_tf, eval_tf, tok = load_clip(name, pretrained=None)
    recorded = {"model": name, "pretrained": "none", "benchmark": "synthetic", "seed": 3,
                "stream": {"train_size": 10, "test_size": 10}}
    environment = {"cache_dir": str(tmp_path / "cache"), "weights_checksum": weights_checksum(model)}
    bench = synthetic(train_size=10, test_size=10, train_transform=train_tf, eval_transform=eval_tf)
    strategy = MoRAM(model=model, tokenizer=tok, atoms_per_task=2, topk=2, iterations=1, train_mb_size=4,
                     evaluator=EvaluationPlugin(loggers=[]), progress=False)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        run_stream(strategy, bench, tmp_path / "run", max_experiences=2, progress=False, settings=recorded,
                   environment=environment)
        assert main(["analyze", str(tmp_path / "run"), "--images", "2", "--no-progress"]) == 0
    finally:
        torch.set_num_threads(threads)
    out = tmp_path / "run" / "analysis"
    assert all((out / p).is_file() for p in pictures(out / "report.md"))
    assert (out / "activation_map_task1_after2.png").is_file()
    numbers = json.loads((out / "analysis.json").read_text())
    assert numbers["run"]["settings"]["benchmark"] == "synthetic"
    # a model that is not the run's is refused
    record = read_record(tmp_path / "run")
    write_record(tmp_path / "run", {**record, "run": {**record["run"], "seed": 4}})
    assert main(["analyze", str(tmp_path / "run"), "--no-progress"]) == 2
    assert "is not the run's (weights checksum" in capsys.readouterr().err
