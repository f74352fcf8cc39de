"""The paper's scenarios and layer for any run length; where a run's settings are read from."""

import dataclasses
import json

import pytest

from moram_avalanche.experiments.clip.analysis.scenarios import (
    Scenario,
    default_block,
    default_scenarios,
    parse_scenarios,
)
from moram_avalanche.experiments.clip.analysis.source import read_run_settings
from moram_avalanche.experiments.record import make_record, write_record


def test_the_paper_scenarios_for_ten_tasks_and_shorter_runs():
    # paper: task 1 after 1, 2 and 10; task 9 after 1 and 9 (0-based here)
    assert default_scenarios(10) == [Scenario(0, 0), Scenario(0, 1), Scenario(0, 9), Scenario(8, 0),
                                     Scenario(8, 8)]
    assert default_scenarios(2) == [Scenario(0, 0), Scenario(0, 1), Scenario(1, 0), Scenario(1, 1)]
    assert default_scenarios(1) == [Scenario(0, 0)]
    assert Scenario(8, 0).label == "task 9 after task 1" and Scenario(8, 0).slug == "task9_after1"
    assert parse_scenarios("1@1, 9@9,1@1", 10) == [Scenario(0, 0), Scenario(8, 8)]
    for text, message in (("1-1", "expected DATA@AFTER"), ("1@11", "numbered 1..10"), ("", "no scenario")):
        with pytest.raises(ValueError, match=message):
            parse_scenarios(text, 10)


def test_the_map_layer_is_layer_8_of_12_else_the_middle():
    assert default_block(12) == 7  # 0-based: the paper's layer 8
    assert [default_block(d) for d in (1, 2, 3, 6, 24)] == [0, 0, 1, 2, 11]


def test_settings_come_from_the_run_record_or_a_0_2_folder_s_records(tmp_path):
    (tmp_path / "run").mkdir()
    write_record(tmp_path / "run", make_record(
        {"model": "ViT-B-16", "pretrained": "openai", "benchmark": "xtail", "stream": {"order": "2"},
         "data_root": "/data", "seed": 42}, environment={"cache_dir": "/cache", "weights_checksum": 1.5}))
    settings = read_run_settings(tmp_path / "run")
    assert (settings.model, settings.pretrained, settings.benchmark, settings.stream, settings.seed) == (
        "ViT-B-16", "openai", "xtail", {"order": "2"}, 42)
    assert (settings.cache_dir, settings.weights_checksum) == ("/cache", 1.5)
    # 0.2's `run` folder: a flat run.json beside settings.json
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "run.json").write_text(json.dumps(
        {"model": "ViT-B-16", "pretrained": "openai", "benchmark": "xtail", "stream": {"order": "2"},
         "data_root": "/data", "seed": 42, "cache_dir": "/cache", "device": "cpu", "weights_checksum": 1.5}))
    (tmp_path / "old" / "settings.json").write_text(json.dumps(
        {"run": {"model": "ViT-B-16", "pretrained": "openai", "benchmark": "xtail", "stream": {"order": "2"},
                 "data_root": "/data", "seed": 42, "strategy": "moram", "lr": None, "set": {}}}))
    assert read_run_settings(tmp_path / "old") == dataclasses.replace(settings, source=str(tmp_path / "old" / "run.json"))
    moved = read_run_settings(tmp_path / "run", data_root="/elsewhere", pretrained="none")
    assert (moved.data_root, moved.pretrained) == ("/elsewhere", None)

    (tmp_path / "cmp" / "moram").mkdir(parents=True)
    (tmp_path / "cmp" / "compare.json").write_text(json.dumps(
        {"model": "ViT-B-16", "pretrained": "none", "benchmark": "mtil", "stream": {"shots": 5}, "seed": 1}))
    shared = read_run_settings(tmp_path / "cmp" / "moram")
    assert (shared.benchmark, shared.pretrained, shared.stream, shared.seed) == ("mtil", None, {"shots": 5}, 1)

    (tmp_path / "demo" / "moram").mkdir(parents=True)
    (tmp_path / "demo" / "compare.json").write_text(json.dumps(
        {"demo": {"train_size": 100, "test_size": 60, "seed": 0, "label_space": "domain", "iterations": 80},
         "model": "moram-synthetic-tiny", "weights": "moram-synthetic-tiny-abc.pt"}))
    demo = read_run_settings(tmp_path / "demo" / "moram")
    assert demo.stream == {"train_size": 100, "test_size": 60, "seed": 0, "label_space": "domain"}
    assert demo.pretrained == "demo-cache:moram-synthetic-tiny-abc.pt"

    with pytest.raises(ValueError, match="records no settings"):
        read_run_settings(tmp_path)
    assert read_run_settings(tmp_path, model="ViT-B-16", benchmark="xtail").benchmark == "xtail"
