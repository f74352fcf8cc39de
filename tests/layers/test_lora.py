"""LoRALinear and inject_lora against hand-written expectations."""

import pytest
import torch
from torch import nn

from moram_avalanche.clip.inject import inject_lora
from moram_avalanche.layers.lora import LoRALinear


def _layer(rank=3, scale=0.5, mergeable=False):
    torch.manual_seed(0)
    layer = LoRALinear(nn.Linear(6, 5), rank=rank, scale=scale, mergeable=mergeable)
    with torch.no_grad():
        layer.up.normal_()
    return layer


def test_starts_equal_to_base():
    torch.manual_seed(0)
    base = nn.Linear(6, 5)
    x = torch.randn(4, 6)
    expected = base(x)
    layer = LoRALinear(base, rank=2)
    assert torch.equal(layer(x), expected)
    assert not base.weight.requires_grad and layer.down.requires_grad and layer.up.requires_grad


def test_forward_is_base_plus_scaled_product():
    layer = _layer()
    x = torch.randn(2, 7, 6)
    W, b, D, U = layer.base.weight, layer.base.bias, layer.down, layer.up
    expected = x @ W.t() + b + 0.5 * (x @ D.t()) @ U.t()
    torch.testing.assert_close(layer(x), expected)


def test_merge_keeps_the_function_and_zeroes_up():
    layer = _layer(mergeable=True)
    x = torch.randn(8, 6)
    before = layer(x).detach()
    weight_before = layer.base.weight.detach().clone()
    expected = 0.5 * layer.up.detach() @ layer.down.detach()
    delta = layer.merge()
    torch.testing.assert_close(delta, expected)
    assert torch.count_nonzero(layer.up) == 0
    torch.testing.assert_close(layer.base.weight, weight_before + delta)
    torch.testing.assert_close(layer(x), before, rtol=1e-5, atol=1e-5)


def test_only_a_mergeable_layer_merges_and_then_declares_its_base_weight():
    plain, mergeable = _layer(), _layer(mergeable=True)
    assert plain.state_keys == ("down", "up")
    assert mergeable.state_keys == ("down", "up", "base.weight")
    weight = plain.base.weight.detach().clone()
    with pytest.raises(RuntimeError, match="mergeable=True"):
        plain.merge()
    assert torch.equal(plain.base.weight, weight)  # refused before anything changed


def test_set_down_checks_shape_and_keeps_the_parameter():
    layer = _layer(rank=2)
    param = layer.down
    layer.set_down(torch.ones(2, 6))
    assert layer.down is param and torch.equal(layer.down, torch.ones(2, 6))
    with pytest.raises(ValueError, match=r"\(2, 6\)"):
        layer.set_down(torch.ones(3, 6))


def test_bad_arguments():
    with pytest.raises(TypeError):
        LoRALinear(nn.Conv1d(2, 2, 1), rank=2)
    with pytest.raises(ValueError, match="rank"):
        LoRALinear(nn.Linear(2, 2), rank=0)


def test_inject_lora_targets_k_and_v_only(tiny_clip):
    layers = inject_lora(tiny_clip, rank=2)
    assert layers and all(name.endswith(("attn.k_proj", "attn.v_proj")) for name in layers)
    blocks = len(tiny_clip.visual.transformer.resblocks) + len(tiny_clip.transformer.resblocks)
    assert len(layers) == 2 * blocks
    trainable = {n for n, p in tiny_clip.named_parameters() if p.requires_grad}
    assert trainable == {f"{name}.{f}" for name in layers for f in ("down", "up")}
    with pytest.raises(ValueError, match="once"):
        inject_lora(tiny_clip, rank=2)


def test_inject_lora_leaves_outputs_unchanged(tiny_clip, tokenizer):
    images = torch.randn(2, 3, 32, 32)
    text = tokenizer(["a cat", "a dog"])
    with torch.no_grad():
        before = tiny_clip.encode_image(images), tiny_clip.encode_text(text)
        inject_lora(tiny_clip, encoders=("visual",), rank=4)
        after = tiny_clip.encode_image(images), tiny_clip.encode_text(text)
    for a, b in zip(before, after):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
