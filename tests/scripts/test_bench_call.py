"""scripts/bench_call.py: a row per path, dtype, bank and base, each ratio its two columns', and the pieces."""

import importlib
import math
import re

import pytest
import torch

from moram_avalanche.layers.moram.paths import triton as moram_triton

ROW = re.compile(r"^(\S+)\s+(fp32|bf16)\s+(frozen|trainable)\s+(kept|apart)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)x\s+(\d+) \((\d+)\)$")


def test_a_small_run_prints_every_row_with_its_ratio_and_operators(scripts, capsys, monkeypatch):
    for name in ("_kernels", "usable"):  # (the script stubs the launches: put them back after)
        monkeypatch.setattr(moram_triton, name, getattr(moram_triton, name))
    bench = importlib.import_module("bench_call")
    bench.main(["--paths", "triton,dense", "--rounds", "1", "--calls", "2", "--width", "16", "--tokens", "1", "--peft"])
    rows = [ROW.match(line) for line in capsys.readouterr().out.splitlines()]
    rows = [row.groups() for row in rows if row]
    assert len(rows) == 2 * 8 + 4
    assert {row[:4] for row in rows[:16]} == {(path, dtype, bank, base) for path in ("triton", "dense")
                                              for dtype in ("fp32", "bf16") for bank in ("frozen", "trainable")
                                              for base in ("kept", "apart")}
    assert [row[:4] for row in rows[16:]] == [(label, "bf16", "frozen", base) for label in ("peft", "peft-fp32")
                                              for base in ("apart", "kept")]  # (a bf16 base; fp32 under autocast)
    for row in rows:
        moram, linear, ratio = map(float, row[4:7])
        assert moram > 0 and linear > 0 and abs(ratio - moram / linear) <= 0.006 + 0.01 * ratio
    # item 7 of issue "GPU path II": a planned call dispatches at most nn.Linear's operators + 3
    for path, dtype, bank, _base, *_, ops, linear_ops in rows:  # (planned: a frozen bank's, the base kept or apart)
        if bank == "frozen" and path in ("triton", "peft", "peft-fp32"):
            assert int(ops) <= int(linear_ops) + 3, (path, dtype)


def test_the_peft_rows_time_a_frozen_base_as_get_peft_model_leaves_it(scripts, capsys, monkeypatch):
    """Under autocast a base that requires grad has its cast kept by autocast for the whole region,
    which would time the Linear with its cast cached: the peft rows' bases are frozen, as in a peft model."""
    bench = importlib.import_module("bench_call")
    seen = []

    def measure(layer, x, path, amp, rounds, calls, linear=None):
        seen.append((layer.base_layer.weight.dtype, amp, linear is layer.base_layer,
                     [p.requires_grad for p in layer.base_layer.parameters()]))
        return 2.0, 1.0, 4, 4

    monkeypatch.setattr(bench, "measure", measure)
    bench.peft_rows(16, 1, 1, 2)
    assert seen == [(dtype, amp, True, [False, False]) for dtype, amp in ((torch.bfloat16, False),
                                                                           (torch.float32, True)) for _ in range(2)]


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
                  "steps 1-6 (the plan's StackedRepeat)", "the read-out's launch (ReadOut.joined)",
                  "the stacked copy's checks (stacked_base)"):
        assert float(timed[piece]) > 0, piece
    assert "stacked_mixture" not in out and "(run_read_out)" not in out
    # (0.7.7: the read-out reads the stacked GEMM's output in place, the output made in the call's shape)
    assert "split_with_sizes" not in kept and "the output's reshape" not in kept
    timed = dict(re.findall(r"^\s+(.+?)\s+([\d.]+)$", apart, re.M))
    for piece in ("the whole call", "nn.Linear, for scale", "the plan's check (EvalPlan.applies)",
                  "steps 1-6 (the plan's ApartRepeat)", "p = A x (mm)", "the read-out's launch (ReadOut)"):
        assert float(timed[piece]) > 0, piece


def test_the_counted_rows_pair_each_row_with_its_two_loops(scripts, tmp_path):
    """``--instructions``: each row of the run under callgrind takes two dumps (MoRAM's loop, the
    Linear's), in order; the dumps of an import's ``functools.reduce`` (fewer than ``LOOP_FLOOR``
    instructions a call), before or between the loops, are not read; a dump's count is its
    ``totals:`` (or ``summary:``) line."""
    bench = importlib.import_module("bench_call")
    stdout = "\n".join([
        "torch 2.15.0, 1 thread(s); 16 -> 16, 160 atoms, 1 tokens; medians of 15 rounds x 200 calls",
        "triton     fp32  frozen    apart        nan       nan    nanx  4 (4)",
        "triton     bf16  frozen    kept         nan       nan    nanx  4 (7)",
        "peft       bf16  frozen    apart        nan       nan    nanx  4 (4)"])
    dumps = []
    counts = [("totals", 77), ("summary", 3_000_000), ("totals", 1_000_000), ("totals", 499_999),
              ("totals", 1_500_000), ("totals", 600_000), ("totals", 1_200), ("totals", 1_200_000), ("totals", 500_000)]
    for index, (label, count) in enumerate(counts):  # (a floor of 500,000 at 100 calls)
        dump = tmp_path / f"callgrind.out.{index + 1}"
        dump.write_text(f"version: 1\ncreator: callgrind-3.19.0\nevents: Ir\n{label}: {count}\n")
        dumps.append(dump)
    totals = [bench.dump_total(dump) for dump in dumps]
    assert totals == [count for _, count in counts] and bench.LOOP_FLOOR * 100 == 500_000
    table = bench.counted_table(stdout, totals, calls=100)
    assert [row[:4] for row in table] == [("triton", "fp32", "frozen", "apart"), ("triton", "bf16", "frozen", "kept"),
                                          ("peft", "bf16", "frozen", "apart")]
    assert [row[4:] for row in table] == [(30_000.0, 10_000.0, 3.0, 3.0, "4", "4"),
                                          (15_000.0, 6_000.0, 2.5, 2.5, "4", "7"),
                                          (12_000.0, 5_000.0, 2.4, 2.4, "4", "4")]
    # each dump's arithmetic taken from its own loop: (3,000,000 - 600,000) / (1,000,000 - 100,000), ...
    arithmetic = [50, 600_000, 100_000, 7, 0, 0, 1_000, 200_000, 100_000]
    bare = [row[7] for row in bench.counted_table(stdout, totals, 100, arithmetic)]
    assert bare == pytest.approx([2_400_000 / 900_000, 2.5, 1_000_000 / 400_000])
    with pytest.raises(ValueError, match=r"3 rows and 4 counted loops \(6 dumps\)"):
        bench.counted_table(stdout, totals[:6], calls=100)
    with pytest.raises(ValueError, match="9 dumps' totals but 8 dumps' arithmetic"):
        bench.counted_table(stdout, totals, 100, arithmetic[:8])
    (tmp_path / "empty").write_text("events: Ir\n")
    with pytest.raises(ValueError, match="not a callgrind dump"):
        bench.dump_total(tmp_path / "empty")


def test_a_dump_s_arithmetic_is_the_inclusive_cost_of_the_calls_into_the_gemm(scripts, tmp_path):
    """``dump_arithmetic``: the inclusive costs of the calls into ``cpublas::gemm`` (any overload) from
    other functions, names compressed at first use or written out, a nested call into a second
    overload not counted again, a call elsewhere not counted; two position columns read as two."""
    bench = importlib.import_module("bench_call")
    gemm_bf16 = "at::native::cpublas::gemm(c10::BFloat16 const*)"
    dump = tmp_path / "callgrind.out.1"
    dump.write_text("\n".join([
        "version: 1", "creator: callgrind-3.19.0", "positions: line", "events: Ir", "summary: 9999", "",
        "fn=(1) at::native::addmm_impl_cpu_", "10 500",
        f"cfn=(2) {gemm_bf16}", "calls=2 40", "11 300",              # 300: counted
        "cfn=(3) at::empty_strided", "calls=1 7", "12 80",           # elsewhere: not
        "fn=(2)", "40 200",
        "cfn=(4) at::native::cpublas::gemm(float)", "calls=1 3", "41 100",  # gemm into gemm: inside the 300
        "fn=(5) at::native::structured_mm_out_cpu::impl", "20 5",
        "cfn=(4)", "calls=1 3", "21 45",                             # 45: counted (a compressed name reused)
        "fn=at::native::linear", "30 5",
        f"cfn={gemm_bf16}", "calls=1 40", "31 7",                    # 7: counted (names written out)
        "totals: 9999", ""]))
    assert bench.dump_arithmetic(dump) == 300 + 45 + 7
    assert bench.dump_arithmetic(dump, "at::empty_strided") == 80
    two = tmp_path / "callgrind.out.2"
    two.write_text("positions: instr line\nevents: Ir\nfn=(1) f\n0x10 10 5\ncfn=(2) at::native::cpublas::gemm(x)\n"
                   "calls=1 0x20 40\n0x11 11 90\n")
    assert bench.dump_arithmetic(two) == 90


def test_instructions_without_valgrind_or_with_pieces_say_what_to_do(scripts, monkeypatch, capsys):
    bench = importlib.import_module("bench_call")
    monkeypatch.setattr(bench.shutil, "which", lambda name: None)
    with pytest.raises(SystemExit, match="apt-get install valgrind"):
        bench.main(["--instructions", "--calls", "2"])
    with pytest.raises(SystemExit):
        bench.main(["--instructions", "--pieces"])
    assert "ask for one of them" in capsys.readouterr().err


def test_under_callgrind_each_measurement_is_one_loop_of_its_calls(scripts, monkeypatch):
    """The counted run (``--counted-run``, which ``--instructions`` passes it) calls each module ``--calls`` times in one ``functools.reduce``
    after its warm-up, and gives no microseconds (nan)."""
    for name in ("_kernels", "usable"):
        monkeypatch.setattr(moram_triton, name, getattr(moram_triton, name))
    bench = importlib.import_module("bench_call")
    bench.stub_triton()
    monkeypatch.setitem(bench.COUNTED, "run", True)
    loops = []
    reduce = bench.functools.reduce

    def counted(fn, items, start):
        loops.append(len(items))
        return reduce(fn, items, start)

    monkeypatch.setattr(bench.functools, "reduce", counted)
    layer = bench.build(16, 2, True)
    moram, linear, ops, linear_ops = bench.measure(layer, torch.randn(1, 1, 16), "triton", False, 3, 7)
    assert loops == [7, 7] and math.isnan(moram) and math.isnan(linear) and ops > 0 and linear_ops > 0


TRAIN_ROW = re.compile(r"^(\S+)\s+(fp32|bf16)\s+(train-fwd|train-f\+b)\s+(apart)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)x"
                       r"\s+(\d+) \((\d+)\)$")


def test_train_adds_a_training_step_s_forward_and_backward_rows_per_path(scripts, capsys, monkeypatch):
    """``--train``: per path, after its eval rows, the training forward and the forward with its
    backward, float32 and bf16; the backward's rows dispatch more operators than the forward's, on
    both sides; the counted run's parser reads them."""
    for name in ("_kernels", "usable"):
        monkeypatch.setattr(moram_triton, name, getattr(moram_triton, name))
    bench = importlib.import_module("bench_call")
    bench.main(["--paths", "triton", "--rounds", "1", "--calls", "2", "--width", "16", "--tokens", "1", "--train"])
    lines = capsys.readouterr().out.splitlines()
    assert len([line for line in lines if ROW.match(line)]) == 8  # (the eval rows as before)
    rows = [row.groups() for row in map(TRAIN_ROW.match, lines) if row]
    assert [row[1:3] for row in rows] == [(dtype, kind) for kind in ("train-fwd", "train-f+b")
                                          for dtype in ("fp32", "bf16")]
    for row in rows:
        moram, linear, ratio = map(float, row[4:7])
        assert moram > 0 and linear > 0 and abs(ratio - moram / linear) <= 0.006 + 0.01 * ratio
    for forward, both in zip(rows[:2], rows[2:]):
        assert int(both[7]) > int(forward[7]) and int(both[8]) > int(forward[8])
    counted = [line.replace(f"{float(row[4]):9.1f} {float(row[5]):9.1f} {float(row[6]):6.2f}x",
                            f"{'nan':>9s} {'nan':>9s} {'nan':>5s}x")
               for line, row in zip([line for line in lines if TRAIN_ROW.match(line)], rows)]
    table = bench.counted_table("\n".join(counted), [1_000_000, 500_000] * 4, calls=100)
    assert [row[2] for row in table] == ["train-fwd", "train-fwd", "train-f+b", "train-f+b"]


@pytest.mark.skipif(not moram_triton.installed(), reason="Triton is not installed")
def test_dry_launches_run_the_rows_through_a_kept_launch_and_match_the_stubbed_operators():
    """``--launch dry`` (in a process without Triton's interpreter): every row, each with the stubbed
    run's operators (a launch dispatches none); refused under the interpreter with what to do."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(PYTHONPATH=os.pathsep.join([str(root), env.get("PYTHONPATH", "")]), TRITON_DEFAULT_FP_FUSION="1")
    command = [sys.executable, str(root / "scripts" / "bench_call.py"), "--paths", "triton", "--rounds", "1",
               "--calls", "2", "--width", "16", "--tokens", "1"]
    runs = {launch: subprocess.run(command + ["--launch", launch], capture_output=True, text=True, env=env,
                                   timeout=900) for launch in ("stub", "dry")}
    rows = {}
    for launch, run in runs.items():
        assert run.returncode == 0, run.stderr[-3000:]
        rows[launch] = [row.groups() for row in map(ROW.match, run.stdout.splitlines()) if row]
    assert len(rows["dry"]) == 8
    assert [row[:4] + row[7:] for row in rows["dry"]] == [row[:4] + row[7:] for row in rows["stub"]]
    refused = subprocess.run(command + ["--launch", "dry"], capture_output=True, text=True, timeout=900,
                             env={**env, "TRITON_INTERPRET": "1"})
    assert refused.returncode != 0 and "unset TRITON_INTERPRET" in refused.stderr
