"""The family registry: a run folder's family from its record; the tools a family offers
(``analyze``, ``cost``), reached through its record so that the command line names no family."""

import json

import pytest

from moram_avalanche.experiments.families import (
    analysis_of_run,
    cost_family,
    families,
    family,
    family_of_record,
    offering,
)
from moram_avalanche.experiments.family import Tool


@pytest.mark.parametrize("run, expected", [
    ({"benchmark": "xtail", "strategy": "moram"}, "clip"),
    ({"benchmark": "trace", "strategy": "moram"}, "text"),
    ({"demo": {"iterations": 80}, "model": "moram-synthetic-tiny"}, "clip"),  # the CLIP demo records no benchmark
    ({"text_demo": {}, "benchmark": "synthetic-text"}, "text"),
    ({"comparison": {"seed": 1}}, None),  # a 0.2 comparison's run
    ({"benchmark": "no-such-stream"}, None),
])
def test_a_records_family_is_its_demos_or_its_benchmarks(run, expected):
    found = family_of_record({"run": run})
    assert (found.name if found else None) == expected
    assert family_of_record({}) is None


def test_each_tool_is_offered_by_the_clip_family_alone():
    assert set(offering(lambda f: f.analysis)) == set(offering(lambda f: f.cost)) == {"clip"}
    assert cost_family() is family("clip")
    assert all(isinstance(tool, Tool) and tool.about for tool in (family("clip").analysis, family("clip").cost))
    assert family("text").analysis is None and family("text").cost is None


def write_record(folder, run, strategy="MoRAM"):
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"format": 2, "run": run, "strategy": strategy}))
    return folder


def test_analyze_reaches_the_analysis_of_the_family_a_run_folder_records(tmp_path):
    clip = family("clip").analysis
    assert analysis_of_run(write_record(tmp_path / "clip", {"benchmark": "mtil"})) is clip
    assert analysis_of_run(tmp_path / "no-record") is clip  # the one family that offers an analysis
    assert analysis_of_run(tmp_path / "no-record", benchmark="synthetic") is clip
    text = write_record(tmp_path / "text", {"benchmark": "lm-cl"}, strategy="TextMoRAM")
    with pytest.raises(ValueError) as info:
        analysis_of_run(text)
    assert str(info.value) == (
        f"{text} holds a TextMoRAM run on --benchmark lm-cl (the text family): analyze draws the figures of CLIP "
        "runs (activation maps on image tokens, atoms per layer of the two towers) and supports no other family; "
        f"read this run's {text / 'results.json'}, or compare runs with `moram-avalanche compare`")
    with pytest.raises(ValueError, match="unknown benchmark 'nope'"):
        analysis_of_run(tmp_path / "no-record", benchmark="nope")


def test_every_family_record_is_a_family_with_its_tools_or_none():
    for name, record in families().items():
        assert record.name == name
        for tool in (record.analysis, record.cost):
            assert tool is None or (callable(tool.run) and isinstance(tool.about, str))
