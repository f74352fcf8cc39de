"""scripts/bench_block.py: the release's way computes MoRAM, eval is timed on a frozen bank, every clock is reported."""

import importlib

import pytest
import torch


@pytest.fixture
def bench(scripts):
    return importlib.import_module("bench_block")


@pytest.mark.parametrize("training", [False, True])
def test_the_releases_way_computes_the_naive_reference(bench, training):
    """What is timed as the release's layer is MoRAM (float64 against the naive statement), so the
    ratio compares two ways of the same numbers."""
    from moram_avalanche.layers.moram.naive import NaiveMoRAMLinear

    models = bench.build(12, 10, atoms=24, device="cpu", per_task=8)
    release = models["release"].double().train(training)
    layer = models["moram"]
    frozen = layer.num_frozen
    naive = NaiveMoRAMLinear(layer.base.weight.double(), layer.base.bias.double(), layer.keys[:frozen].double(),
                             layer.values[:, :frozen].double(), layer.keys[frozen:].double(),
                             layer.values[:, frozen:].double(), topk=16, temperature=0.01, threshold=0.2)
    x = torch.randn(3, 5, 12, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(release(x), naive.train(training)(x))


def test_measure_times_every_cell_by_every_clock_and_eval_on_a_frozen_bank(bench, monkeypatch, one_thread):
    seen = []
    eval_call = bench.eval_call

    def spy(module, x, dtype):  # what eval times: MoRAM with nothing left to train
        if hasattr(module, "num_trainable"):
            seen.append(module.num_trainable)
        return eval_call(module, x, dtype)

    monkeypatch.setattr(bench, "eval_call", spy)
    totals = bench.measure("cpu", 1, 16, 1, dtypes=("float32",), calls=2, shapes=bench.QUICK_BLOCK, tokens=3)
    assert seen == [0] * len(bench.QUICK_BLOCK)
    assert bench.cells(totals) == [("eval", "float32"), ("train", "float32")]
    for mode, dtype in bench.cells(totals):
        cell = totals[(mode, dtype)]
        assert list(cell) == ["synced", "back-to-back", "graph"]
        ways = {"linear", "moram", "release"} if mode == "eval" else {"moram", "release"}  # nothing trains nn.Linear
        for clock in ("synced", "back-to-back"):
            assert set(cell[clock]) == ways and all(seconds > 0 for seconds in cell[clock].values())
        assert set(cell["graph"].values()) == {None}  # no CUDA graph on the CPU
    assert totals[("error", "float32")]["release"] < 1e-5  # the two ways agree in float32
    (why, where), = totals[("notes",)].items()
    assert "CUDA" in why and len(where) == 3 * 5  # three linears: 3 ways in eval, 2 in training
    text = bench.report(totals)
    assert "<=1.35" in text and ">=1.2" in text and "not timed (15 cells" in text
    assert bench.GOALS == {("eval", "float32"): 1.35, ("eval", "bfloat16"): 1.60}


def test_the_quick_run(bench, capsys, one_thread):
    totals = bench.main(["--quick", "--dtypes", "bfloat16", "--clocks", "back-to-back"])
    out = capsys.readouterr().out
    assert "--quick, tiny" in out and "back-to-back eval  bfloat16" in out and "<=1.6" in out
    assert list(totals[("eval", "bfloat16")]) == ["back-to-back"]
