"""MoE-Adapters' mixture (pure torch): experts, noisy top-2 routers, growth and state."""

import pytest
import torch

from moram_avalanche.layers.moe_adapter import Expert, MoEAdapterMixture
from naive_gates import naive_top2

pytestmark = pytest.mark.usefixtures("one_thread")


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
