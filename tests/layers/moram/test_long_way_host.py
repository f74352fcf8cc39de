"""The long way's host shortcuts (a call over a bank with trainable rows: no plan; issue "GPU path II").

Each shortcut reads what the slow reads read, and each kept thing is made again when what it was
made from changes:

* the Triton launches' bound launchers (``paths.triton.kept_kernel``): one per shape, constants and
  row strides (the block order the launch rule gives included), the same arguments and constants as one made at the call; another where the kernels
  are replaced, where a row stride moves ``LONG_INDEX``, or where the gate, ``k`` or the rows
  change; none kept while ``torch.compile`` traces;
* the bank's four row tensors read in one call (``bank.row_tensors``) and the base's weight and bias
  (``layer.weight_and_bias``): what ``getattr`` finds, an instance's own entry (FSDP's views) and a
  class's own property included;
* the training forward's grad mode off and on again around the steps, after an error too;
* ``compute_dtype`` of a tensor on neither the CPU nor CUDA: asked of its own device type.
"""

import pytest
import torch
from torch import nn

from moram_avalanche.layers.moram.bank import row_tensors
from moram_avalanche.layers.moram.layer import MoRAMLinear, compute_dtype, weight_and_bias
from moram_avalanche.layers.moram.naive import naive_moram
from moram_avalanche.layers.moram.paths import dense, use_path
from moram_avalanche.layers.moram.paths import triton as moram_triton


class Recorded:
    """A kernel stand-in: ``kernel[grid]`` counted; its launches record their arguments and constants."""

    def __init__(self):
        self.bound, self.calls = 0, []

    def __getitem__(self, grid):
        self.bound += 1
        return lambda *args, **constants: self.calls.append((grid, args, constants))


@pytest.fixture
def recorded(monkeypatch):
    """Kernels of their own (the module ``_kernels`` imports replaced), every kept launcher dropped
    after the test."""
    kernels = type("Kernels", (), {})()
    for name in ("route_forward_kernel", "route_backward_kernel", "route_read_out_kernel"):
        setattr(kernels, name, Recorded())
    monkeypatch.setattr(moram_triton, "_routing", kernels)
    monkeypatch.setattr(moram_triton, "_BOUND", {})
    return kernels


def read_out(proj, values, base_out=None, threshold=0.2, k=3):
    return moram_triton.run_read_out(proj, base_out, values, k, 0.05, threshold)


def test_a_read_out_repeating_its_shapes_binds_its_launcher_once_with_the_same_arguments(recorded):
    proj, values, base_out = torch.randn(2, 8), torch.randn(8, 5), torch.randn(2, 5)
    kernel = recorded.route_read_out_kernel
    for _ in range(3):
        read_out(proj, values, base_out)
    assert kernel.bound == 1 and len(kernel.calls) == 3
    (grid, args, constants), *others = kernel.calls
    for other in others:  # (each call's own tensors: out is new; the rest the same)
        assert other[0] == grid and other[2] == constants and other[1][4:] == args[4:]
    # what a launcher bound at the call passes (read_out_launcher of read_out_launch)
    launch = moram_triton.read_out_launch(2, 8, 3, 4, 5)
    assert grid == launch.grid and constants == dict(K=3, GATED=True, BASE=True, BLOCK_N=launch.block_n,
                                                     BLOCK_H=launch.block_h, BLOCK_W=launch.block_w,
                                                     BLOCK_K=launch.block_k, BLOCK_O=launch.block_o,
                                                     LONG_INDEX=False, ROWS_FIRST=launch.rows_first,
                                                     num_warps=launch.num_warps)
    assert args[4:] == (2, 8, 5, 0, 8, 5, 5, 5, pytest.approx(20.0), pytest.approx(0.2), args[-1])
    assert args[0] is proj and args[1] is base_out and args[2] is values and args[3].shape == (2, 5)


def test_a_read_out_binds_again_for_other_kernels_gates_rows_or_k(recorded, monkeypatch):
    proj, values = torch.randn(2, 8), torch.randn(8, 5)
    read_out(proj, values)
    read_out(proj, values, threshold=None)  # no gate
    read_out(torch.randn(3, 8), values)  # other rows
    read_out(proj, values, k=4)
    read_out(proj, values, base_out=torch.randn(2, 5))  # a base
    calls = recorded.route_read_out_kernel.calls
    assert recorded.route_read_out_kernel.bound == 5
    assert [c[2]["GATED"] for c in calls] == [True, False, True, True, True]
    assert [c[2]["K"] for c in calls] == [3, 3, 3, 4, 3] and [c[2]["BASE"] for c in calls][-1] is True
    others = type("Kernels", (), {})()  # the kernels replaced: launchers of their own
    others.route_read_out_kernel = Recorded()
    monkeypatch.setattr(moram_triton, "_routing", others)
    read_out(proj, values)
    assert others.route_read_out_kernel.bound == 1 and len(others.route_read_out_kernel.calls) == 1
    assert len(calls) == 5


def test_a_row_stride_past_int32_binds_a_launcher_with_long_offsets(recorded):
    """The kept launcher's ``LONG_INDEX`` is decided from the row strides it is kept by: rows of the
    same shape ``2 ** 30`` entries apart take int64 offsets, and the rows close together again int32."""
    def far(rows, atoms, stride, dtype=torch.bfloat16):
        return torch.empty_strided((rows, atoms), (stride, 1), device="meta", dtype=dtype)

    values = torch.empty(8, 5, device="meta", dtype=torch.bfloat16)
    read_out(far(4, 8, 8), values)
    read_out(far(4, 8, 2 ** 30), values)
    read_out(far(4, 8, 8), values)
    assert [c[2]["LONG_INDEX"] for c in recorded.route_read_out_kernel.calls] == [False, True, False]
    coef = [moram_triton.route_forward(far(4, 8, stride), 3, 0.05, 0.2, want_state=True)
            for stride in (8, 2 ** 30, 8)]
    assert [c[2]["LONG_INDEX"] for c in recorded.route_forward_kernel.calls] == [False, True, False]
    assert recorded.route_forward_kernel.bound == 2 and all(c[0].shape == (4, 8) for c in coef)


@pytest.mark.parametrize("dtype, slices", [(torch.float32, 2), (torch.bfloat16, 1)])
@pytest.mark.parametrize("triton_rows_first", [True, False])
def test_each_kernel_takes_the_block_order_the_launch_rule_gives(recorded, monkeypatch, dtype, slices,
                                                                 triton_rows_first):
    """Rows first (``ROWS_FIRST``) where the installed Triton wants it (forced here) and a row is
    several slices (160 float32 atoms: two of 128); a bfloat16 row of 160 is one slice of 256."""
    monkeypatch.setattr(moram_triton, "_ROWS_FIRST", triton_rows_first)
    proj, values = torch.randn(3, 160, dtype=dtype), torch.randn(160, 5, dtype=dtype)
    assert moram_triton.launch(3, 160, 4, proj.element_size()).block_h == slices
    coef, _, state = moram_triton.route_forward(proj, 4, 0.05, 0.2, want_state=True)
    moram_triton.route_backward(coef, proj, state, 4, 0.05, 0.2)
    read_out(proj, values, k=4)
    expected = triton_rows_first and slices > 1
    for kernel in (recorded.route_forward_kernel, recorded.route_backward_kernel, recorded.route_read_out_kernel):
        assert [call[2]["ROWS_FIRST"] for call in kernel.calls] == [expected]


@pytest.mark.parametrize("gated", [True, False])
def test_the_routing_launchers_are_bound_once_with_a_call_s_constants(recorded, gated):
    threshold = 0.2 if gated else None
    proj = torch.randn(3, 8)
    for _ in range(2):
        coef, weights, state = moram_triton.route_forward(proj, 3, 0.05, threshold, want_state=True)
        moram_triton.route_backward(torch.randn(3, 8), proj, state, 3, 0.05, threshold, want_coef=True)
    moram_triton.route_forward(proj, 8, 0.05, threshold, want_weights=True)  # every atom kept, weights written
    forward, backward = recorded.route_forward_kernel, recorded.route_backward_kernel
    assert forward.bound == 2 and backward.bound == 1
    launch = moram_triton.launch(3, 8, 3, 4)
    blocks = dict(BLOCK_N=launch.block_n, BLOCK_H=launch.block_h, BLOCK_W=launch.block_w, BLOCK_K=launch.block_k,
                  LONG_INDEX=False, ROWS_FIRST=launch.rows_first, num_warps=launch.num_warps, GATED=gated,
                  KEEP_ALL=False)
    assert forward.calls[0][2] == forward.calls[1][2] == dict(K=3, WRITE_W=False, SAVE=True, **blocks)
    assert backward.calls[0][2] == backward.calls[1][2] == dict(K=3, WRITE_GRAD=True, WRITE_COEF=True, **blocks)
    everything = moram_triton.launch(3, 8, 8, 4)
    assert forward.calls[2][2] == dict(K=0, WRITE_W=True, SAVE=False, BLOCK_N=everything.block_n,
                                       BLOCK_H=everything.block_h, BLOCK_W=everything.block_w,
                                       BLOCK_K=everything.block_k, LONG_INDEX=False,
                                       ROWS_FIRST=everything.rows_first, num_warps=everything.num_warps,
                                       GATED=gated, KEEP_ALL=True)
    # the row strides passed: proj's, coef's, the weights' (coef where none are written)
    assert forward.calls[0][1][5:10] == (3, 8, 8, 8, 8) and forward.calls[2][1][5:10] == (3, 8, 8, 8, 8)
    assert forward.calls[0][1][2] is forward.calls[0][1][1]  # (no weights: coef in their place)


def test_nothing_is_kept_while_tracing(recorded, monkeypatch):
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    for _ in range(2):
        read_out(torch.randn(2, 8), torch.randn(8, 5))
        moram_triton.route_forward(torch.randn(2, 8), 3, 0.05, 0.2)
    assert moram_triton._BOUND == {} and recorded.route_read_out_kernel.bound == 2
    assert recorded.route_forward_kernel.bound == 2


# ---------------------------------------------------------------- what getattr finds, read in one call
def trainable_layer(base=None):
    torch.manual_seed(0)
    layer = MoRAMLinear(base or nn.Linear(6, 5), atoms_per_task=3, topk=2, temperature=0.5, threshold=0.1)
    for _ in range(3):
        layer.expand()
        with torch.no_grad():
            layer.new_values.normal_()
    return layer


def test_the_row_tensors_are_what_getattr_finds():
    layer = trainable_layer()
    assert all(a is b for a, b in zip(row_tensors(layer), (layer.frozen_keys, layer.frozen_values,
                                                           layer.new_keys, layer.new_values)))
    # an instance's own entry over a registered parameter (FSDP's unsharded view), found first
    shadow = layer.new_keys.detach()[:2].clone()
    layer.__dict__["new_keys"] = shadow
    assert row_tensors(layer)[2] is shadow and layer.num_atoms == 6 + 2
    # the bank a forward reads holds it (its keys' last rows)
    rows = layer.rows(torch.float32)
    assert rows.keys.shape[0] == 8 and torch.equal(rows.keys[6:], shadow)


class Doubled(nn.Linear):
    """A linear layer whose class reads its weight through a property (``nn.Linear``'s forward)."""

    @property
    def weight(self):
        if "weight" not in self._parameters:  # (nn.Linear's init asks before registering it)
            raise AttributeError("weight")
        return 2 * self._parameters["weight"]


def naive_of(layer, weight, bias, x):
    return naive_moram(x.double(), weight.double(), bias.double(), [layer.keys.double()], [layer.values.double()],
                       topk=layer.effective_topk, temperature=layer.temperature, threshold=layer.threshold,
                       training=layer.training).float()


@pytest.mark.parametrize("training", [False, True])
def test_the_base_s_weight_is_what_getattr_finds(training):
    """A base class's own property, and a tensor in the instance's own dictionary, as ``getattr``
    (and the base's own call) read them, on the long way of a bank with trainable rows."""
    x = torch.randn(4, 6)
    doubled = trainable_layer(Doubled(6, 5)).train(training)
    weight, bias = weight_and_bias(doubled.base)
    assert torch.equal(weight, doubled.base.weight) and bias is doubled.base.bias
    with use_path("reference"), torch.set_grad_enabled(training):
        out = doubled(x)
    expected = naive_of(doubled, 2 * doubled.base._parameters["weight"], doubled.base.bias, x)
    assert torch.allclose(out, expected, atol=1e-5)

    layer = trainable_layer().train(training)
    own = torch.randn(5, 6)
    layer.base.__dict__["weight"] = own  # (shadows the registered parameter, as FSDP's views do)
    assert weight_and_bias(layer.base)[0] is own
    with use_path("reference"), torch.set_grad_enabled(training):
        out = layer(x)
    assert torch.allclose(out, naive_of(layer, own, layer.base.bias, x), atol=1e-5)


# ---------------------------------------------------------------- grad mode around the training forward
def test_the_training_forward_runs_without_grad_and_turns_it_on_again_after_an_error(monkeypatch):
    layer = trainable_layer().train()
    tokens = torch.randn(4, 6, requires_grad=True)
    bank = layer.rows(torch.float32)
    seen = []

    def forward(proj, k, temperature, threshold, recording, saving):
        seen.append(torch.is_grad_enabled())
        raise RuntimeError("a router's error")

    router = dense.Router("failing", forward, None)
    with pytest.raises(RuntimeError, match="a router's error"):
        dense.dense_mixture(router, tokens, None, None, bank, 2, 0.5, None, False)
    assert seen == [False] and torch.is_grad_enabled()


def test_the_compute_dtype_of_a_tensor_on_neither_the_cpu_nor_cuda_is_asked_of_its_own_device_type():
    """Autocast is asked of the tensor's own device type (meta: one autocast does not know, as
    ``torch.is_autocast_enabled("meta")`` says), not of the CPU's, whose autocast is on here."""
    meta = torch.empty(2, 3, device="meta")
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert compute_dtype(torch.empty(2, 3)) == torch.bfloat16
        with pytest.raises(RuntimeError, match="unknown device type"):
            torch.is_autocast_enabled("meta")
        with pytest.raises(RuntimeError, match="unknown device type"):
            compute_dtype(meta)
