"""MoE adapters in open_clip's blocks: gating, noise, placement, bypass, counts, freezing."""

import copy

import pytest
import torch

from moram_avalanche.clip.inject import residual_blocks
from moram_avalanche.clip.moe_adapters import (
    Expert,
    MoEAdapterMixture,
    add_router,
    inject_moe_adapters,
    moe_mixtures,
    num_routers,
    routing,
)


pytestmark = pytest.mark.usefixtures("one_thread")


def naive_top2(x0, weight):
    """Gates by hand: the two largest logits, softmax over them, zeros elsewhere."""
    logits = (x0 @ weight).tolist()
    gates = torch.zeros(len(logits), weight.shape[1], dtype=torch.float64)
    for row, values in enumerate(logits):
        order = sorted(range(len(values)), key=lambda e: -values[e])[:2]
        a, b = values[order[0]], values[order[1]]
        ea, eb = 1.0, torch.exp(torch.tensor(b - a, dtype=torch.float64)).item()
        gates[row, order[0]], gates[row, order[1]] = ea / (ea + eb), eb / (ea + eb)
    return gates


def mixture_with_router(width=8, experts=5, seed=0, noise=0.0):
    torch.manual_seed(seed)
    mixture = MoEAdapterMixture(width, experts=experts, bottleneck=4, topk=2, dropout=0.0)
    mixture.add_router()
    with torch.no_grad():
        mixture.gates[0].normal_()
        mixture.noises[0].fill_(noise)
        for expert in mixture.experts:
            expert.up.weight.normal_()
    return mixture


def test_expert_init_and_scale():
    torch.manual_seed(0)
    expert = Expert(6, bottleneck=3, dropout=0.0, scale=0.1)
    assert torch.count_nonzero(expert.up.weight) == 0 and torch.count_nonzero(expert.up.bias) == 0
    assert torch.count_nonzero(expert.down.bias) == 0 and torch.count_nonzero(expert.down.weight) > 0
    bound = 1 / 6 ** 0.5  # kaiming_uniform(a=sqrt(5)) on fan_in 6
    assert expert.down.weight.abs().max() <= bound
    with torch.no_grad():
        expert.up.weight.normal_()
        expert.up.bias.normal_()
    x = torch.randn(2, 6)
    by_hand = 0.1 * (torch.relu(x @ expert.down.weight.t() + expert.down.bias) @ expert.up.weight.t()
                     + expert.up.bias)
    assert torch.allclose(expert(x), by_hand, atol=1e-6)


def test_router_keeps_the_top2_of_the_gate_logits_and_normalises_them():
    mixture = mixture_with_router().eval()
    x0 = torch.randn(7, 8)
    gates = mixture.gates_for(x0, 0)
    assert ((gates != 0).sum(dim=1) == 2).all()
    assert torch.allclose(gates.sum(dim=1), torch.ones(7))
    assert torch.allclose(gates.double(), naive_top2(x0, mixture.gates[0].detach()), atol=1e-6)


def test_noise_only_in_training():
    mixture = mixture_with_router(noise=2.0)
    x0 = torch.randn(16, 8)
    expected = naive_top2(x0, mixture.gates[0].detach())
    mixture.eval()
    torch.manual_seed(1)
    first = mixture.gates_for(x0, 0)
    torch.manual_seed(2)
    assert torch.equal(mixture.gates_for(x0, 0), first)
    assert torch.allclose(first.double(), expected, atol=1e-6)
    mixture.train()
    torch.manual_seed(1)
    noisy = mixture.gates_for(x0, 0)
    assert not torch.allclose(noisy.double(), expected, atol=1e-3)
    assert ((noisy != 0).sum(dim=1) == 2).all()


def test_zero_routers_start_with_random_training_choices_and_learn_the_noise():
    mixture = MoEAdapterMixture(8, experts=5, bottleneck=4).train()
    mixture.add_router()
    x = torch.randn(4, 3, 8)
    with torch.no_grad():  # non-zero experts, so the gates matter
        for expert in mixture.experts:
            expert.up.weight.normal_()
    mixture(x, 0).pow(2).sum().backward()
    assert mixture.gates[0].grad is not None and mixture.noises[0].grad.abs().sum() > 0


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
    root = tiny_clip.visual if encoder == "visual" else tiny_clip.transformer
    name, block = residual_blocks(root)[1]
    mixture = block.ls_2.moe
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
    expected = len(residual_blocks(tiny_clip.visual)) + len(residual_blocks(tiny_clip.transformer))
    assert len(mixtures) == expected == 4
    assert not any(p.requires_grad for p in clip_params)
    assert num_routers(tiny_clip) == 0 and add_router(tiny_clip) == 0 and add_router(tiny_clip) == 1
    assert all(m.num_routers == 2 for m in moe_mixtures(tiny_clip).values())
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
