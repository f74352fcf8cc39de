"""scripts/bench_pieces.py: the pieces compute the layer's call, each is timed or says why not, and a changed
library gives "not in this version" lines, never a crash."""

import importlib

import pytest
import torch


@pytest.fixture
def bench(scripts):
    return importlib.import_module("bench_pieces")


@pytest.mark.parametrize("dtype, model_dtype, limit", [("float32", "float32", 1e-5), ("bfloat16", "float32", 2e-2),
                                                      ("bfloat16", "bfloat16", 2e-2)])
def test_the_pieces_reproduce_the_layers_output(bench, dtype, model_dtype, limit):
    """Base GEMM, p = A x, the router's c and the read-out add up to the layer's eval output (the library's
    CPU path: the sparse reference), so timing them times what the layer computes."""
    case = bench.Case("test", 24, 40, 9, atoms=32, per_task=8, topk=4, temperature=0.1, threshold=0.1, dtype=dtype,
                      model_dtype=model_dtype)
    ctx = bench.context(case, "cpu")
    assert ctx.frozen.base.weight.dtype == ctx.x_in.dtype == getattr(torch, model_dtype)
    scale = float(ctx.frozen.eval()(ctx.x_in).float().abs().max())
    assert bench.reproduces_the_layer(ctx) <= limit * scale
    assert set(bench.routers()) >= {"torch"}


def test_every_piece_is_timed_or_says_why(bench, one_thread):
    ctx = bench.context(bench.QUICK_CASES[1], "cpu")  # float32
    timed = bench.time_pieces(ctx, repeats=1, calls=2)
    assert set(bench.PIECES) <= set(timed)
    for path in ("reference", "dense"):
        assert timed[f"MoRAMLinear eval, frozen bank, path {path}"]["synced"] > 0
    assert timed["  cast x to the compute dtype"] == {"why": "nothing to cast: the input is float32 already"}
    assert "cannot run here" in timed["MoRAMLinear eval, frozen bank, path triton"]["why"] or \
        timed["MoRAMLinear eval, frozen bank, path triton"]["synced"] > 0   # Triton's interpreter, where it is set
    for name, numbers in timed.items():
        assert "why" in numbers or numbers["synced"] > 0, name
        if "synced" in numbers:
            assert numbers["graph"] is None and "CUDA" in numbers["why"] and numbers["host"] >= 0
    # a training step leaves nothing behind: its gradients are dropped after every call
    assert all(p.grad is None for p in ctx.training.parameters())
    assert torch.isfinite(ctx.training.new_keys).all()


def test_a_changed_library_gives_not_in_this_version(bench, monkeypatch):
    def moved(ctx):
        raise AttributeError("module 'dense' has no attribute 'dense_forward'")

    monkeypatch.setitem(bench.PIECES, "  a piece that moved", moved)
    monkeypatch.setattr(bench, "PIECE_GROUPS", (lambda ctx: {"  from a group": lambda: None},
                                                 bench.path_calls))
    built = bench.pieces(bench.context(bench.QUICK_CASES[2], "cpu"))  # a bf16 model: nothing to cast
    assert built["  a piece that moved"].startswith("not in this version: AttributeError: module 'dense'")
    assert callable(built["  from a group"])
    assert built["  cast W to the compute dtype (autocast, every call)"] == "nothing to cast: the weight is bfloat16 already"
