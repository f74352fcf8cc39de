"""scripts/bench_call.py: a row per path, dtype, bank and base, each ratio its two columns', and the pieces."""

import importlib
import re

from moram_avalanche.layers.moram.paths import triton as moram_triton

ROW = re.compile(r"^(\S+)\s+(fp32|bf16)\s+(frozen|trainable)\s+(kept|apart)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)x\s+(\d+) \((\d+)\)$")


def test_a_small_run_prints_every_row_with_its_ratio_and_operators(scripts, capsys, monkeypatch):
    for name in ("_kernels", "usable"):  # (the script stubs the launches: put them back after)
        monkeypatch.setattr(moram_triton, name, getattr(moram_triton, name))
    bench = importlib.import_module("bench_call")
    bench.main(["--paths", "triton,dense", "--rounds", "1", "--calls", "2", "--width", "16", "--tokens", "1", "--peft"])
    rows = [ROW.match(line) for line in capsys.readouterr().out.splitlines()]
    rows = [row.groups() for row in rows if row]
    assert len(rows) == 2 * 8 + 2
    assert {row[:4] for row in rows[:16]} == {(path, dtype, bank, base) for path in ("triton", "dense")
                                              for dtype in ("fp32", "bf16") for bank in ("frozen", "trainable")
                                              for base in ("kept", "apart")}
    assert [row[:4] for row in rows[16:]] == [("peft", "bf16", "frozen", "apart"), ("peft", "bf16", "frozen", "kept")]
    for row in rows:
        moram, linear, ratio = map(float, row[4:7])
        assert moram > 0 and linear > 0 and abs(ratio - moram / linear) <= 0.006 + 0.01 * ratio
    # item 7 of issue "GPU path II": a planned call dispatches at most nn.Linear's operators + 3
    for path, dtype, bank, _base, *_, ops, linear_ops in rows:  # (planned: a frozen bank's, the base kept or apart)
        if bank == "frozen" and path in ("triton", "peft"):
            assert int(ops) <= int(linear_ops) + 3, (path, dtype)


def test_the_pieces_name_the_repeat_s_own_steps(scripts, capsys, monkeypatch):
    """Each piece timed (above 0); the repeat's own steps where the plan has them (the names say which
    were timed: an older checkout's plan times ``stacked_mixture`` and ``run_read_out``)."""
    for name in ("_kernels", "usable"):
        monkeypatch.setattr(moram_triton, name, getattr(moram_triton, name))
    bench = importlib.import_module("bench_call")
    bench.main(["--pieces", "--rounds", "1", "--calls", "2", "--width", "16", "--tokens", "1"])
    out = capsys.readouterr().out
    kept, apart = out.split("base read apart")  # two tables: the base kept, then read apart
    timed = dict(re.findall(r"^\s+(.+?)\s+([\d.]+)$", kept, re.M))
    for piece in ("the whole call", "nn.Linear, for scale", "the plan's check (EvalPlan.applies)",
                  "steps 1-6 (the plan's StackedRepeat)", "the read-out's launch (ReadOut)",
                  "the stacked copy's checks (stacked_base)"):
        assert float(timed[piece]) > 0, piece
    assert "stacked_mixture" not in out and "(run_read_out)" not in out
    timed = dict(re.findall(r"^\s+(.+?)\s+([\d.]+)$", apart, re.M))
    for piece in ("the whole call", "nn.Linear, for scale", "the plan's check (EvalPlan.applies)",
                  "steps 1-6 (the plan's ApartRepeat)", "p = A x (mm)", "the read-out's launch (ReadOut)"):
        assert float(timed[piece]) > 0, piece
