"""The compiled CPU routing kernels against PyTorch's own ops, and the fallback when they cannot run."""

import warnings

import pytest
import torch
import torch.nn.functional as F

from moram_avalanche.layers.moram.layer import MoRAMLinear, route
from moram_avalanche.layers.moram.naive import NaiveMoRAMLinear
from moram_avalanche.layers.moram.paths import cpu_kernel as routing_kernel
from moram_avalanche.layers.moram.paths import reference, switch
from moram_avalanche.layers.moram.paths.choice import kernels_for
from moram_avalanche.layers.moram.paths.reference import RELEVANCE_EPS, Kernels, router_backward
from moram_avalanche.layers.moram.paths.switch import KERNEL_VARIABLE, PATH_VARIABLE


@pytest.fixture
def kernel():
    """The compiled kernel (built here on first use, not at collection); skips where it cannot be built."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module = routing_kernel.load()
    if module is None:
        pytest.skip("no C++ compiler / ninja here: the kernel cannot be built")
    return module


@pytest.fixture
def fresh_loader(monkeypatch):
    """A loader that has not tried to build yet (the module caches the build and its failure), and a
    switch that has not yet warned about 0.6's variable (it warns once per process)."""
    monkeypatch.setattr(routing_kernel, "_module", None)
    monkeypatch.setattr(routing_kernel, "_failure", None)
    monkeypatch.setattr(switch, "_warned", set())
    return monkeypatch


@pytest.mark.parametrize("tokens, atoms, k", [(300, 160, 16), (40, 16, 16), (40, 17, 16), (20, 480, 16),
                                              (30, 160, 64), (25, 10, 7), (25, 31, 15), (10, 5, 1)])
def test_select_keeps_the_topk_set_and_the_norm(kernel, tokens, atoms, k):
    proj = torch.randn(tokens, atoms)
    kept, idx, norm = routing_kernel.select(proj, k)
    want_kept, want_idx = proj.topk(k, dim=-1)
    assert torch.equal(idx.sort(-1).values, want_idx.sort(-1).values)
    assert torch.equal(kept.sort(-1).values, want_kept.sort(-1).values)
    assert torch.equal(proj.gather(1, idx), kept)  # values and atoms stay paired
    want_norm = torch.linalg.vector_norm(proj.double(), dim=-1, keepdim=True).clamp_min(RELEVANCE_EPS)
    torch.testing.assert_close(norm.double(), want_norm, rtol=1e-6, atol=0)


def test_select_breaks_ties_towards_the_lower_index_and_keeps_distinct_atoms(kernel):
    proj = torch.randint(0, 3, (200, 40)).float()
    kept, idx, _ = routing_kernel.select(proj, 8)
    assert torch.equal(kept.sort(-1).values, proj.topk(8, dim=-1).values.sort(-1).values)
    assert all(len(set(row.tolist())) == 8 for row in idx)
    flat = torch.full((3, 12), 0.5)
    _, idx, _ = routing_kernel.select(flat, 5)
    assert idx.sort(-1).values.tolist() == [list(range(5))] * 3


def test_select_zero_rows_clamp_the_norm_and_nan_rows_stay_nan_with_valid_atoms(kernel):
    proj = torch.randn(4, 20)
    proj[1] = 0.0
    proj[2, 3] = float("nan")
    _, idx, norm = routing_kernel.select(proj, 6)
    assert norm[1].item() == pytest.approx(RELEVANCE_EPS)
    assert torch.isnan(norm[2]).item()
    assert idx.min().item() >= 0 and idx.max().item() < 20


@pytest.mark.parametrize("with_bias", [True, False])
def test_read_out_equals_embedding_bag_and_skips_zero_terms(kernel, with_bias):
    idx = torch.stack([torch.randperm(30)[:6] for _ in range(50)])
    coef = torch.randn(50, 6)
    coef[coef.abs() < 0.5] = 0.0  # gated-off terms
    values = torch.randn(30, 37)
    bias = torch.randn(37) if with_bias else None
    want = F.embedding_bag(idx, values, per_sample_weights=coef, mode="sum")
    if with_bias:
        want = want + bias
    torch.testing.assert_close(routing_kernel.read_out(idx, coef, values, bias), want, rtol=1e-5, atol=1e-5)
    poisoned = values.clone()
    skipped = idx[coef == 0]
    if skipped.numel():  # a skipped row is never read: an inf there changes nothing
        poisoned[skipped[0]] = float("inf")
        rows_using_only_zero = ~((idx == skipped[0]) & (coef != 0)).any(1)
        out = routing_kernel.read_out(idx, coef, poisoned, bias)
        assert torch.isfinite(out[rows_using_only_zero]).all()


@pytest.mark.parametrize("threshold", [None, 0.2])
def test_route_backward_equals_the_tensor_op_backward(kernel, threshold):
    proj = torch.randn(64, 48)
    proj[5] = 0.0  # a clamped norm: no gradient through it
    routing = route(proj, 8, 0.05, threshold)
    values, grad_out = torch.randn(48, 21), torch.randn(64, 21)
    want = router_backward(grad_out, values, proj, routing, 0.05, threshold)
    got = routing_kernel.route_backward(grad_out, values, proj, routing, 0.05, threshold)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)


def _layers(seed=0, atoms=48):
    torch.manual_seed(seed)
    base = torch.nn.Linear(24, 20)
    layer = MoRAMLinear(base, atoms_per_task=16, topk=8, temperature=0.05, threshold=0.2)
    for _ in range(atoms // 16):
        layer.expand()
        with torch.no_grad():
            layer.new_values.normal_(std=0.3)
    frozen = layer.num_frozen
    naive = NaiveMoRAMLinear(base.weight, base.bias, layer.keys[:frozen], layer.values[:, :frozen],
                             layer.keys[frozen:], layer.values[:, frozen:], topk=8, temperature=0.05,
                             threshold=0.2)
    return layer, naive


def _outputs_and_grads(layer, x, training):
    layer.train(training)
    x = x.clone().requires_grad_()
    y = layer(x)
    y.square().sum().backward()
    grads = [x.grad] + [p.grad.clone() for p in layer.parameters() if p.grad is not None]
    for p in layer.parameters():
        p.grad = None
    return y.detach(), grads


@pytest.mark.parametrize("training", [True, False])
def test_layer_with_and_without_the_kernel_agree_with_the_naive_reference(kernel, monkeypatch, training):
    layer, naive = _layers()
    x = torch.randn(3, 11, 24)
    with_kernel = _outputs_and_grads(layer, x, training)
    monkeypatch.setenv(PATH_VARIABLE, "no-cpu-kernel")
    without = _outputs_and_grads(layer, x, training)
    reference = _outputs_and_grads(naive, x, training)
    for got in (with_kernel, without):
        torch.testing.assert_close(got[0], reference[0], rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(got[1][0], reference[1][0], rtol=1e-4, atol=1e-4)  # dL/dx
    for a, b in zip(with_kernel[1], without[1]):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_other_dtypes_and_the_off_switch_take_the_pytorch_path(kernel, monkeypatch):
    assert routing_kernel.available(torch.zeros(2, 2))
    assert not routing_kernel.available(torch.zeros(2, 2, dtype=torch.float64))
    assert not routing_kernel.available(torch.zeros(2, 2, dtype=torch.bfloat16))
    monkeypatch.setenv(PATH_VARIABLE, "no-cpu-kernel")
    assert not routing_kernel.available(torch.zeros(2, 2))


def test_a_failed_build_warns_once_and_the_layer_runs_on_pytorch(fresh_loader):
    calls = []

    def broken():
        calls.append(1)
        raise RuntimeError("Error building extension 'x'\nfoo.cpp:1:1: error: no compiler here\nninja: stopped")

    fresh_loader.setattr(routing_kernel, "_build", broken)
    fresh_loader.setenv(PATH_VARIABLE, "auto")
    with pytest.warns(RuntimeWarning, match="no compiler here"):
        assert routing_kernel.load() is None  # the explicit build point
    layer, naive = _layers()
    x = torch.randn(2, 5, 24)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no second warning, no second build
        assert routing_kernel.load() is None
        y = layer(x)
    assert calls == [1]
    torch.testing.assert_close(y, naive.train(True)(x), rtol=1e-4, atol=1e-5)


def test_a_forward_never_builds_the_kernel_and_takes_the_pytorch_path_until_it_is_built(fresh_loader):
    fresh_loader.setattr(routing_kernel, "_build", lambda: pytest.fail("built inside a forward"))
    fresh_loader.setenv(PATH_VARIABLE, "auto")
    layer, naive = _layers()
    x = torch.randn(2, 5, 24)
    assert routing_kernel.built() is None
    for training in (True, False):
        layer.train(training), naive.train(training)
        x_ours, x_ref = x.clone().requires_grad_(), x.clone().requires_grad_()
        out, expected = layer(x_ours), naive(x_ref)
        torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5)
        out.sum().backward()
        expected.sum().backward()
        torch.testing.assert_close(x_ours.grad, x_ref.grad, rtol=1e-4, atol=1e-4)
    chosen = kernels_for(x.reshape(-1, 24), 48, 8, gated=True)
    assert chosen == Kernels(reference.select, reference.gated_read_out, reference.router_backward)


def test_kernels_for_is_the_one_choice_of_kernels(kernel, monkeypatch):
    compiled = Kernels(routing_kernel.select, routing_kernel.read_out, routing_kernel.route_backward)
    tokens = torch.zeros(3, 4)
    assert kernels_for(tokens, 48, 8, gated=True) == compiled
    # ungated: embedding_bag reads out as fast; R <= 2k: the GEMM backward wins
    assert kernels_for(tokens, 48, 8, gated=False).read_out is reference.read_out
    assert kernels_for(tokens, 16, 8, gated=True).router_backward is reference.router_backward
    # bfloat16 / float16 tokens route in float32: only the top-k is compiled
    for dtype in (torch.bfloat16, torch.float16):
        assert kernels_for(tokens.to(dtype), 48, 8, gated=True) == Kernels(
            routing_kernel.select, reference.gated_read_out, reference.router_backward)
    torch_path = Kernels(reference.select, reference.gated_read_out, reference.router_backward)
    assert kernels_for(tokens.double(), 48, 8, gated=True) == torch_path
    monkeypatch.setenv(PATH_VARIABLE, "no-cpu-kernel")
    assert kernels_for(tokens, 48, 8, gated=True) == torch_path


def test_cpu_kernel_raises_when_the_kernel_cannot_be_built_and_bad_values_are_refused(fresh_loader):
    fresh_loader.setattr(routing_kernel, "_build", lambda: (_ for _ in ()).throw(OSError("no ninja")))
    fresh_loader.setenv(PATH_VARIABLE, "cpu-kernel")
    with pytest.raises(RuntimeError, match="MORAM_AVALANCHE_PATH=cpu-kernel asks for .*no ninja"):
        routing_kernel.load()
    fresh_loader.setenv(PATH_VARIABLE, "fast")
    with pytest.raises(ValueError, match="MORAM_AVALANCHE_PATH: unknown MoRAM path 'fast'"):
        routing_kernel.load()


def test_on_raises_when_the_kernel_cannot_be_built_and_bad_values_are_refused(fresh_loader):
    """0.6's MORAM_AVALANCHE_KERNEL, read until 0.8 (on is MORAM_AVALANCHE_PATH=cpu-kernel)."""
    fresh_loader.delenv(PATH_VARIABLE, raising=False)
    fresh_loader.setattr(routing_kernel, "_build", lambda: (_ for _ in ()).throw(OSError("no ninja")))
    fresh_loader.setenv(KERNEL_VARIABLE, "on")
    with pytest.raises(RuntimeError, match="MORAM_AVALANCHE_KERNEL=on.*no ninja"), \
            pytest.warns(DeprecationWarning, match="MORAM_AVALANCHE_KERNEL=on is MORAM_AVALANCHE_PATH=cpu-kernel"):
        routing_kernel.load()
    fresh_loader.setenv(KERNEL_VARIABLE, "fast")
    with pytest.raises(ValueError, match="expected auto, on or off"):
        routing_kernel.load()


@pytest.mark.parametrize("variable, value", [(PATH_VARIABLE, "no-cpu-kernel"), (KERNEL_VARIABLE, "off")])
def test_off_never_builds(fresh_loader, variable, value):
    fresh_loader.setattr(routing_kernel, "_build", lambda: pytest.fail("built although off"))
    fresh_loader.delenv(PATH_VARIABLE, raising=False)
    fresh_loader.setenv(variable, value)  # the switch, or 0.6's variable (read until 0.8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert routing_kernel.mode() == "off" and routing_kernel.load() is None
    assert [str(w.message).split(": ")[-1] for w in caught] == (
        ["MORAM_AVALANCHE_KERNEL=off is MORAM_AVALANCHE_PATH=no-cpu-kernel"] if variable == KERNEL_VARIABLE else [])
    layer, naive = _layers()
    x = torch.randn(2, 5, 24)
    layer.eval(), naive.eval()
    torch.testing.assert_close(layer(x), naive(x), rtol=1e-4, atol=1e-5)
