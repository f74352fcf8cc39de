"""SAPT's attentive selection and reflection on hand-sized cases (values worked out by hand)."""

import math

import pytest
import torch
from torch import nn

from moram_avalanche.layers.sapt import SAPTLoRALinear, SAPTRouter, SAPTSelection, reflection_loss


def identity_router(keys, temperature=1.0):
    """A 2-d router whose projection is the identity up to SiLU and LayerNorm (hidden width 2)."""
    router = SAPTRouter(2, hidden=2, temperature=temperature)
    with torch.no_grad():
        router.query[0].weight.copy_(torch.eye(2))
        router.query[1].weight.copy_(torch.eye(2))
    for key in keys:
        router.expand()
        with torch.no_grad():
            router.keys[-1].copy_(torch.tensor(key))
    return router


def test_the_attention_over_task_keys_by_hand():
    router = identity_router([[0.5, 0.5], [1.0, 0.0]])
    # two tokens: max-pooled per dimension -> [3, 0]; SiLU -> [3 sigmoid(3), 0]; LayerNorm of two values
    # -> [+1, -1] (up to its epsilon); scores k . q: [0.5 - 0.5, 1] = [0, 1]; softmax -> [1, e] / (1 + e)
    embeddings = torch.tensor([[[1.0, -1.0], [3.0, 0.0]]])
    silu = 3 / (1 + math.exp(-3))
    half = silu / 2
    q = half / math.sqrt(half ** 2 + 1e-5)
    assert router.logits(embeddings)[0].tolist() == pytest.approx([0.0, q], abs=1e-6)
    weights = router.weights(embeddings)[0]
    assert weights.tolist() == pytest.approx([1 / (1 + math.exp(q)), math.exp(q) / (1 + math.exp(q))], abs=1e-6)
    assert weights.tolist() == pytest.approx([0.26894, 0.73106], abs=1e-4)
    # SAPT's temperature, sqrt(d): the scores divided by sqrt(2)
    assert SAPTRouter(2, hidden=2).temperature == pytest.approx(math.sqrt(2))


def test_padding_positions_take_part_in_the_max_pool():
    router = identity_router([[1.0, 0.0], [0.0, 1.0]])
    short = torch.tensor([[[1.0, 0.0]]])
    padded = torch.tensor([[[1.0, 0.0], [0.0, 5.0]]])  # a pad token's embedding changes the query (SAPT's max)
    assert not torch.allclose(router.weights(short), router.weights(padded))


def test_the_blocks_are_mixed_by_the_weights_by_hand():
    selection = SAPTSelection()
    layer = SAPTLoRALinear(nn.Linear(2, 2, bias=False), selection, rank=1, scale=1.0)
    with torch.no_grad():
        layer.base.weight.copy_(torch.eye(2))
    layer.expand()
    layer.expand()
    with torch.no_grad():  # block 0: x -> [x0, 0]; block 1: x -> [0, 2 x1]
        layer.downs[0].copy_(torch.tensor([[1.0, 0.0]]))
        layer.ups[0].copy_(torch.tensor([[1.0], [0.0]]))
        layer.downs[1].copy_(torch.tensor([[0.0, 1.0]]))
        layer.ups[1].copy_(torch.tensor([[0.0], [2.0]]))
    selection.weights = torch.tensor([[0.25, 0.75], [1.0, 0.0]])
    x = torch.tensor([[[1.0, 1.0]], [[2.0, 3.0]]])
    # row 0: [1, 1] + 0.25 [1, 0] + 0.75 [0, 2]; row 1: [2, 3] + 1 [2, 0] + 0 [0, 6]
    torch.testing.assert_close(layer(x), torch.tensor([[[1.25, 2.5]], [[4.0, 3.0]]]))
    layer.scale = 8.0  # SAPT's lora_alpha / r = 32 / 4
    assert layer(x)[0, 0].tolist() == pytest.approx([1 + 8 * 0.25, 1 + 8 * 1.5])


def test_earlier_blocks_give_no_gradient_the_weights_do():
    selection = SAPTSelection()
    layer = SAPTLoRALinear(nn.Linear(2, 2, bias=False), selection, rank=1, scale=1.0)
    layer.expand()
    with torch.no_grad():
        layer.ups[0].fill_(1.0)
    layer.expand()  # block 0 frozen, block 1 trains
    logits = torch.zeros(1, 2, requires_grad=True)
    selection.weights = torch.softmax(logits, dim=-1)
    x = torch.ones(1, 1, 2, requires_grad=True)
    layer(x).sum().backward()
    assert layer.downs[0].grad is None and layer.ups[0].grad is None
    assert layer.ups[1].grad is not None
    assert logits.grad is not None and logits.grad.abs().sum() > 0
    # x's gradient: the base's and the trainable block's only (block 1's up is zero, so only the base)
    torch.testing.assert_close(x.grad, layer.base.weight.sum(dim=0).expand(1, 1, 2))


def test_the_reflection_term_by_hand():
    logits = torch.tensor([[0.0, math.log(3.0)], [0.0, math.log(3.0)]])  # softmax [0.25, 0.75]
    # KL([0.5, 0.5] || [0.25, 0.75]) = 0.5 ln 2 + 0.5 ln(2 / 3) = 0.5 ln(4 / 3), the same for both rows
    assert reflection_loss(logits, torch.tensor([0.5, 0.5])).item() == pytest.approx(0.5 * math.log(4 / 3))
    # a target on the first task only (the later tasks' weights zero): ln(1 / 0.25)
    assert reflection_loss(logits, torch.tensor([1.0, 0.0])).item() == pytest.approx(math.log(4.0))
    assert reflection_loss(logits, torch.tensor([0.25, 0.75])).item() == pytest.approx(0.0, abs=1e-7)


def test_targets_are_stored_per_task_and_padded_with_zeros():
    router = identity_router([[1.0, 0.0]])
    router.settle(torch.tensor([1.0]))
    router.expand()
    router.settle(torch.tensor([0.4, 0.6]))
    router.expand()
    assert router.target(0, 3).tolist() == [1.0, 0.0, 0.0]
    assert router.target(1, 3).tolist() == pytest.approx([0.4, 0.6, 0.0])
    with pytest.raises(ValueError, match="no reflection target for task 2"):
        router.target(2, 3)
    with pytest.raises(ValueError, match="one weight per task so far"):
        router.settle(torch.tensor([1.0]))


def test_expand_freezes_earlier_keys_and_a_state_loads_into_a_fresh_router():
    router = identity_router([[1.0, 0.0], [0.0, 1.0]])
    assert [k.requires_grad for k in router.keys] == [False, True]
    assert all(p.requires_grad for p in router.query.parameters())
    router.reflection = torch.tensor([[1.0, 0.0], [0.3, 0.7]])
    state = router.state_dict()
    fresh = SAPTRouter(2, hidden=2, temperature=1.0)
    fresh.load_state_dict(state)
    assert fresh.num_tasks == 2 and torch.equal(fresh.reflection, router.reflection)
    embeddings = torch.randn(3, 4, 2)
    assert torch.equal(fresh.weights(embeddings), router.weights(embeddings))
    assert not any(p.requires_grad for p in fresh.parameters())


def test_bad_use_is_refused():
    with pytest.raises(RuntimeError, match="no task key yet"):
        SAPTRouter(4).logits(torch.zeros(1, 2, 4))
    with pytest.raises(ValueError, match="temperature must be > 0"):
        SAPTRouter(4, temperature=0.0)
    router = identity_router([[1.0, 0.0]])
    with pytest.raises(ValueError, match=r"reads \[batch, length, 2\] token embeddings"):
        router.logits(torch.zeros(1, 3))
    layer = SAPTLoRALinear(nn.Linear(2, 2), SAPTSelection())
    layer.expand()
    with pytest.raises(RuntimeError, match="no attention weights"):
        layer(torch.zeros(1, 1, 2))
    layer.selection.weights = torch.ones(2, 1)
    with pytest.raises(RuntimeError, match="do not fit a batch of 1"):
        layer(torch.zeros(1, 1, 2))


def test_a_compiled_layer_reads_each_batchs_weights():
    """Compiled generation (a static cache, the decode step under torch.compile) traces the layer in
    one graph; the weights are read per call, not baked in."""
    selection = SAPTSelection()
    layer = SAPTLoRALinear(nn.Linear(8, 8), selection, rank=2)
    layer.expand()
    layer.expand()
    with torch.no_grad():
        for up in layer.ups:
            up.normal_()
    compiled = torch.compile(layer, backend="eager", fullgraph=True)
    for batch in (3, 3, 5):
        selection.weights = torch.softmax(torch.randn(batch, 2), dim=-1)
        x = torch.randn(batch, 4, 8)
        with torch.no_grad():
            torch.testing.assert_close(compiled(x), layer(x))
