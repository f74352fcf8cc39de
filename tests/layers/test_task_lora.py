"""TaskLoRALinear: zero start, one LoRA per task, older ones frozen, any-size state loads."""

import pytest
import torch
from torch import nn

from moram_avalanche.layers.base import adapter_state_dict, load_adapter_state_dict
from moram_avalanche.layers.task_lora import TaskLoRALinear


def test_grows_frozen_and_starts_at_the_base():
    torch.manual_seed(0)
    base = nn.Linear(6, 5)
    layer = TaskLoRALinear(base, rank=2)
    x = torch.randn(3, 6)
    assert torch.equal(layer(x), base(x))
    assert layer.expand() == 1 and layer.downs[0].requires_grad
    assert torch.equal(layer(x), base(x))  # U starts at zero
    with torch.no_grad():
        layer.ups[0].fill_(0.5)
    assert layer.expand() == 2
    assert not layer.downs[0].requires_grad and not layer.ups[0].requires_grad and layer.ups[1].requires_grad
    assert [tuple(d.shape) for d in layer.old_downs()] == [(2, 6)]
    expected = base(x) + 0.5 * (x @ layer.downs[0].t()).sum(dim=1, keepdim=True).expand(3, 5)
    assert torch.allclose(layer(x), expected, atol=1e-6)
    layer.freeze()
    assert not any(p.requires_grad for p in layer.parameters())
    assert len(layer.old_downs()) == 2


def test_a_checkpoint_of_two_tasks_loads_into_a_fresh_layer():
    torch.manual_seed(0)
    model = nn.Sequential(TaskLoRALinear(nn.Linear(4, 3), rank=2))
    model[0].expand()
    model[0].expand()
    with torch.no_grad():
        for up in model[0].ups:
            up.normal_()
    state = adapter_state_dict(model)
    assert sorted(state) == ["0.downs.0", "0.downs.1", "0.ups.0", "0.ups.1"]
    fresh = nn.Sequential(TaskLoRALinear(nn.Linear(4, 3), rank=2))
    fresh[0].base.load_state_dict(model[0].base.state_dict())
    load_adapter_state_dict(fresh, state)
    x = torch.randn(2, 4)
    assert fresh[0].num_tasks == 2 and torch.equal(fresh(x), model(x))
    assert not any(p.requires_grad for p in [*fresh[0].downs, *fresh[0].ups])


def test_rank_is_checked():
    with pytest.raises(ValueError, match="rank"):
        TaskLoRALinear(nn.Linear(2, 2), rank=0)
