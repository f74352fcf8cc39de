"""scripts/gpu_table.py: each measured value beside its goal with a verdict, and the quick run of every section."""

import importlib
import json

import pytest


@pytest.fixture
def table(scripts):
    module = importlib.import_module("gpu_table")
    module.ROWS.clear()
    yield module
    module.ROWS.clear()


def test_each_clock_gets_a_verdict_and_the_row_holds_only_if_all_do(table):
    entry = table.row("tower eval", {"synced": 1.30, "back-to-back": 1.40, "graph": None}, 1.35)
    assert entry["met"] == {"synced": True, "back-to-back": False, "graph": None} and entry["verdict"] is False
    assert table.row("release / ours", {"synced": 1.3, "back-to-back": 1.2}, 1.2, ">=")["verdict"] is True
    assert table.row("host synchronisations", 0, 0, "==")["met"] == {"synced": True}
    assert table.row("context only", 0.9)["verdict"] is None  # no goal: no verdict
    assert table.row("not measured", None, 1.1)["verdict"] is None
    assert table.failed_row("a section: FAILED", "ValueError: x")["verdict"] is False
    assert "FAILED  ValueError: x" in table.format_row(table.ROWS[-1])
    line = table.format_row(table.ROWS[0])
    assert "<= 1.35" in line and "1.300x ok" in line and "1.400x MISSED" in line
    with pytest.raises(ValueError, match="sense must be one of"):
        table.row("bad", 1.0, 1.0, "<")
    assert table.TOWER_EVAL_GOALS == {"float32": 1.35, "bfloat16": 1.45} and table.TOWER_TRAIN_GOAL == 1.20
    assert table.MEMORY_GOAL == 1.07


def test_the_quick_run_measures_every_section(table, tmp_path, capsys, one_thread):
    """Every section runs on the CPU at tiny sizes (the figures mean nothing): no section fails, each goal
    of the issue has its row, and the compiled decode step's profile is written."""
    code = table.main(["--quick", "--compiled", "--out", str(tmp_path / "t.json"), "--profile-dir",
                       str(tmp_path / "profile")])
    assert code == 0  # --quick: tiny sizes miss goals at random, and only a failed section counts
    rows = json.loads((tmp_path / "t.json").read_text())["rows"]
    failed = [r["row"] for r in rows if r["verdict"] is False and all(v is None for v in r["values"].values())]
    assert failed == []
    goals = {r["goal"] for r in rows}
    assert {0, 1.35, 1.6, 1.2, 1.45, 1.07, 1.1, 1.15} <= goals
    assert sum("split attention alone / plain CLIP" in r["row"] for r in rows) == 2
    assert any("dropout 0.1 both" in r["row"] for r in rows)
    compiled = [r for r in rows if "graph breaks + recompiles" in r["row"]]
    assert len(compiled) == 1 and compiled[0]["values"]["synced"] == 0  # the dense path traces whole
    assert {p.name for p in (tmp_path / "profile").iterdir()} == {"profile_decode_base.txt", "profile_decode_moram.txt",
                                                                 "profile_decode_moram-kept.txt"}
    assert sum("bases kept" in r["row"] for r in rows) == 2 + 2  # the tower in two dtypes; compiled generation
    out = capsys.readouterr().out
    assert "synced|value" in out and "rows with a goal missed or failed" in out


def test_a_section_after_the_budget_is_a_failed_row_and_sigint_keeps_the_rows(table, monkeypatch, tmp_path):
    import argparse
    import time

    ran = []
    table.section("late", lambda args: ran.append(1), argparse.Namespace(budget=0.0), time.monotonic() - 1)
    assert not ran and table.ROWS[-1]["verdict"] is False and "budget was spent" in table.ROWS[-1]["note"]

    def interrupted(args):  # the GPU check's time limit arrives as SIGINT
        table.row("measured before the limit", 1.0, 1.5)
        raise KeyboardInterrupt

    monkeypatch.setattr(table, "syncs", interrupted)
    assert table.main(["--quick", "--out", str(tmp_path / "t.json")]) == 1
    rows = [r["row"] for r in json.loads((tmp_path / "t.json").read_text())["rows"]]
    assert rows == ["measured before the limit", "interrupted (SIGINT: the step's time limit)"]
