"""The dropout on the atoms' input drawn again in the backward (layers/moram/dropped.py): the same
numbers as autograd through ``F.dropout``, bit for bit, without keeping the dropped tokens."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from moram_avalanche.layers.moram import dropped as dropped_module
from moram_avalanche.layers.moram.dropped import DropoutDraw, draw, replayable
from moram_avalanche.layers.moram.layer import MoRAMRouting
from moram_avalanche.layers.moram.paths import triton as moram_triton
from moram_avalanche.layers.moram.paths import use_path
from moram_avalanche.text.layer import DropoutBalancedMoRAMLinear, DropoutMoRAMLinear
from old_dropout import the_old_way

needs_interpreter = pytest.mark.skipif(not moram_triton.usable(torch.empty(0)),
                                       reason="Triton's interpreter is off (TRITON_INTERPRET=1 not set early)")
PATHS = ["reference", "dense", pytest.param("triton", marks=needs_interpreter)]
P = 0.3


def attention_layers(dtype=torch.float32, cls=DropoutMoRAMLinear, device="cpu", **kwargs):
    """q, k and v over one 24-wide input (as one attention reads it), each grown over three tasks
    (two frozen, the last trainable; values drawn so the atoms' term is not zero), in train mode."""
    torch.manual_seed(0)
    layers = [cls(nn.Linear(24, width), atoms_per_task=4, topk=3, temperature=0.1, threshold=0.2, dropout=P,
                  **kwargs) for width in (24, 12, 12)]
    for layer in layers:
        for _ in range(3):
            layer.expand()
            with torch.no_grad():
                layer.new_keys.normal_()
                layer.new_values.normal_()
        layer.to(device=device, dtype=dtype).train()
    return layers


def training_step(layers, x, autocast=False, wrap=None):
    """One forward and backward of the three layers on one input that other operations also read
    (``x * 1.5``: its gradient is the sum of six contributions, in the engine's order);
    ``(outputs, dL/dx, [(dL/dA_tail, dL/dB_tail)], the generator's state after)``."""
    torch.manual_seed(5)
    leaf = x.clone().requires_grad_()
    with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=autocast):
        shared = leaf * 1.5
        outs = wrap(layers, shared) if wrap else [layer(shared) for layer in layers]
        loss = sum((out.float() ** 2).sum() * (i + 1) for i, out in enumerate(outs))
    loss.backward()
    state = torch.get_rng_state() if x.device.type == "cpu" else torch.cuda.get_rng_state(x.device)
    return ([out.detach() for out in outs], leaf.grad,
            [(layer.new_keys.grad, layer.new_values.grad) for layer in layers], state)


def assert_identical(got, want):
    outs, grad, grads, state = got
    outs_w, grad_w, grads_w, state_w = want
    for a, b in zip(outs, outs_w):
        assert torch.equal(a, b)
    assert torch.equal(grad, grad_w)
    for (keys, values), (keys_w, values_w) in zip(grads, grads_w):
        assert torch.equal(keys, keys_w) and torch.equal(values, values_w)
    assert torch.equal(state, state_w)


def both_ways(monkeypatch, dtype=torch.float32, autocast=False, wrap=None, cls=DropoutMoRAMLinear, device="cpu"):
    torch.manual_seed(1)
    x = torch.randn(2, 7, 24, dtype=dtype, device=device)
    lean = training_step(attention_layers(dtype, cls, device), x, autocast, wrap)
    with monkeypatch.context() as patch:
        the_old_way(patch)
        plain = training_step(attention_layers(dtype, cls, device), x, autocast, wrap)
    return lean, plain


# ---------------------------------------------------------------- the draw
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64])
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_the_draw_is_f_dropouts_and_leaves_the_generator_where_f_dropout_does(dtype, layout):
    x = torch.randn(4, 16, 6, dtype=dtype)
    if layout == "transposed":
        x = x.transpose(1, 2)  # the composite's noise follows the input's layout
    torch.manual_seed(3)
    want, state = F.dropout(x, P, training=True), torch.get_rng_state()
    torch.manual_seed(3)
    got, mask = draw(x, P)
    assert torch.equal(got, want) and torch.equal(torch.get_rng_state(), state)
    assert torch.equal(got, x * mask)  # the composite's noise, already scaled


def test_a_draw_made_again_gives_the_same_tokens_and_mask_and_leaves_the_generator_alone(branch):
    x = torch.randn(5, 8, 24)
    torch.manual_seed(4)
    dropped, how, kept = DropoutDraw.of(x, P, torch.bfloat16)
    assert (kept is None) == (branch == "drawn again") and (how.state is None) == (branch == "noise kept")
    torch.manual_seed(9)
    before = torch.get_rng_state()
    again, mask = how.again(x, kept)
    assert torch.equal(again, dropped) and torch.equal(x * mask, dropped)
    assert torch.equal(torch.get_rng_state(), before)
    tokens = how.tokens(again)
    assert tokens.shape == (40, 24) and tokens.dtype == torch.bfloat16
    assert torch.equal(tokens, dropped.reshape(40, 24).to(torch.bfloat16))


@pytest.mark.parametrize("x, p, expected", [
    (torch.randn(3, 4), 0.1, True), (torch.randn(3, 4), 0.0, False), (torch.randn(0, 4), 0.1, False),
    (torch.randn(3, 4, device="meta"), 0.1, False)])
def test_replayable_says_where_a_draw_can_be_made_again(x, p, expected):
    assert replayable(x, p) is expected


# ---------------------------------------------------------------- the layer: the same numbers
@pytest.fixture(params=["noise kept", "drawn again"])
def branch(request, monkeypatch):
    """Both ways a backward makes the dropout again, on the CPU: from the kept noise (the CPU's
    way) and drawn again from the generator's state (CUDA's way)."""
    monkeypatch.setattr(dropped_module, "REDRAW_ON_CPU", request.param == "drawn again")
    return request.param


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dtype, autocast", [(torch.float32, False), (torch.bfloat16, False),
                                             (torch.float32, True)])
def test_the_lean_read_equals_autograd_through_f_dropout_bit_for_bit(monkeypatch, branch, path, dtype, autocast):
    with use_path(path):
        lean, plain = both_ways(monkeypatch, dtype, autocast)
    assert_identical(lean, plain)
    assert lean[1].abs().sum() > 0 and all(keys.abs().sum() > 0 for keys, _ in lean[2])


@pytest.mark.parametrize("reentrant", [False, True])
def test_under_gradient_checkpointing_the_numbers_are_the_same(monkeypatch, branch, reentrant):
    def wrap(layers, x):
        return [checkpoint(layer, x, use_reentrant=reentrant) for layer in layers]

    lean, plain = both_ways(monkeypatch, wrap=wrap)
    assert_identical(lean, plain)
    unchecked, _ = both_ways(monkeypatch)  # the checkpoint's recompute draws the forward's masks again
    if reentrant:  # (its own backward per layer sums dL/dx in another order: the same to rounding)
        torch.testing.assert_close(lean[1], unchecked[1], rtol=1e-5, atol=1e-4)
        lean = (lean[0], unchecked[1], *lean[2:])
    assert_identical(lean, unchecked)


def test_the_fused_kernels_draw_and_backward_match_autograds(monkeypatch):
    """CUDA's branch (``torch.native_dropout`` and its bool mask), run on the CPU: the backward's
    ``native_dropout_backward`` is what autograd computes for ``native_dropout``."""
    def fused(x, p):
        with torch.no_grad():
            return torch.native_dropout(x, p, True)

    monkeypatch.setattr(dropped_module, "draw", fused)
    monkeypatch.setattr(dropped_module, "REDRAW_ON_CPU", True)  # CUDA's way: drawn again from the state
    torch.manual_seed(1)
    x = torch.randn(2, 7, 24)
    lean = training_step(attention_layers(), x)
    with monkeypatch.context() as patch:
        patch.setattr(MoRAMRouting, "read_dropped",
                      lambda self, x, dropout: self.read(torch.native_dropout(x, dropout.p, True)[0]))
        plain = training_step(attention_layers(), x)
    assert_identical(lean, plain)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA only (the GPU check runs it)")
@pytest.mark.parametrize("path", ["dense", "triton"])
@pytest.mark.parametrize("dtype, autocast", [(torch.float32, False), (torch.bfloat16, False), (torch.float32, True)])
def test_on_cuda_the_lean_read_equals_autograd_through_f_dropout_bit_for_bit(monkeypatch, path, dtype, autocast):
    """CUDA's way for real: the fused kernel's draw, drawn again in the backward from the CUDA
    generator's state, the same numbers as autograd through ``F.dropout``."""
    if path == "triton" and not moram_triton.usable(torch.empty(0, device="cuda")):
        pytest.skip("Triton cannot run on this GPU")
    with use_path(path):
        lean, plain = both_ways(monkeypatch, dtype, autocast, device="cuda")
    assert_identical(lean, plain)


# ---------------------------------------------------------------- the layer: what the backward keeps
def packed_tensors(layers, x):
    """Every tensor the three layers' graph keeps for the backward (autograd's pack hook) but
    their weights and atoms."""
    packed = []

    def pack(tensor):
        packed.append(tensor)
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        for layer in layers:
            layer(x)
    own = {t.untyped_storage().data_ptr() for layer in layers for t in (*layer.parameters(), *layer.buffers())}
    return [t for t in packed if t.untyped_storage().data_ptr() not in own]


def test_the_backward_keeps_the_input_not_the_dropped_tokens_or_noise(monkeypatch, branch):
    x = torch.randn(2, 7, 24, requires_grad=True)
    x_kept = (x.untyped_storage().data_ptr(), x.shape, x.stride())
    wide = [t for t in packed_tensors(attention_layers(), x) if t.numel() >= x.numel()]
    noise = [t for t in wide if (t.untyped_storage().data_ptr(), t.shape, t.stride()) != x_kept]
    assert len(noise) == (3 if branch == "noise kept" else 0)
    for t in noise:  # the dropout's noise (0 or 1 / (1 - p)), never the dropped tokens
        assert t.shape == x.shape and t.unique().tolist() == [0.0, pytest.approx(1 / (1 - P))]
    wide = [t for t in wide if all(t is not n for n in noise)]
    assert len(wide) == 3 and {(t.untyped_storage().data_ptr(), t.shape, t.stride()) for t in wide} == {
        (x.untyped_storage().data_ptr(), x.shape, x.stride())}  # x itself, by each layer: one tensor
    with monkeypatch.context() as patch:
        the_old_way(patch)
        wide = [t for t in packed_tensors(attention_layers(), x) if t.numel() >= x.numel()]
    storages = {t.untyped_storage().data_ptr() for t in wide}
    assert len(storages) == 6  # autograd through F.dropout: each layer's dropped tokens and noise


# ---------------------------------------------------------------- the layer: where it keeps F.dropout's way
def never_drawn_again(monkeypatch):
    def refuse(*args):
        raise AssertionError("the lean read ran")
    monkeypatch.setattr(DropoutDraw, "of", staticmethod(refuse))


@pytest.mark.parametrize("case", ["hooked", "inplace", "identity", "no grad", "no atoms", "input without grad"])
def test_anywhere_else_it_is_the_read_of_the_dropped_input(monkeypatch, case):
    layer = attention_layers()[0]
    dropout = nn.Dropout(P, inplace=case == "inplace")
    if case == "identity":
        dropout = nn.Identity()
    calls = []
    if case == "hooked":
        dropout.register_forward_hook(lambda *args: calls.append(1))
    if case == "no atoms":
        layer = DropoutMoRAMLinear(nn.Linear(24, 24), dropout=P).train()
    never_drawn_again(monkeypatch)
    leaf = torch.randn(3, 24, requires_grad=case != "input without grad")  # (on the CPU autograd then keeps
    with torch.set_grad_enabled(case != "no grad"):                         # d alone: its own way is leaner)
        torch.manual_seed(2)
        got = layer.read_dropped(leaf * 1.0, dropout)
        torch.manual_seed(2)
        want = layer.read(dropout(leaf * 1.0))
    assert torch.equal(got, want)
    assert calls == ([1, 1] if case == "hooked" else [])


def test_an_input_without_grad_is_read_lean_where_the_dropout_is_drawn_again(monkeypatch):
    monkeypatch.setattr(dropped_module, "REDRAW_ON_CPU", True)
    layer, x = attention_layers()[0], torch.randn(3, 24)
    torch.manual_seed(2)
    got = layer.read_dropped(x, layer.atom_dropout)
    torch.manual_seed(2)
    want = layer.read(F.dropout(x, P, training=True))
    assert torch.equal(got, want) and type(got.grad_fn).__name__ == "MoRAMFunctionBackward"
    got.sum().backward()
    keys = layer.new_keys.grad.clone()
    layer.zero_grad()
    want.sum().backward()
    assert torch.equal(keys, layer.new_keys.grad)
    never_drawn_again(monkeypatch)
    with pytest.raises(AssertionError, match="the lean read ran"):
        layer.read_dropped(x, layer.atom_dropout)


def test_a_variant_with_its_own_mixture_keeps_autograd_through_the_dropout(monkeypatch):
    never_drawn_again(monkeypatch)
    lean, plain = both_ways(monkeypatch, cls=DropoutBalancedMoRAMLinear)
    assert_identical(lean, plain)


def test_an_eval_forward_has_no_dropout_and_a_replaced_dropout_module_is_called(monkeypatch):
    layer = attention_layers()[0]
    x = torch.randn(3, 24)
    never_drawn_again(monkeypatch)
    assert torch.equal(layer.eval()(x), MoRAMRouting.read(layer, x, layer.base.weight, layer.base.bias))
    layer.train().atom_dropout = nn.Dropout1d(P)  # not a plain nn.Dropout: called as it is
    torch.manual_seed(0)
    got = layer(x.unsqueeze(0))
    torch.manual_seed(0)
    want = layer.base(x.unsqueeze(0)) + layer.read(nn.Dropout1d(P)(x.unsqueeze(0)))
    assert torch.equal(got, want)


# ---------------------------------------------------------------- what the review asked (0.7.4)
def test_a_frozen_bank_still_passes_the_gradient_to_its_input(monkeypatch, branch):
    """Every atom frozen (the bank of an earlier layer while a later one trains): dL/dx through the
    atoms alone, as autograd through the dropout gives it."""
    def frozen(dtype, cls, device):
        layers = attention_layers(dtype, cls, device)
        for layer in layers:
            layer.freeze()
        return layers

    torch.manual_seed(1)
    x = torch.randn(2, 7, 24)
    results = []
    for old in (False, True):
        with monkeypatch.context() as patch:
            if old:
                the_old_way(patch)
            torch.manual_seed(5)
            leaf = x.clone().requires_grad_()
            layers = frozen(torch.float32, DropoutMoRAMLinear, "cpu")
            sum((layer(leaf * 1.5) ** 2).sum() for layer in layers).backward()
            results.append(leaf.grad)
    assert torch.equal(*results) and results[0].abs().sum() > 0


def test_recorded_statistics_are_the_same(monkeypatch):
    stats = []
    for old in (False, True):
        with monkeypatch.context() as patch:
            if old:
                the_old_way(patch)
            layer = attention_layers()[0]
            layer.start_recording()
            torch.manual_seed(5)
            layer(torch.randn(2, 7, 24, requires_grad=True)).sum().backward()
            stats.append((layer.atom_mass.clone(), layer.atom_hits.clone()))
    assert torch.equal(stats[0][0], stats[1][0]) and torch.equal(stats[0][1], stats[1][1])
    assert stats[0][1].sum() > 0


@pytest.mark.parametrize("case", ["inference input", "a view into a larger tensor", "not contiguous",
                                  "a forward of its own"])
def test_where_keeping_the_input_is_wrong_it_is_autograds_way(monkeypatch, branch, case):
    layer = attention_layers()[0]
    dropout = layer.atom_dropout
    calls = []
    if case == "a forward of its own":  # (as accelerate's add_hook_to_module sets it)
        def own(x, _forward=dropout.forward):
            calls.append(1)
            return _forward(x)
        dropout.forward = own
    never_drawn_again(monkeypatch)
    if case == "inference input":
        with torch.inference_mode():
            x = torch.randn(3, 24)
    elif case == "a view into a larger tensor":
        x = torch.randn(3, 48, requires_grad=True)[:, :24]
    else:
        x = torch.randn(24, 3, requires_grad=True).t()
    torch.manual_seed(2)
    got = layer.read_dropped(x, dropout)
    got.sum().backward()
    keys = layer.new_keys.grad.clone()
    layer.zero_grad()
    torch.manual_seed(2)
    want = layer.read(dropout(x))
    want.sum().backward()
    assert torch.equal(got, want) and torch.equal(keys, layer.new_keys.grad)
    assert calls == ([1, 1] if case == "a forward of its own" else [])


def test_an_input_given_back_in_another_layout_draws_the_same_mask(monkeypatch):
    """A saved-tensor hook may give ``x`` back as a copy of another layout (``save_on_cpu``'s pinned
    copy is contiguous whatever the original was): the draw made again is the forward's."""
    monkeypatch.setattr(dropped_module, "REDRAW_ON_CPU", True)

    def transposed_copy(tensor):
        return tensor.t().contiguous().t() if tensor.dim() == 2 else tensor

    torch.manual_seed(1)
    x = torch.randn(14, 24)
    results = []
    for hooked_layout in (False, True):
        layers = attention_layers()
        torch.manual_seed(5)
        leaf = x.clone().requires_grad_()
        with torch.autograd.graph.saved_tensors_hooks(transposed_copy if hooked_layout else (lambda t: t),
                                                      lambda t: t):
            outs = [layer(leaf * 1.5) for layer in layers]
        sum((out ** 2).sum() for out in outs).backward()
        results.append((leaf.grad, [layer.new_keys.grad for layer in layers]))
    assert torch.equal(results[0][0], results[1][0])
    assert all(torch.equal(a, b) for a, b in zip(results[0][1], results[1][1]))


def test_a_second_derivative_through_the_atoms_raises_instead_of_a_wrong_number():
    layer = attention_layers()[0]
    x = torch.randn(3, 24, requires_grad=True)
    (grad,) = torch.autograd.grad(layer(x).square().sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable|differentiate twice"):
        grad.sum().backward()
