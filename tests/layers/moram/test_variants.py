"""The routing-ablation options (MoRAMLinear's and MoRAMAblationLinear's) against hand computations
and the naive reference."""

import math

import pytest
import torch
from torch import nn

from moram_avalanche.layers.moram.layer import MoRAMLinear
from moram_avalanche.layers.moram.naive import naive_moram
from moram_avalanche.layers.moram.variants import (
    BALANCE_FORMS,
    ROUTER_KEY,
    MoRAMAblationLinear,
    balance_term,
    moram_layer,
    plain_mixture,
    release_balance_term,
)


def grown(d_in=5, d_out=4, per_task=3, expansions=2, seed=0, **kwargs):
    """A float64 layer grown ``expansions`` times, with non-zero values (and router rows)."""
    torch.manual_seed(seed)
    layer = moram_layer(nn.Linear(d_in, d_out).double(), atoms_per_task=per_task, **kwargs)
    for _ in range(expansions):
        layer.expand()
        with torch.no_grad():
            layer.new_values.normal_()
            if has_router(layer):
                layer.new_router.normal_()
    return layer


def has_router(layer):
    return isinstance(layer, MoRAMAblationLinear) and layer.router


def hand_output(layer, x, *, relevance, k, tau, gate=None):
    """``W x + b + sum_kept softmax(s_kept / tau) p B`` written out token by token."""
    keys, values = layer.keys, layer.values
    rows = []
    for token, s in zip(x, relevance):
        p = keys @ token
        kept = torch.topk(s, k).indices
        w = torch.softmax(s[kept] / tau, dim=0)
        if gate is not None:
            w = w * (s[kept] >= gate)
        delta = sum(w[j] * p[i] * values[:, i] for j, i in enumerate(kept.tolist()))
        rows.append(layer.base.weight @ token + layer.base.bias + delta)
    return torch.stack(rows)


def self_relevance(layer, x):
    p = x @ layer.keys.t()
    return p / p.norm(dim=-1, keepdim=True)


def reference(layer, x, training):
    """The naive reference with its own leaf copies of the trainable blocks."""
    f = layer.num_frozen
    new_keys = layer.keys[f:].clone().requires_grad_()
    new_values = layer.values[:, f:].clone().requires_grad_()
    router, new_router = None, None
    if has_router(layer):
        new_router = layer.router_weight[f:].clone().requires_grad_()
        router = [layer.router_weight[:f], new_router]
    out = naive_moram(x, layer.base.weight, layer.base.bias, [layer.keys[:f], new_keys],
                      [layer.values[:, :f], new_values], topk=layer.topk,
                      temperature=layer.temperature, threshold=layer.threshold,
                      training=training, router=router)
    return out, [new_keys, new_values] + ([new_router] if router else [])


def layer_grads(layer):
    grads = [layer.new_keys.grad, layer.new_values.grad.t()]  # values: [r, d_out] in the bank
    return grads + ([layer.new_router.grad] if has_router(layer) else [])


# ---------------------------------------------------------------- outputs
def test_no_topk_weights_every_atom():
    layer = grown(topk=None, temperature=0.5, threshold=0.0).train()
    x = torch.randn(7, 5, dtype=torch.float64)
    assert layer.effective_topk == layer.num_atoms == 6
    expected = hand_output(layer, x, relevance=self_relevance(layer, x), k=6, tau=0.5)
    torch.testing.assert_close(layer(x), expected)
    # every atom is used: the dense softmax has no zero
    layer.start_recording()
    layer(x)
    assert bool((layer.atom_hits == 7).all())


def test_no_temperature_is_tau_one():
    x = torch.randn(6, 5, dtype=torch.float64)
    none = grown(topk=3, temperature=None, threshold=0.0).train()
    one = grown(topk=3, temperature=1.0, threshold=0.0).train()
    assert none.temperature == 1.0
    expected = hand_output(none, x, relevance=self_relevance(none, x), k=3, tau=1.0)
    torch.testing.assert_close(none(x), expected)
    assert torch.equal(none(x), one(x))


@pytest.mark.parametrize("training", [True, False])
def test_external_router_replaces_the_relevance(training):
    layer = grown(topk=2, temperature=0.7, threshold=0.1, router=True).train(training)
    x = torch.randn(8, 5, dtype=torch.float64)
    logits = x @ layer.router_weight.t()
    expected = hand_output(layer, x, relevance=logits, k=2, tau=0.7,
                           gate=None if training else 0.1)
    torch.testing.assert_close(layer(x), expected)
    # and it differs from self-activation routing on the same bank
    plain = grown(topk=2, temperature=0.7, threshold=0.1).train(training)
    assert not torch.allclose(plain(x), layer(x))


@pytest.mark.parametrize("options", [
    dict(topk=None, temperature=None, threshold=0.0),
    dict(topk=2, temperature=None, threshold=0.0),
    dict(topk=None, temperature=0.05, threshold=0.0),
    dict(topk=None, temperature=None, threshold=0.3),
    dict(topk=2, temperature=None, threshold=0.0, router=True),
    dict(topk=None, temperature=0.3, threshold=0.2, router=True),
    dict(topk=3, temperature=0.1, threshold=0.2, load_balance=True),
], ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
@pytest.mark.parametrize("training", [True, False])
def test_outputs_and_gradients_match_the_naive_reference(options, training):
    layer = grown(**options).train(training)
    x = torch.randn(2, 4, 5, dtype=torch.float64, requires_grad=True)
    out = layer(x)
    flat = x.detach().reshape(-1, 5).requires_grad_()
    expected, leaves = reference(layer, flat, training)
    torch.testing.assert_close(out.reshape(-1, 4), expected)
    cotangent = torch.randn_like(expected)
    (out.reshape(-1, 4) * cotangent).sum().backward()
    (expected * cotangent).sum().backward()
    torch.testing.assert_close(x.grad.reshape(-1, 5), flat.grad)
    for got, want in zip(layer_grads(layer), [leaf.grad for leaf in leaves]):
        torch.testing.assert_close(got, want)


def fused(out):
    """Whether the autograd graph of ``out`` holds the fused MoRAMFunction."""
    seen, stack = set(), [out.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        if "MoRAMFunction" in type(node).__name__:
            return True
        stack.extend(next_node for next_node, _ in node.next_functions)
    return False


def test_defaults_keep_the_fused_path_and_ablations_use_the_plain_one():
    x = torch.randn(3, 5, dtype=torch.float64)
    for options in (dict(), dict(topk=None, temperature=None, threshold=0.0)):
        assert fused(grown(**options).train()(x))
    assert not fused(grown(router=True).train()(x))
    balanced = grown(load_balance=True)
    assert not fused(balanced.train()(x))
    assert len(balanced.pop_balance_terms()) == 1
    assert fused(balanced.eval()(x))  # no term in eval
    with torch.no_grad():
        balanced.train()(x)
    assert balanced.pop_balance_terms() == []


# ---------------------------------------------------------------- gradcheck of the plain path
def test_plain_path_gradcheck_router_and_balance():
    torch.manual_seed(3)
    tokens = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    keys = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    values = torch.randn(5, 2, dtype=torch.float64, requires_grad=True)
    router = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    weight, bias = torch.randn(2, 3, dtype=torch.float64), torch.randn(2, dtype=torch.float64)

    def routed(t, k, v, r):
        return plain_mixture(t, weight, bias, k, v, 3, 0.5, None, router=r).out

    def balanced(form):
        def run(t, k, v):
            result = plain_mixture(t, weight, bias, k, v, 3, 0.5, None, balance=form)
            return result.out, result.balance
        return run

    assert torch.autograd.gradcheck(routed, (tokens, keys, values, router))
    for form in BALANCE_FORMS:
        assert torch.autograd.gradcheck(balanced(form), (tokens, keys, values))
    with pytest.raises(ValueError, match="balance must be"):
        plain_mixture(tokens, weight, bias, keys, values, 3, 0.5, None, balance=True)


# ---------------------------------------------------------------- load-balancing term
def test_balance_term_hand_examples():
    # uniform probabilities: P_i = 1/3; kept slots 0,1 | 0,2 -> f = (1/2, 1/4, 1/4); 3 * 1/3 = 1
    uniform = balance_term(torch.zeros(2, 3), torch.tensor([[0, 1], [0, 2]]), temperature=1.0)
    assert uniform.item() == pytest.approx(1.0)
    # P = (2/3, 1/3) and every token routed to atom 0: 2 * (1 * 2/3) = 4/3
    skewed = balance_term(torch.tensor([[math.log(2.0), 0.0]]), torch.tensor([[0]]), 1.0)
    assert skewed.item() == pytest.approx(4 / 3)
    # temperature divides the logits: tau = 0.5 -> P = (4/5, 1/5) -> 2 * 4/5
    sharp = balance_term(torch.tensor([[math.log(2.0), 0.0]]), torch.tensor([[0]]), 0.5)
    assert sharp.item() == pytest.approx(8 / 5)


def test_release_balance_term_hand_examples():
    # weights (1, 0) and (0.5, 0.5) on atoms (0, 1) and (0, 2) of 3: Pbar = (0.75, 0, 0.25)
    weights = torch.tensor([[1.0, 0.0], [0.5, 0.5]])
    term = release_balance_term(weights, torch.tensor([[0, 1], [0, 2]]), num_atoms=3)
    assert term.item() == pytest.approx(3 * (0.75 ** 2 + 0.25 ** 2))
    # perfectly uniform use gives 1; one atom taking everything gives R
    uniform = release_balance_term(torch.full((4, 1), 1.0), torch.tensor([[0], [1], [2], [3]]), 4)
    assert uniform.item() == pytest.approx(1.0)
    assert release_balance_term(torch.ones(5, 1), torch.zeros(5, 1, dtype=torch.long), 4).item() == 4


def test_layer_release_balance_term_follows_the_release_formula():
    x = torch.randn(9, 5, dtype=torch.float64)
    layer = grown(topk=2, temperature=0.5, load_balance="release").train()
    layer(x)
    (term,) = layer.pop_balance_terms()
    s = self_relevance(layer, x)
    kept = torch.topk(layer.keys @ x.t(), 2, dim=0).indices.t()  # top-k on p, as the layer
    masked = torch.full_like(s, -math.inf).scatter(1, kept, s.gather(1, kept))
    mean_weight = torch.softmax(masked / 0.5, dim=-1).mean(0)  # the release: [N, R] weights
    assert term.item() == pytest.approx(6 * float((mean_weight ** 2).sum()))


@pytest.mark.parametrize("topk", [None, 6])
def test_release_term_balances_even_when_every_atom_is_kept(topk):
    # k >= R (the whole first task at r = k = 16): the Switch term is a constant 1, the
    # release's is not, and it has a gradient for the new keys
    x = torch.randn(9, 5, dtype=torch.float64)
    switch = grown(topk=topk, temperature=0.01, load_balance="switch").train()
    switch(x)
    switch_term = switch.pop_balance_terms()[0]
    assert switch_term.item() == pytest.approx(1.0)
    release = grown(topk=topk, temperature=0.01, load_balance=True).train()
    assert release.load_balance == "release"
    release(x)
    term = release.pop_balance_terms()[0]
    assert term.item() > 1.01
    term.backward()
    assert release.new_keys.grad.abs().sum() > 0


def test_load_balance_option_is_checked():
    layer = MoRAMAblationLinear(nn.Linear(2, 2))
    assert layer.load_balance is None
    with pytest.raises(ValueError, match="load_balance must be"):
        layer.load_balance = "auxiliary"
    layer.load_balance = "switch"
    assert "load_balance='switch'" in repr(layer)


def test_layer_balance_term_is_the_switch_formula_and_one_without_topk():
    x = torch.randn(9, 5, dtype=torch.float64)
    layer = grown(topk=2, temperature=0.5, load_balance="switch").train()
    layer(x)
    (term,) = layer.pop_balance_terms()
    s = self_relevance(layer, x)
    probs = torch.softmax(s / 0.5, dim=-1).mean(0)
    kept = torch.topk(s, 2, dim=-1).indices
    fraction = torch.bincount(kept.flatten(), minlength=6).double() / kept.numel()
    assert term.item() == pytest.approx(6 * float((fraction * probs).sum()))
    # every atom kept: f uniform, the term is 1 whatever the probabilities
    dense = grown(topk=None, temperature=0.5, load_balance="switch").train()
    dense(x)
    assert dense.pop_balance_terms()[0].item() == pytest.approx(1.0)


@pytest.mark.parametrize("form", BALANCE_FORMS)
def test_balance_term_reaches_the_new_keys_only(form):
    layer = grown(topk=2, temperature=0.5, load_balance=form).train()
    layer(torch.randn(9, 5, dtype=torch.float64))
    layer.pop_balance_terms()[0].backward()
    assert layer.new_keys.grad.abs().sum() > 0
    assert layer.new_values.grad is None or not layer.new_values.grad.any()


# ---------------------------------------------------------------- router state
def test_router_rows_grow_freeze_and_train():
    layer = grown(d_in=4, per_task=2, expansions=1, router=True, topk=2, threshold=0.0)
    assert layer.router_weight.shape == (2, 4)
    layer.expand()
    assert layer.router_weight.shape == (4, 4)
    init = layer.new_router.detach().clone()
    assert init.abs().max() <= 0.5 and init.abs().min() > 0  # Kaiming-uniform: U(+-1/sqrt(4))
    assert not torch.equal(init, layer.new_keys.detach())  # its own draw
    assert [p.shape for p in layer.parameters() if p.requires_grad] == [(2, 4), (2, 4), (2, 4)]
    old = layer.router_weight[:2].clone()
    optimizer = torch.optim.SGD([layer.new_keys, layer.new_values, layer.new_router], lr=0.5)
    x = torch.randn(16, 4, dtype=torch.float64)
    for _ in range(3):
        optimizer.zero_grad()
        layer.train()(x).square().sum().backward()
        optimizer.step()
    assert torch.equal(layer.router_weight[:2], old)
    assert not torch.equal(layer.router_weight[2:], init)


def test_new_router_rows_win_their_share_of_top_k_slots():
    # 3 tasks of frozen rows, then a 4th: with rows drawn alike the new atoms get about a
    # quarter of the top-k slots (zero-initialised rows would get almost none: logit 0
    # against frozen rows with positive logits)
    torch.manual_seed(0)
    layer = MoRAMAblationLinear(nn.Linear(32, 8), atoms_per_task=16, topk=16, temperature=None,
                        threshold=0.0, router=True)
    for _ in range(4):
        layer.expand()
    logits = torch.randn(2000, 32) @ layer.router_weight.t()
    kept = logits.topk(16, dim=-1).indices
    share = (kept >= 48).double().mean().item()
    assert 0.15 < share < 0.35


def test_router_state_dict_round_trip_into_a_fresh_layer():
    layer = grown(d_in=4, d_out=3, per_task=2, expansions=3, router=True, topk=3, threshold=0.1)
    state = layer.state_dict()
    assert set(state) == {"atom_keys", "atom_values", "num_frozen", "atom_task", ROUTER_KEY,
                          "base.weight", "base.bias"}
    assert state[ROUTER_KEY].shape == (6, 4)
    fresh = MoRAMAblationLinear(nn.Linear(4, 3).double(), atoms_per_task=2, topk=3, threshold=0.1,
                                router=True)
    fresh.load_state_dict(state)
    assert fresh.num_frozen == 4 and fresh.new_router.shape == (2, 4)
    x = torch.randn(5, 4, dtype=torch.float64)
    for mode in (True, False):
        assert torch.equal(fresh.train(mode)(x), layer.train(mode)(x))
    # a layer without a router refuses the extra key; a router layer needs it
    plain = MoRAMLinear(nn.Linear(4, 3).double(), atoms_per_task=2)
    with pytest.raises(RuntimeError, match=ROUTER_KEY):
        plain.load_state_dict(state)
    del state[ROUTER_KEY]
    with pytest.raises(RuntimeError, match=ROUTER_KEY):
        fresh.load_state_dict(state)


def test_prune_keeps_router_rows_aligned_with_their_atoms():
    layer = grown(d_in=4, per_task=4, expansions=1, router=True, topk=2, temperature=1.0,
                  threshold=0.0)
    with torch.no_grad():  # the router prefers atoms 1 and 3 for every positive token
        layer.new_router.copy_(torch.tensor([[0.0] * 4, [1.0] * 4, [-1.0] * 4, [2.0] * 4]))
    layer.freeze()
    layer.start_recording()
    layer.train()(torch.rand(10, 4, dtype=torch.float64))
    router = layer.router_weight.clone()
    dropped = layer.prune(1.0)
    assert dropped.tolist() == [0, 2]
    assert torch.equal(layer.router_weight, router[[1, 3]])


def test_bad_options_are_reported():
    with pytest.raises(ValueError, match="topk"):
        MoRAMLinear(nn.Linear(2, 2), topk=0)
    layer = MoRAMLinear(nn.Linear(2, 2), atoms_per_task=1)
    with pytest.raises(ValueError, match=f"MoRAMLinear keeps no \\['{ROUTER_KEY}'\\] rows"):
        layer.load_atoms(torch.zeros(1, 2), torch.zeros(2, 1), 0, router_weight=torch.zeros(1, 2))


def test_uncollected_balance_terms_are_reported(monkeypatch):
    import moram_avalanche.layers.moram.variants as variants

    monkeypatch.setattr(variants, "MAX_BALANCE_TERMS", 2)
    layer = grown(load_balance=True).train()
    x = torch.randn(3, 5, dtype=torch.float64)
    layer(x)
    layer(x)
    with pytest.raises(RuntimeError, match="pop_balance_terms"):
        layer(x)
    assert len(layer.pop_balance_terms()) == 2
    layer(x)  # collected: fine again
