"""scripts/bench_options.py: each option's prototype computes what today's call computes, the probes read
this version's behaviour (3 GEMMs a call, 18 for a block of 6, the bank joined once: 0.7's lean call), and a layer's
new switch is found, never a crash."""

import importlib

import pytest
import torch


@pytest.fixture
def options(scripts):
    return importlib.import_module("bench_options")


@pytest.fixture
def ctx(scripts):
    pieces = importlib.import_module("bench_pieces")
    case = pieces.Case("square", 16, 16, 5, atoms=24, per_task=8, topk=4, temperature=0.1, threshold=0.1,
                       dtype="float32")
    return pieces.context(case, "cpu")


def test_each_prototype_computes_what_today_computes(options, ctx):
    keys, values = options.bank_rows(ctx)
    today, option = (f() for f in (options.OPTIONS["a"].micro(ctx)["today"], options.OPTIONS["a"].micro(ctx)["option"]))
    torch.testing.assert_close(option[:, :16], today[0])          # (a): y and p from one GEMM over [W; A]
    torch.testing.assert_close(option[:, 16:], today[1])
    fns = options.OPTIONS["b"].micro(ctx)
    stacked = fns["option"]()                                     # (b): [q k v p_q p_k p_v]
    torch.testing.assert_close(stacked[:, 32:48], torch.nn.functional.linear(ctx.x, ctx.weight, ctx.bias))
    torch.testing.assert_close(stacked[:, 48 + 24:48 + 48], torch.nn.functional.linear(ctx.x, keys))
    fns = options.OPTIONS["c"].micro(ctx)
    torch.testing.assert_close(fns["option"](), fns["today"]())  # (c): the read-out folded into the base GEMM
    fns = options.OPTIONS["g"].micro(ctx)
    torch.testing.assert_close(fns["today"]().keys, fns["option"]().keys)  # (g): the same rows, joined once


def test_the_probes_read_this_versions_behaviour(options, ctx):
    assert options.gemms_per_call(ctx) == options.GEMMS_TODAY == 3  # base, p = A x, read-out
    assert options.block_gemms() == (18, 6)                         # no fusion across q, k, v, out, fc, proj
    for key in ("a", "b", "c", "f"):
        assert options.OPTIONS[key].probe(ctx).startswith("not in this version"), key
    # (g) landed in 0.7 (issue "GPU path II", a lean call): the trainable rows are views into one bank buffer
    assert options.OPTIONS["g"].probe(ctx).startswith("in this version"), "g"
    assert options.layer_switches() == {}


def test_measure_reports_every_option_and_the_layers_switches(options, ctx, one_thread):
    result = options.measure(ctx, repeats=1, calls=2)
    assert list(result) == ["a", "b", "c", "f", "g", "switches"]
    assert result["switches"]["probe"].startswith("not in this version")
    for key in ("a", "b", "c", "g"):
        ratios = result[key]["ratios"]
        assert ratios["synced"] > 0 and ratios["back-to-back"] > 0 and ratios["graph"] is None
    assert result["f"]["ratios"] == {"graph / back-to-back": None} and "CUDA" in result["f"]["why"]


def test_a_new_switch_is_found_and_timed_or_said_not_taken(options, ctx, monkeypatch, one_thread):
    monkeypatch.setattr(options, "layer_switches", lambda: {"fold_gemms": False, "block": 64})
    result = options.measure(ctx, repeats=1, calls=2, keys=["g"])
    assert "MoRAMLinear does not take it" in result["switch fold_gemms"]["why"]
    assert "not a boolean switch" in result["switch block"]["why"]
    assert "switches" not in result
