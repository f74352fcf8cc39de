"""MoE adapters in open_clip's blocks: placement beside the MLP, bypass, counts, freezing."""

import copy

import pytest
import torch

from moram_avalanche.clip.block_taps import block_mixture, inject_moe_adapters
from moram_avalanche.clip.towers import blocks
from moram_avalanche.layers.base import find_layers
from moram_avalanche.layers.moe_adapter import MoEAdapterMixture, add_router, num_routers, routing
from naive_gates import naive_top2

pytestmark = pytest.mark.usefixtures("one_thread")


def block_by_hand(block, mixture, x):
    """x + Attn(LN1(x)), then + MLP(LN2(.)) + sum_e g_e E_e(.) on the pre-LN2 stream."""
    y = x + block.attention(block.ln_1(x))
    gates = naive_top2(y[:, 0].double(), mixture.gates[0].detach().double()).float()
    moe = torch.zeros_like(y)
    for e, expert in enumerate(mixture.experts):
        moe += gates[:, e, None, None] * 0.1 * (
            torch.relu(y @ expert.down.weight.t() + expert.down.bias) @ expert.up.weight.t()
            + expert.up.bias)
    return y + block.mlp(block.ln_2.base(y)) + moe


def injected(tiny_clip, **kwargs):
    mixtures = inject_moe_adapters(tiny_clip, experts=4, bottleneck=8, **kwargs)
    add_router(tiny_clip)
    torch.manual_seed(3)
    with torch.no_grad():
        for m in mixtures.values():
            m.gates[0].normal_()
            for expert in m.experts:
                expert.up.weight.normal_(std=0.5)
                expert.up.bias.normal_(std=0.1)
    return mixtures


@pytest.mark.parametrize("encoder", ["visual", "text"])
def test_adapter_output_sits_beside_the_mlp_on_the_pre_ln2_stream(tiny_clip, encoder):
    mixtures = injected(tiny_clip)
    block = blocks(tiny_clip, encoder)[1].module
    mixture = block_mixture(block)
    assert mixture in mixtures.values()
    x = torch.randn(3, 5, mixture.width)
    with torch.no_grad():
        plain = block(x)
        with routing(tiny_clip, 0):
            routed = block(x)
        expected = block_by_hand(block, mixture, x)
    assert torch.allclose(routed, expected, atol=1e-5)
    assert not torch.allclose(routed, plain, atol=1e-3)


def test_bypass_is_plain_clip_exactly_and_routes_are_per_sample(tiny_clip, tokenizer):
    # frozen like the injected model: torch's attention takes another (fused) path then
    plain_model = copy.deepcopy(tiny_clip).requires_grad_(False)
    injected(tiny_clip)
    images, text = torch.randn(4, 3, 32, 32), tokenizer(["a cat.", "a red dog."])
    with torch.no_grad():
        plain_image, plain_text = plain_model.encode_image(images), plain_model.encode_text(text)
        for route in (None, -1, torch.tensor([-1, -1, -1, -1])):
            with routing(tiny_clip, route):
                assert torch.equal(tiny_clip.encode_image(images), plain_image)
        assert torch.equal(tiny_clip.encode_text(text), plain_text)  # no route set: bypass
        with routing(tiny_clip, 0):
            all_routed = tiny_clip.encode_image(images)
        with routing(tiny_clip, torch.tensor([0, -1, 0, -1])):
            mixed = tiny_clip.encode_image(images)
    assert not torch.allclose(all_routed, plain_image, atol=1e-3)
    assert torch.equal(mixed[[1, 3]], plain_image[[1, 3]])
    assert torch.allclose(mixed[[0, 2]], all_routed[[0, 2]], atol=1e-5)


def test_injection_covers_every_block_of_both_encoders_and_freezes_clip(tiny_clip):
    clip_params = list(tiny_clip.parameters())
    mixtures = inject_moe_adapters(tiny_clip, experts=4, bottleneck=8)
    expected = len(blocks(tiny_clip, "visual")) + len(blocks(tiny_clip, "text"))
    assert len(mixtures) == expected == 4
    assert not any(p.requires_grad for p in clip_params)
    assert num_routers(tiny_clip) == 0 and add_router(tiny_clip) == 0 and add_router(tiny_clip) == 1
    assert all(m.num_routers == 2 for m in find_layers(tiny_clip, MoEAdapterMixture).values())
    with pytest.raises(ValueError, match="once per model"):
        inject_moe_adapters(tiny_clip)
    with pytest.raises(IndexError, match="does not exist"):
        with routing(tiny_clip, 5):
            tiny_clip.encode_image(torch.randn(1, 3, 32, 32))


def test_counts_every_training_forward_text_included_and_freezes_the_most_used(tiny_clip, tokenizer):
    mixtures = injected(tiny_clip)
    tiny_clip.train()
    with routing(tiny_clip, 0):
        tiny_clip.encode_image(torch.randn(3, 3, 32, 32))
        tiny_clip.encode_text(tokenizer(["a", "b", "c", "d", "e"]))
    for name, m in mixtures.items():
        assert int(m.counts.sum()) == 2 * (5 if name.startswith("transformer") else 3)
    tiny_clip.eval()
    with routing(tiny_clip, 0):
        tiny_clip.encode_image(torch.randn(3, 3, 32, 32))
    assert int(sum(m.counts.sum() for m in mixtures.values())) == 2 * 2 * (5 + 3)  # eval: not counted

    m = next(iter(mixtures.values()))
    m.counts.copy_(torch.tensor([5, 0, 9, 2]))
    assert sorted(m.freeze_most_used(2).tolist()) == [0, 2]
    m.set_trainable(0)
    assert [e.down.weight.requires_grad for e in m.experts] == [False, True, False, True]
    m.counts.copy_(torch.tensor([0, 0, 1, 0]))  # cumulative; unused experts are not frozen
    assert m.freeze_most_used(2).tolist() == [2]
    assert m.frozen.tolist() == [True, False, True, False]
    add_router(tiny_clip)
    m.set_trainable(1)
    assert not m.gates[0].requires_grad and m.gates[1].requires_grad and m.noises[1].requires_grad
