"""scripts/bench_dropout.py: both ways give the same gradients, and the printout says what was timed."""

import importlib

import pytest


@pytest.mark.parametrize("redraw", [False, True])
def test_a_small_run_checks_the_gradients_and_prints_a_ratio(scripts, capsys, monkeypatch, redraw):
    from moram_avalanche.layers.moram import dropped

    monkeypatch.setattr(dropped, "REDRAW_ON_CPU", False)  # (the script sets it; put it back after)
    bench = importlib.import_module("bench_dropout")
    result = bench.main(["--width", "24", "--tokens", "10", "--layers", "3", "--tasks", "2", "--atoms-per-task", "4",
                         "--repeats", "1", "--calls", "1", "--threads", "1"] + (["--redraw-on-cpu"] if redraw else []))
    out = capsys.readouterr().out
    assert result["same"] and "same gradients bit for bit: yes" in out
    assert result["ratio"] > 0 and f"= {result['ratio']:.3f}" in out
    assert ("drawn again" if redraw else "from the kept noise") in out


def test_the_gradient_check_can_fail(scripts):
    """The same forward twice gives the same gradients (``gradients`` seeds each step alike); a forward
    off by one part in a thousand does not (the check compares bits)."""
    import torch

    bench = importlib.import_module("bench_dropout")
    layers = bench.build_layers(2, 16, 2, 4, torch.float32, "cpu")
    x = torch.randn(6, 16, requires_grad=True)
    first = bench.gradients(layers, x, bench.before)
    assert all(torch.equal(a, b) for a, b in zip(first, bench.gradients(layers, x, bench.before)))
    shifted = bench.gradients(layers, x, lambda layer, inp: bench.before(layer, inp * (1 + 1e-3)))
    assert not all(torch.equal(a, b) for a, b in zip(first, shifted))
