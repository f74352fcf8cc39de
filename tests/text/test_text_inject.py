"""MoRAM on Hugging Face models without peft: targets, zero start, the naive reference, dropout."""

import pytest
import torch
from torch import nn

from tiny_text import batch, tiny_llama, tiny_t5


def linear_names(model):
    return {name for name, module in model.named_modules() if isinstance(module, nn.Linear)}


def test_t5_targets_are_query_and_key_of_every_attention_and_nothing_else():
    from moram_avalanche.layers.moram.layer import MoRAMLinear
    from moram_avalanche.text import inject_moram

    model = tiny_t5()
    before = linear_names(model)
    layers = inject_moram(model)
    expected = {name for name in before if name.rpartition(".")[2] in ("q", "k")}
    assert set(layers) == expected
    # self-attention of encoder and decoder, and the decoder's cross-attention (2 layers each)
    assert sum(".SelfAttention." in n for n in expected) == 8
    assert sum(".EncDecAttention." in n for n in expected) == 4
    wrapped = {name for name, module in model.named_modules() if isinstance(module, MoRAMLinear)}
    assert wrapped == expected
    assert all(not p.requires_grad for p in model.parameters())  # frozen, no atoms yet


def test_self_attention_only_leaves_cross_attention_out():
    from moram_avalanche.text import inject_moram

    layers = inject_moram(tiny_t5(), self_attention_only=True)
    assert len(layers) == 8 and not any("EncDecAttention" in name for name in layers)


def test_llama_targets_q_proj_and_k_proj():
    from moram_avalanche.text import inject_moram

    model = tiny_llama()
    layers = inject_moram(model)
    assert sorted(layers) == sorted(f"model.layers.{i}.self_attn.{p}" for i in range(2)
                                    for p in ("q_proj", "k_proj"))


def test_unknown_targets_and_architectures_are_named():
    from moram_avalanche.text import inject_moram, target_modules

    model = tiny_t5()
    with pytest.raises(ValueError, match=r"match no nn.Linear.*unmatched: \['query'\]"):
        inject_moram(model, ["q", "query"])
    assert not any("atom" in key for key in model.state_dict())  # untouched
    with pytest.raises(ValueError, match="no MoRAM target modules known for model_type 'gpt2'.*target_modules"):
        target_modules("gpt2")
    with pytest.raises(ValueError, match="dropout must be"):
        inject_moram(model, dropout=1.0)
    inject_moram(model)
    with pytest.raises(ValueError, match="already holds MoRAM layers"):
        inject_moram(model)


def test_model_is_unchanged_until_it_trains():
    from moram_avalanche.text import add_task, inject_moram

    model, (x, y) = tiny_t5(), batch()
    with torch.no_grad():
        reference = model(input_ids=x, labels=y).logits
        inject_moram(model)
        assert torch.equal(model(input_ids=x, labels=y).logits, reference)  # no atoms: the base itself
        assert add_task(model) == 8
        grown = model(input_ids=x, labels=y).logits  # atoms with values zero
    torch.testing.assert_close(grown, reference, rtol=0, atol=1e-5)


def capture_input(layer):
    seen = {}
    handle = layer.register_forward_hook(lambda module, args, out: seen.update(x=args[0], y=out))
    return seen, handle


def test_layer_inside_the_model_equals_the_naive_reference():
    from moram_avalanche.layers.moram.naive import naive_moram
    from moram_avalanche.text import add_task, inject_moram

    model, (x, _) = tiny_llama(), batch()
    layers = inject_moram(model, atoms_per_task=4, topk=2, temperature=0.5, threshold=0.1)
    add_task(model)
    model.train()
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=1.0)
    for _ in range(2):  # values move away from zero
        model(input_ids=x, labels=x).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    add_task(model)  # two tasks: 4 frozen + 4 trainable atoms
    layer = layers["model.layers.1.self_attn.q_proj"]
    assert layer.num_atoms == 8 and layer.values[:, :4].abs().sum() > 0
    for training in (False, True):
        model.train(training)
        layer.atom_dropout.p = 0.0  # the reference has no dropout
        seen, handle = capture_input(layer)
        with torch.no_grad():
            model(input_ids=x)
        handle.remove()
        flat = seen["x"].reshape(-1, layer.in_features)
        expected = naive_moram(flat, layer.base.weight, layer.base.bias, [layer.keys], [layer.values],
                               topk=2, temperature=0.5, threshold=0.1, training=training)
        torch.testing.assert_close(seen["y"].reshape(flat.shape[0], -1), expected, rtol=1e-5, atol=1e-5)


def test_dropout_reaches_the_atoms_only():
    from moram_avalanche.layers.moram.layer import MoRAMLinear
    from moram_avalanche.text import DropoutMoRAMLinear

    torch.manual_seed(0)
    base = nn.Linear(6, 5)
    layer = DropoutMoRAMLinear(base, atoms_per_task=4, topk=2, dropout=0.5)
    layer.expand()
    x = torch.randn(3, 6)
    layer.train()
    # values zero: only the atoms see the dropped input, so the output is the clean W x + b
    torch.testing.assert_close(layer(x), base(x), rtol=0, atol=1e-6)
    plain = MoRAMLinear(nn.Linear(6, 5), atoms_per_task=4, topk=2)
    plain.load_state_dict(layer.state_dict())
    with torch.no_grad():
        layer.eval(), plain.eval()
        assert torch.equal(layer(x), plain(x))  # eval: exactly MoRAMLinear
    assert "dropout=0.5" in repr(layer)


def test_dropout_layer_equals_the_moram_layer_on_the_dropped_input_with_the_base_on_the_clean():
    """Training with dropout: y = MoRAMLinear(d) - base(d) + base(x) (d = dropout(x), the same mask),
    outputs and gradients; computed with one base product."""
    import torch.nn.functional as F

    from moram_avalanche.layers.moram.layer import MoRAMLinear
    from moram_avalanche.text import DropoutMoRAMLinear

    torch.manual_seed(0)
    layer = DropoutMoRAMLinear(nn.Linear(6, 5), atoms_per_task=4, topk=2, dropout=0.3)
    layer.expand()
    layer.freeze()
    layer.expand()
    with torch.no_grad():
        layer.frozen_values.normal_()
        layer.new_values.normal_()
    plain = MoRAMLinear(nn.Linear(6, 5), **layer.options)  # the same top-k, temperature, threshold
    plain.expand(), plain.freeze(), plain.expand()
    plain.load_state_dict(layer.state_dict())
    layer.train(), plain.train()
    x = torch.randn(2, 3, 6, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_(True)
    torch.manual_seed(7)
    y = layer(x)
    torch.manual_seed(7)
    d = F.dropout(x_ref, 0.3, training=True)
    expected = plain(d) - plain.base(d) + plain.base(x_ref)
    torch.testing.assert_close(y, expected, rtol=1e-5, atol=1e-5)
    y.square().sum().backward()
    expected.square().sum().backward()
    torch.testing.assert_close(x.grad, x_ref.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(layer.new_keys.grad, plain.new_keys.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(layer.new_values.grad, plain.new_values.grad, rtol=1e-5, atol=1e-5)
