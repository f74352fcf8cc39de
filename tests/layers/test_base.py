"""The adapter-layer protocol: declared state, the one finder, the one checkpoint filter."""

import pytest
import torch
from torch import nn

from moram_avalanche.layers.base import (
    AdapterLayer,
    GrowingAdapter,
    adapter_state_dict,
    find_layers,
    load_adapter_state_dict,
)
from moram_avalanche.layers.lora import LoRALinear
from moram_avalanche.layers.moe_adapter import MoEAdapterMixture
from moram_avalanche.layers.moe_lora import MoELoRALinear
from moram_avalanche.layers.moram.layer import MoRAMLinear
from moram_avalanche.layers.moram.variants import MoRAMAblationLinear


class Toy(nn.Module):
    """A frozen stem with one adapter of every kind (and a frozen linear that is none)."""

    def __init__(self, seed=0):
        super().__init__()
        torch.manual_seed(seed)
        self.moram = MoRAMLinear(nn.Linear(4, 4), atoms_per_task=2)
        self.router = MoRAMAblationLinear(nn.Linear(4, 4), atoms_per_task=2, router=True)
        self.blocks = nn.ModuleList([nn.Sequential(LoRALinear(nn.Linear(4, 4), rank=2, mergeable=True)),
                                     nn.Sequential(LoRALinear(nn.Linear(4, 4), rank=2))])
        self.moe_lora = MoELoRALinear(nn.Linear(4, 4), rank=2)
        self.moe = MoEAdapterMixture(4, experts=3, bottleneck=2)
        self.plain = nn.Linear(4, 4)

    def grow(self, times):
        for _ in range(times):
            for layer in find_layers(self, GrowingAdapter).values():
                layer.expand()


def test_find_layers_lists_each_adapter_once_by_dotted_name_and_kind():
    toy = Toy()
    assert list(find_layers(toy)) == ["moram", "router", "blocks.0.0", "blocks.1.0", "moe_lora", "moe"]
    assert list(find_layers(toy, MoRAMLinear)) == ["moram", "router"]  # the variant is a MoRAMLinear
    assert list(find_layers(toy, LoRALinear)) == ["blocks.0.0", "blocks.1.0"]
    assert list(find_layers(toy, GrowingAdapter)) == ["moram", "router", "moe_lora", "moe"]
    toy.alias = toy.moram  # a module registered twice is still one layer
    assert list(find_layers(toy, MoRAMLinear)) == ["moram", "router"]


def test_declared_keys_cover_their_subtrees_only():
    moe = MoEAdapterMixture(4, experts=2, bottleneck=2)
    assert moe.declares("gates") and moe.declares("gates.3") and moe.declares("experts.1.up.weight")
    assert not moe.declares("gatesx") and not moe.declares("width")
    assert AdapterLayer().state_keys == () and not AdapterLayer().declares("anything")


def test_adapter_state_is_exactly_the_declared_entries():
    toy = Toy()
    toy.grow(2)
    state = adapter_state_dict(toy)
    expected = {f"{layer}.{key}" for layer in ("moram", "router")
                for key in ("atom_keys", "atom_values", "num_frozen", "atom_task")}
    expected |= {"router.router_weight"}
    expected |= {"blocks.0.0.down", "blocks.0.0.up", "blocks.0.0.base.weight"}  # mergeable LoRA
    expected |= {"blocks.1.0.down", "blocks.1.0.up"}  # plain LoRA: its base never changes
    expected |= {f"moe_lora.{key}" for key in ("expert_down", "expert_up", "router_weight", "num_frozen")}
    expected |= {k for k in toy.state_dict() if k.startswith("moe.")}  # the whole mixture is learned
    assert set(state) == expected
    assert not any(k.startswith("plain.") or k.endswith(".base.bias") for k in state)
    assert state["router.router_weight"].shape == (4, 4)
    assert {"moe.gates.0", "moe.gates.1"} <= set(state)


def test_state_loads_into_a_fresh_model_of_any_size_and_computes_the_same():
    toy = Toy(seed=0)
    toy.grow(3)
    with torch.no_grad():
        for p in toy.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    state = adapter_state_dict(toy)
    fresh = Toy(seed=1)  # other random init, nothing grown: the layers resize while loading
    load_adapter_state_dict(fresh, state)
    assert fresh.moram.num_atoms == 6 and fresh.moe.num_routers == 3 and fresh.moe_lora.num_experts == 3
    assert set(adapter_state_dict(fresh)) == set(state)
    for key, value in adapter_state_dict(fresh).items():
        assert torch.equal(value, state[key]), key
    x = torch.randn(2, 4)
    for name in ("moram", "router", "moe_lora"):
        layer, other = getattr(toy, name).eval(), getattr(fresh, name).eval()
        with torch.no_grad():
            layer.base.load_state_dict(other.base.state_dict())  # bases are CLIP's, not the state's
            assert torch.equal(layer(x), other(x)), name


def test_a_state_that_does_not_fit_is_refused_before_anything_changes():
    toy = Toy()
    toy.grow(1)
    state = adapter_state_dict(toy)
    fresh = Toy(seed=1)
    before = {k: v.clone() for k, v in fresh.state_dict().items()}
    with pytest.raises(ValueError, match=r"no adapter of the model declares.*plain.weight"):
        load_adapter_state_dict(fresh, {**state, "plain.weight": torch.zeros(4, 4)})
    del state["blocks.1.0.up"]
    with pytest.raises(ValueError, match=r"declared entries missing.*blocks.1.0.up"):
        load_adapter_state_dict(fresh, state)
    after = fresh.state_dict()
    assert after.keys() == before.keys() and all(torch.equal(after[k], before[k]) for k in before)
    with pytest.raises(ValueError, match="holds no adapter layers"):
        load_adapter_state_dict(nn.Linear(2, 2), {})


def test_a_growing_adapter_must_implement_the_protocol():
    with pytest.raises(NotImplementedError):
        GrowingAdapter().expand()
    with pytest.raises(NotImplementedError):
        GrowingAdapter().freeze()
