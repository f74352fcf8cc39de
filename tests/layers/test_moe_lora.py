"""MoELoRALinear: router, mixture output, growth and freezing, state dict into a fresh model."""

import pytest
import torch
from torch import nn

from moram_avalanche.clip.inject import inject_moe_lora
from moram_avalanche.layers.base import find_layers
from moram_avalanche.layers.moe_lora import MoELoRALinear


def grown(d_in=5, d_out=4, rank=2, experts=3, temperature=1.0, seed=0):
    """A float64 layer with ``experts`` experts, the last trainable, all non-trivial."""
    torch.manual_seed(seed)
    layer = MoELoRALinear(nn.Linear(d_in, d_out).double(), rank=rank, temperature=temperature)
    for _ in range(experts):
        layer.expand()
        with torch.no_grad():
            layer.new_up.normal_()
            layer.new_router.normal_()
    return layer


def test_output_is_the_gated_sum_of_experts():
    layer = grown(temperature=0.7)
    x = torch.randn(2, 3, 5, dtype=torch.float64)
    rows = []
    for token in x.reshape(-1, 5):
        logits = layer.router_weight @ token / 0.7
        gates = logits.exp() / logits.exp().sum()
        delta = sum(gates[e] * layer.up[e] @ (layer.down[e] @ token) for e in range(3))
        rows.append(layer.base.weight @ token + layer.base.bias + delta)
    torch.testing.assert_close(layer(x), torch.stack(rows).reshape(2, 3, 4))


def test_router_softmax_sums_to_one_and_temperature_sharpens():
    x = torch.randn(16, 5, dtype=torch.float64)
    soft, sharp = grown(temperature=1.0), grown(temperature=0.25)
    assert torch.equal(soft.router_weight, sharp.router_weight)
    for layer in (soft, sharp):
        torch.testing.assert_close(layer.gates(x).sum(-1), torch.ones(16, dtype=torch.float64))
    assert bool((sharp.gates(x).max(-1).values > soft.gates(x).max(-1).values).all())
    torch.testing.assert_close(sharp.gates(x), torch.softmax(x @ soft.router_weight.t() * 4, -1))


def test_expand_adds_a_zero_expert_with_a_zero_router_row():
    layer = grown(experts=2)
    x = torch.randn(6, 5, dtype=torch.float64)
    before = layer(x)
    layer.expand()
    assert layer.num_experts == 3 and layer.num_frozen == 2
    assert not layer.new_up.any() and not layer.new_router.any()
    # the new expert adds nothing, but takes its share of the softmax from the old ones
    old_gates = torch.softmax(x @ layer.router_weight[:2].t(), -1)
    new_gates = layer.gates(x)
    torch.testing.assert_close(new_gates[:, :2] / new_gates[:, :2].sum(-1, keepdim=True), old_gates)
    assert not torch.allclose(layer(x), before)
    trainable = [n for n, p in layer.named_parameters() if p.requires_grad]
    assert trainable == ["new_down", "new_up", "new_router"]


def test_old_experts_and_router_rows_stay_bit_identical_while_the_new_one_trains():
    layer = grown(experts=2)
    layer.expand()
    frozen = (layer.down[:2].clone(), layer.up[:2].clone(), layer.router_weight[:2].clone())
    new = (layer.new_down.detach().clone(), layer.new_up.detach().clone())
    optimizer = torch.optim.SGD([p for p in layer.parameters() if p.requires_grad], lr=0.1)
    x = torch.randn(8, 5, dtype=torch.float64)
    for _ in range(3):
        optimizer.zero_grad()
        layer(x).square().sum().backward()
        optimizer.step()
    assert torch.equal(layer.down[:2], frozen[0]) and torch.equal(layer.up[:2], frozen[1])
    assert torch.equal(layer.router_weight[:2], frozen[2])
    assert not torch.equal(layer.new_down.detach(), new[0])
    assert not torch.equal(layer.new_up.detach(), new[1])
    assert layer.new_router.detach().abs().sum() > 0


@pytest.mark.parametrize("frozen_last", [False, True])
def test_state_dict_round_trip_into_a_fresh_layer(frozen_last):
    layer = grown(experts=3)
    if frozen_last:
        layer.freeze()
    state = layer.state_dict()
    assert state["expert_down"].shape == (3, 2, 5) and state["expert_up"].shape == (3, 4, 2)
    assert state["router_weight"].shape == (3, 5)
    assert int(state["num_frozen"]) == (3 if frozen_last else 2)
    fresh = MoELoRALinear(nn.Linear(5, 4).double(), rank=2)
    fresh.load_state_dict(state)
    assert fresh.num_experts == 3 and fresh.num_frozen == int(state["num_frozen"])
    x = torch.randn(4, 5, dtype=torch.float64)
    assert torch.equal(fresh(x), layer(x))
    # a second load into the same layout updates the trainable expert in place
    if not frozen_last:
        param = fresh.new_down
        fresh.load_state_dict(grown(experts=3, seed=1).state_dict())
        assert fresh.new_down is param


def test_bad_input_is_reported():
    with pytest.raises(TypeError, match="nn.Linear"):
        MoELoRALinear(nn.Conv1d(2, 2, 1))
    with pytest.raises(ValueError, match="rank"):
        MoELoRALinear(nn.Linear(2, 2), rank=0)
    with pytest.raises(ValueError, match="temperature"):
        MoELoRALinear(nn.Linear(2, 2), temperature=0)
    layer = grown(experts=2)
    with pytest.raises(ValueError, match="rank 2"):
        layer.load_experts(torch.zeros(2, 3, 5), torch.zeros(2, 4, 3), torch.zeros(2, 5), 2)
    with pytest.raises(ValueError, match="num_frozen"):
        layer.load_experts(torch.zeros(3, 2, 5), torch.zeros(3, 4, 2), torch.zeros(3, 5), 0)


def test_injected_model_round_trips_into_a_freshly_injected_model(tiny_clip):
    import copy

    blank = copy.deepcopy(tiny_clip)
    layers = inject_moe_lora(tiny_clip, rank=2)
    assert len(layers) == 2 * 2 * 6  # 2 encoders x 2 blocks x q/k/v/out/fc/proj
    assert not any(p.requires_grad for p in tiny_clip.parameters())
    for _ in range(2):
        for layer in layers.values():
            layer.expand()
            with torch.no_grad():
                layer.new_up.normal_(std=0.1)
                layer.new_router.normal_()
    inject_moe_lora(blank, rank=2)
    blank.load_state_dict(tiny_clip.state_dict())
    assert all(layer.num_experts == 2 for layer in find_layers(blank, MoELoRALinear).values())
    images = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        assert torch.equal(blank.encode_image(images), tiny_clip.encode_image(images))
