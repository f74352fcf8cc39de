"""MoRAMLinear against the naive reference and against values computed by hand."""

import copy
import math
import random

import pytest
import torch
from torch import nn

from moram_avalanche.layers.moram.layer import MoRAMLinear
from moram_avalanche.layers.moram.naive import naive_moram
from moram_avalanche.layers.moram.paths import triton as moram_triton
from moram_avalanche.layers.moram.paths import use_path


@pytest.fixture(autouse=True, params=["reference", "dense", "triton", "triton-routed"])
def path(request, monkeypatch):
    """Every test of this file on each path (layers/moram/paths), forced: the GPU paths checked on the CPU.
    ``triton`` reads out a few rows without a backward in one kernel (``route_read_out``);
    ``triton-routed`` takes every call through the routing kernel and a GEMM (as more rows do)."""
    name = request.param.split("-")[0]
    if not moram_triton.usable(torch.empty(0)) and name == "triton":
        pytest.skip("Triton's interpreter is off (TRITON_INTERPRET=1 not set before Triton was imported)")
    if request.param == "triton-routed":
        monkeypatch.setattr(moram_triton, "READ_OUT_ROWS", 0)
    with use_path(name):
        yield name


def make_layer(d_in, d_out, *, dtype=torch.float64, **kwargs):
    base = nn.Linear(d_in, d_out).to(dtype)
    return MoRAMLinear(base, **kwargs)


def grow(layer, expansions, value_std=0.5):
    """Expand ``expansions`` times, giving each new block non-zero values (as if trained)."""
    for _ in range(expansions):
        layer.expand()
        with torch.no_grad():
            layer.new_values.normal_(std=value_std)


def reference_forward(layer, x, training):
    """The naive reference on a copy of the layer's bank, with its own leaf tensors."""
    frozen = layer.num_frozen
    new_keys = layer.keys[frozen:].clone().requires_grad_()
    new_values = layer.values[:, frozen:].clone().requires_grad_()
    flat = x.reshape(-1, x.shape[-1])
    out = naive_moram(
        flat, layer.base.weight, layer.base.bias,
        [layer.keys[:frozen], new_keys], [layer.values[:, :frozen], new_values],
        topk=layer.topk, temperature=layer.temperature, threshold=layer.threshold,
        training=training,
    )
    return out.reshape(*x.shape[:-1], -1), new_keys, new_values


CASES = []
rng = random.Random(1234)
for case in range(24):
    CASES.append(dict(
        d_in=rng.randint(2, 24), d_out=rng.randint(1, 24), per_task=rng.randint(1, 6),
        topk=rng.randint(1, 8), temperature=rng.choice([0.01, 0.1, 1.0]),
        threshold=rng.choice([0.0, 0.1, 0.3]), expansions=rng.randint(1, 3),
        lead=rng.choice([(5,), (2, 3), (2, 2, 3)]), training=bool(case % 2), seed=case,
    ))


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"seed{c['seed']}")
def test_matches_naive_reference_outputs_and_grads(case):
    torch.manual_seed(case["seed"])
    layer = make_layer(case["d_in"], case["d_out"], atoms_per_task=case["per_task"],
                       topk=case["topk"], temperature=case["temperature"],
                       threshold=case["threshold"])
    grow(layer, case["expansions"])
    layer.train(case["training"])
    x = torch.randn(*case["lead"], case["d_in"], dtype=torch.float64)
    x_ours, x_ref = x.clone().requires_grad_(), x.clone().requires_grad_()

    out = layer(x_ours)
    expected, ref_keys, ref_values = reference_forward(layer, x_ref, case["training"])
    assert out.shape == (*case["lead"], case["d_out"])
    torch.testing.assert_close(out, expected, rtol=1e-9, atol=1e-10)

    upstream = torch.randn_like(out)
    out.backward(upstream)
    expected.backward(upstream)
    torch.testing.assert_close(x_ours.grad, x_ref.grad, rtol=1e-8, atol=1e-10)
    torch.testing.assert_close(layer.new_keys.grad, ref_keys.grad, rtol=1e-8, atol=1e-10)
    torch.testing.assert_close(layer.new_values.grad.t(), ref_values.grad, rtol=1e-8, atol=1e-10)


# ---------------------------------------------------------------- hand-computed cases
def tiny_layer(keys, values, *, topk, temperature, threshold, bias=(0.0, 0.0)):
    """A 2-in, 2-out layer with W = 0, the given bias and a frozen bank of atoms."""
    base = nn.Linear(2, 2).double()
    with torch.no_grad():
        base.weight.zero_()
        base.bias.copy_(torch.tensor(bias))
    layer = MoRAMLinear(base, atoms_per_task=len(keys), topk=topk, temperature=temperature,
                        threshold=threshold)
    layer.load_atoms(torch.tensor(keys, dtype=torch.float64),
                     torch.tensor(values, dtype=torch.float64).t(), num_frozen=len(keys))
    return layer


def softmax2(a, b, tau):
    """Weights of a two-way softmax at temperature tau."""
    ea, eb = math.exp(a / tau), math.exp(b / tau)
    return ea / (ea + eb), eb / (ea + eb)


# atoms: A1=[1,0], A2=[0,1], A3=[1,1]; values (rows are B_i): B1=[1,0], B2=[0,1], B3=[1,1]
KEYS = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]
VALUES = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]


def test_hand_case_topk_softmax_train():
    layer = tiny_layer(KEYS, VALUES, topk=2, temperature=1.0, threshold=0.2).train()
    # x = [3, 4]: p = [3, 4, 7], ||p|| = sqrt(74); keep atoms 2 and 3.
    norm = math.sqrt(74)
    w2, w3 = softmax2(4 / norm, 7 / norm, 1.0)
    expected = [w3 * 7 * 1, w2 * 4 * 1 + w3 * 7 * 1]
    out = layer(torch.tensor([3.0, 4.0], dtype=torch.float64))
    assert out.tolist() == pytest.approx(expected, rel=1e-12)


def test_hand_case_eval_threshold_gates_without_renormalising():
    layer = tiny_layer(KEYS, VALUES, topk=2, temperature=1.0, threshold=0.5).eval()
    norm = math.sqrt(74)  # s2 = 4/8.60 = 0.465 < 0.5 (gated), s3 = 0.814 (kept)
    _, w3 = softmax2(4 / norm, 7 / norm, 1.0)
    out = layer(torch.tensor([3.0, 4.0], dtype=torch.float64))
    assert out.tolist() == pytest.approx([w3 * 7, w3 * 7], rel=1e-12)
    # the same input in train mode is not gated
    assert layer.train()(torch.tensor([3.0, 4.0], dtype=torch.float64))[1].item() > w3 * 7 + 1


def test_hand_case_tie_inside_the_kept_set():
    # p = [1, 1, -1]: atoms 1 and 2 tie and are both kept with weight 1/2 each.
    layer = tiny_layer([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]], VALUES, topk=2,
                       temperature=0.01, threshold=0.0)
    out = layer(torch.tensor([1.0, 1.0], dtype=torch.float64))
    assert out.tolist() == pytest.approx([0.5, 0.5], rel=1e-12)


def test_hand_case_tie_at_the_cut():
    # p = [2, 1, 1]: one of the tied atoms 2/3 is kept; both carry the same value, so the
    # output does not depend on which.
    layer = tiny_layer([[2.0, 0.0], [0.0, 1.0], [0.0, 1.0]], [[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]],
                       topk=2, temperature=0.5, threshold=0.0)
    norm = math.sqrt(6)
    w1, w_other = softmax2(2 / norm, 1 / norm, 0.5)
    out = layer(torch.tensor([1.0, 1.0], dtype=torch.float64))
    assert out.tolist() == pytest.approx([w1 * 2, w_other * 1], rel=1e-12)


def test_hand_case_topk_at_least_bank_size_keeps_every_atom():
    layer = tiny_layer(KEYS, VALUES, topk=16, temperature=1.0, threshold=0.0)
    assert layer.effective_topk == 3
    norm = math.sqrt(74)
    e = [math.exp(3 / norm), math.exp(4 / norm), math.exp(7 / norm)]
    w = [v / sum(e) for v in e]
    expected = [w[0] * 3 + w[2] * 7, w[1] * 4 + w[2] * 7]
    out = layer(torch.tensor([3.0, 4.0], dtype=torch.float64))
    assert out.tolist() == pytest.approx(expected, rel=1e-12)


def test_topk_one_uses_two_atoms_like_the_release():
    one = tiny_layer(KEYS, VALUES, topk=1, temperature=1.0, threshold=0.0)
    two = tiny_layer(KEYS, VALUES, topk=2, temperature=1.0, threshold=0.0)
    x = torch.tensor([3.0, 4.0], dtype=torch.float64)
    assert one.effective_topk == 2
    assert torch.equal(one(x), two(x))


def test_threshold_removing_every_atom_gives_the_base_output():
    layer = tiny_layer(KEYS, VALUES, topk=3, temperature=1.0, threshold=0.99,
                       bias=(0.25, -0.5)).eval()
    out = layer(torch.tensor([3.0, 4.0], dtype=torch.float64))
    assert out.tolist() == [0.25, -0.5]


def test_all_zero_input_gives_bias_and_finite_gradients():
    layer = make_layer(6, 4, atoms_per_task=3, topk=2)
    grow(layer, 2)
    x = torch.zeros(5, 6, dtype=torch.float64, requires_grad=True)
    out = layer.train()(x)
    torch.testing.assert_close(out, layer.base.bias.expand(5, 4))
    out.sum().backward()
    for grad in (x.grad, layer.new_keys.grad, layer.new_values.grad):
        assert torch.isfinite(grad).all()
    assert not torch.isnan(layer.eval()(x)).any()


# ---------------------------------------------------------------- growth and freezing
def test_no_atoms_is_exactly_the_base():
    base = nn.Linear(7, 5)
    layer = MoRAMLinear(base)
    x = torch.randn(3, 4, 7)
    assert layer.num_atoms == 0 and layer.num_frozen == 0
    assert torch.equal(layer(x), base(x))
    assert not any(p.requires_grad for p in layer.parameters())


def test_expand_initialises_like_nn_linear_and_keeps_the_output():
    layer = make_layer(50, 9, atoms_per_task=4)
    x = torch.randn(6, 50, dtype=torch.float64)
    before = layer(x)
    layer.expand()
    assert (layer.num_atoms, layer.num_frozen) == (4, 0)
    assert layer.keys.shape == (4, 50) and layer.values.shape == (9, 4)
    bound = 1 / math.sqrt(50)  # kaiming_uniform(a=sqrt(5)) bound = 1/sqrt(fan_in)
    assert layer.keys.abs().max() <= bound and layer.keys.abs().max() > bound / 2
    assert torch.equal(layer.values, torch.zeros(9, 4, dtype=torch.float64))
    torch.testing.assert_close(layer(x), before, rtol=0, atol=0)
    grow(layer, 1)
    assert (layer.num_atoms, layer.num_frozen) == (8, 4)
    assert layer.atom_task.tolist() == [0] * 4 + [1] * 4


def test_only_the_newest_atoms_are_trainable_and_change():
    torch.manual_seed(0)
    layer = make_layer(8, 6, atoms_per_task=3, topk=4)
    grow(layer, 2)
    trainable = {name for name, p in layer.named_parameters() if p.requires_grad}
    assert trainable == {"new_keys", "new_values"}
    frozen_keys, frozen_values = layer.keys[:3].clone(), layer.values[:, :3].clone()
    base_weight = layer.base.weight.clone()
    opt = torch.optim.AdamW([p for p in layer.parameters() if p.requires_grad], lr=0.1,
                            weight_decay=0.1)
    old_new_keys = layer.keys[3:].clone()
    for _ in range(3):
        opt.zero_grad()
        layer.train()(torch.randn(10, 8, dtype=torch.float64)).pow(2).sum().backward()
        opt.step()
    assert torch.equal(layer.keys[:3], frozen_keys)
    assert torch.equal(layer.values[:, :3], frozen_values)
    assert torch.equal(layer.base.weight, base_weight)
    assert not torch.equal(layer.keys[3:], old_new_keys)
    # the bank sees the optimizer's in-place updates of the parameters (one storage)
    assert torch.equal(layer.keys[3:], layer.new_keys.detach())


def test_device_dtype_conversion_and_deepcopy_keep_the_bank_consistent():
    torch.manual_seed(0)
    layer = make_layer(5, 4, dtype=torch.float32, atoms_per_task=2, topk=2)
    grow(layer, 2)
    x = torch.randn(3, 5)
    expected = layer(x).double()
    layer.double()
    assert layer.keys.dtype == torch.float64 and layer.new_keys.dtype == torch.float64
    torch.testing.assert_close(layer(x.double()), expected)
    twin = copy.deepcopy(layer)
    with torch.no_grad():
        twin.new_values.add_(1.0)  # training the copy changes the copy only
    assert not torch.allclose(twin(x.double()), layer(x.double()))
    torch.testing.assert_close(layer(x.double()), expected)
    assert torch.equal(twin.values[:, 2:], twin.new_values.detach().t())


def test_bfloat16_autocast_runs_in_the_autocast_dtype():
    torch.manual_seed(0)
    layer = make_layer(16, 8, dtype=torch.float32, atoms_per_task=4, topk=2)
    grow(layer, 1, value_std=0.1)
    x = torch.randn(4, 16, requires_grad=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = layer.train()(x)
        base_out = layer.base(x)
    assert out.dtype == base_out.dtype == torch.bfloat16
    out.float().sum().backward()
    assert layer.new_keys.grad.dtype == torch.float32
    torch.testing.assert_close(out.float(), layer(x).float(), rtol=0.05, atol=0.05)


def test_the_bank_is_plain_state_and_pickles():
    import pickle

    torch.manual_seed(0)
    layer = make_layer(5, 4, dtype=torch.float32, atoms_per_task=2, topk=2)
    grow(layer, 2)
    assert dict(layer.named_parameters()).keys() == {"base.weight", "base.bias", "new_keys", "new_values"}
    assert isinstance(layer.new_keys, nn.Parameter) and layer.new_keys.shape == (2, 5)
    assert layer.new_values.shape == (2, 4)  # one row per atom, as in the bank
    assert {"frozen_keys", "frozen_values"} <= dict(layer.named_buffers()).keys()
    assert (layer.frozen_keys.shape, layer.frozen_values.shape) == ((2, 5), (2, 4))
    # its own storage: nothing aliases the frozen rows
    assert layer.new_keys.data_ptr() != layer.frozen_keys.data_ptr()
    x = torch.randn(3, 5)
    twin = pickle.loads(pickle.dumps(layer))
    assert torch.equal(twin(x), layer(x)) and twin.num_frozen == 2
    trained = layer.new_keys.detach().clone()
    layer.freeze()  # the trained rows join the frozen ones
    assert layer.new_keys is None and layer.num_frozen == 4
    assert torch.equal(layer.frozen_keys[2:], trained)
    assert not any(p.requires_grad for p in layer.parameters())


def test_a_non_floating_input_is_a_type_error():
    layer = make_layer(3, 2, dtype=torch.float32, atoms_per_task=2)
    for _ in ("empty", "grown"):
        with pytest.raises(TypeError, match="expects a floating-point input.*torch.int64"):
            layer(torch.ones(4, 3, dtype=torch.long))
        with pytest.raises(TypeError, match="floating-point.*torch.bool"):
            layer(torch.ones(4, 3, dtype=torch.bool))
        layer.expand()


def test_bad_arguments_are_reported():
    with pytest.raises(TypeError, match="wraps an nn.Linear"):
        MoRAMLinear(nn.Conv1d(2, 2, 1))
    with pytest.raises(ValueError, match="temperature"):
        MoRAMLinear(nn.Linear(2, 2), temperature=0)
    with pytest.raises(ValueError, match="threshold"):
        MoRAMLinear(nn.Linear(2, 2), threshold=-0.1)
    with pytest.raises(ValueError, match="atoms_per_task"):
        MoRAMLinear(nn.Linear(2, 2), atoms_per_task=0)


def test_extra_repr_lists_the_configuration():
    layer = make_layer(8, 6, atoms_per_task=3, topk=5, temperature=0.01, threshold=0.2)
    grow(layer, 2)
    text = repr(layer)
    for part in ("in_features=8", "out_features=6", "atoms=3/6 (frozen/total)", "topk=5",
                 "temperature=0.01", "threshold=0.2"):
        assert part in text


def test_eval_gate_keeps_a_relevance_equal_to_the_threshold():
    # p = [3, 4], ||p|| = 5: s = [0.6, 0.8] exactly; delta = 0.6 keeps both (s >= delta).
    layer = tiny_layer([[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [0.0, 1.0]], topk=2,
                       temperature=1.0, threshold=0.6).eval()
    w1, w2 = softmax2(0.6, 0.8, 1.0)
    out = layer(torch.tensor([3.0, 4.0], dtype=torch.float64))
    assert out.tolist() == pytest.approx([w1 * 3, w2 * 4], rel=1e-12)


class DoubledLinear(nn.Linear):
    """An nn.Linear subclass with its own forward (as quantised linears have)."""

    def forward(self, x):
        return 2 * super().forward(x)


def test_a_linear_subclass_base_keeps_its_own_forward():
    torch.manual_seed(0)
    base = DoubledLinear(6, 4).double()
    layer = MoRAMLinear(base, atoms_per_task=3, topk=2, temperature=0.1, threshold=0.0)
    grow(layer, 2)
    x = torch.randn(5, 6, dtype=torch.float64, requires_grad=True)
    out = layer.train()(x)
    expected = naive_moram(x, 2 * base.weight, 2 * base.bias, [layer.keys], [layer.values],
                           topk=2, temperature=0.1, threshold=0.0, training=True)
    torch.testing.assert_close(out, expected)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu():
    torch.manual_seed(0)
    layer = make_layer(32, 16, dtype=torch.float32, atoms_per_task=8, topk=4)
    grow(layer, 2, value_std=0.1)
    x = torch.randn(3, 7, 32)
    expected = layer.eval()(x)
    layer.cuda()
    torch.testing.assert_close(layer(x.cuda()).cpu(), expected, rtol=1e-4, atol=1e-4)
    with torch.autocast("cuda", dtype=torch.float16):
        out = layer.train()(x.cuda().requires_grad_())
    out.float().sum().backward()
    assert out.dtype == torch.float16 and torch.isfinite(layer.new_keys.grad).all()


@pytest.mark.parametrize("train_base,train_keys,input_grad", [
    (True, True, True),     # base weight unfrozen too (e.g. fine-tuning with atoms)
    (False, False, False),  # values only, input without grad: the router backward is skipped
    (True, False, False),   # base and values only
])
def test_gradients_for_every_subset_of_trainable_tensors(train_base, train_keys, input_grad):
    torch.manual_seed(3)
    layer = make_layer(7, 5, atoms_per_task=3, topk=2, temperature=0.1)
    grow(layer, 2)
    layer.base.requires_grad_(train_base)
    layer.new_keys.requires_grad_(train_keys)
    x = torch.randn(4, 7, dtype=torch.float64, requires_grad=input_grad)
    out = layer.train()(x)
    weight = layer.base.weight.detach().clone().requires_grad_()
    bias = layer.base.bias.detach().clone().requires_grad_()
    keys = layer.keys[3:].clone().requires_grad_()
    values = layer.values[:, 3:].clone().requires_grad_()
    x_ref = x.detach().clone().requires_grad_()
    expected = naive_moram(x_ref, weight, bias, [layer.keys[:3], keys], [layer.values[:, :3], values],
                           topk=2, temperature=0.1, threshold=0.2, training=True)
    upstream = torch.randn_like(out)
    out.backward(upstream)
    expected.backward(upstream)
    torch.testing.assert_close(layer.new_values.grad.t(), values.grad)
    if train_base:
        torch.testing.assert_close(layer.base.weight.grad, weight.grad)
        torch.testing.assert_close(layer.base.bias.grad, bias.grad)
    assert (layer.new_keys.grad is not None) == train_keys
    if train_keys:
        torch.testing.assert_close(layer.new_keys.grad, keys.grad)
    if input_grad:
        torch.testing.assert_close(x.grad, x_ref.grad)


def test_new_value_scale_multiplies_only_the_trainable_values_and_their_gradient():
    torch.manual_seed(0)
    layer = make_layer(6, 5, atoms_per_task=3, topk=2, temperature=0.1, threshold=0.1)
    grow(layer, 2)
    layer.new_value_scale = 2.0
    x = torch.randn(7, 6, dtype=torch.float64)
    out = layer.train()(x)
    keys = layer.keys[3:].clone().requires_grad_()
    values = layer.values[:, 3:].clone().requires_grad_()
    expected = naive_moram(x, layer.base.weight, layer.base.bias, [layer.keys[:3], keys],
                           [layer.values[:, :3], 2.0 * values], topk=2, temperature=0.1,
                           threshold=0.1, training=True)
    torch.testing.assert_close(out, expected, rtol=1e-9, atol=1e-10)
    upstream = torch.randn_like(out)
    out.backward(upstream)
    expected.backward(upstream)
    torch.testing.assert_close(layer.new_values.grad.t(), values.grad, rtol=1e-8, atol=1e-10)
    torch.testing.assert_close(layer.new_keys.grad, keys.grad, rtol=1e-8, atol=1e-10)
    layer.freeze()  # frozen atoms are read unscaled
    unscaled = naive_moram(x, layer.base.weight, layer.base.bias, [layer.keys], [layer.values], topk=2,
                           temperature=0.1, threshold=0.1, training=True)
    torch.testing.assert_close(layer(x), unscaled, rtol=1e-9, atol=1e-10)


def test_reading_an_empty_bank_with_a_base_weight_is_the_base_alone():
    # MoRAMRouting.read's empty-bank branch (a NameError once hid there: F was never imported)
    torch.manual_seed(0)
    base = torch.nn.Linear(3, 2)
    layer = MoRAMLinear(base, atoms_per_task=2)
    x = torch.randn(4, 5, 3)
    expected = x @ base.weight.detach().T + base.bias.detach()  # W x + b by hand
    with torch.no_grad():
        torch.testing.assert_close(layer.read(x, base.weight, base.bias), expected)
        torch.testing.assert_close(layer.read(x, base.weight), x @ base.weight.detach().T)
        assert torch.equal(layer.read(x), torch.zeros(4, 5, 2))  # no base, no atoms: no term
