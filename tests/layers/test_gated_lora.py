"""GatedLoRALinear: the gated update against a dense computation, merge, restart, declared state."""

import torch
from torch import nn

from moram_avalanche.layers.base import adapter_state_dict
from moram_avalanche.layers.gated_lora import GatedLoRALinear


def test_forward_is_base_plus_the_gated_low_rank_update_and_merge_keeps_the_function():
    torch.manual_seed(0)
    base = nn.Linear(6, 5)
    layer = GatedLoRALinear(base, rank=3)
    assert torch.equal(layer.up, torch.zeros(5, 3))
    with torch.no_grad():
        layer.up.normal_()
        layer.gate.copy_(torch.tensor([0.5, 0.0, -2.0]))
    x = torch.randn(4, 6)
    dense = sum(layer.gate[i] * torch.outer(layer.up[:, i], layer.down[i]) for i in range(3))
    expected = x @ (base.weight + dense).t() + base.bias
    assert torch.allclose(layer(x), expected, atol=1e-5)
    assert layer.active_rank == 2
    before = layer(x)
    layer.merge()
    assert torch.equal(layer.up, torch.zeros(5, 3))
    assert torch.allclose(layer(x), before, atol=1e-5)
    layer.restart()
    assert torch.allclose(layer(x), before, atol=1e-5)  # fresh factors add nothing (U = 0)
    assert layer.active_rank == 3


def test_declared_state_holds_the_factors_and_the_merged_weight():
    model = nn.Sequential(GatedLoRALinear(nn.Linear(4, 4), rank=2))
    assert sorted(adapter_state_dict(model)) == ["0.base.weight", "0.down", "0.gate", "0.up"]
    assert not model[0].base.weight.requires_grad and model[0].gate.requires_grad
