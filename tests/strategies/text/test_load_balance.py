"""``moram-load-balance`` on language models (the T5 columns of the paper's ``tab:load_balance``):
the layer's term against a naive computation, the term added to the loss once, the method left
as it was, and bad combinations refused before anything is built."""

import pytest
import torch
from torch import nn

from tiny_stream import FAMILIES, TASKS, stream_tokenizer


def balanced_layer(dropout=0.0, seed=0):
    from moram_avalanche.text.layer import DropoutBalancedMoRAMLinear

    torch.manual_seed(seed)
    layer = DropoutBalancedMoRAMLinear(nn.Linear(6, 5), atoms_per_task=4, topk=2, temperature=0.5,
                                       threshold=0.2, dropout=dropout)
    layer.expand()
    with torch.no_grad():
        layer.new_keys.normal_()
        layer.new_values.normal_()
    return layer


def naive(layer, x):
    """The layer in training and its load-balancing term, written out: p = A x, top-k on p,
    w = softmax((p / ||p||)_kept / tau), y = W x + b + sum_kept w p B, term = R sum_i Pbar_i^2."""
    keys, values = layer.new_keys.detach(), layer.new_values.detach()
    p = x @ keys.T
    idx = p.topk(2, dim=-1).indices
    relevance = p / p.norm(dim=-1, keepdim=True)
    weights = torch.softmax(relevance.gather(1, idx) / 0.5, dim=-1)
    dense = torch.zeros_like(p).scatter(1, idx, weights)
    y = layer.base(x) + (dense * p) @ values
    mean_weight = dense.mean(0)
    return y, keys.shape[0] * (mean_weight ** 2).sum()


def test_the_layer_records_the_releases_term_and_computes_the_methods_output():
    from moram_avalanche.text.layer import DropoutMoRAMLinear

    layer = balanced_layer()
    x = torch.randn(7, 6)
    layer.train()
    y = layer(x)
    terms = layer.pop_balance_terms()
    want_y, want_term = naive(layer, x)
    assert len(terms) == 1
    assert torch.allclose(terms[0], want_term, atol=1e-5) and torch.allclose(y, want_y, atol=1e-5)
    # the kept weights sum to 1 per token, so by Cauchy-Schwarz the term is at least 1
    assert terms[0].item() >= 1 - 1e-6
    terms[0].backward()
    assert layer.new_keys.grad is not None and layer.new_keys.grad.abs().sum() > 0  # it trains the routing
    # the method's layer with the same atoms computes the same output (the term changes nothing else)
    plain = DropoutMoRAMLinear(layer.base, atoms_per_task=4, topk=2, temperature=0.5, threshold=0.2, dropout=0.0)
    plain.load_state_dict(layer.state_dict())
    plain.train()
    assert torch.allclose(plain(x), y, atol=1e-5)
    layer.eval()
    plain.eval()
    with torch.no_grad():
        assert torch.allclose(layer(x), plain(x), atol=1e-5)
    assert layer.pop_balance_terms() == []  # no term in evaluation


def test_the_release_scaling_is_refused_with_load_balancing():
    from moram_avalanche.text.inject import inject_moram
    from tiny_text import tiny_t5

    layer = balanced_layer()
    layer.new_value_scale = 2.0
    layer.train()
    with pytest.raises(ValueError, match="new_value_scale must be 1"):
        layer(torch.randn(3, 6))
    with pytest.raises(ValueError, match="needs new_value_scale 1"):
        inject_moram(tiny_t5(), load_balance="release", new_value_scale=2.0)


def build(name, plugins=None, model=None, **options):
    from moram_avalanche.strategies.registry import get_strategy

    tokenizer = stream_tokenizer()
    model = model if model is not None else FAMILIES["t5"](tokenizer, seed=0)
    return get_strategy(name, family="text")(model=model, tokenizer=tokenizer, plugins=plugins, train_mb_size=4,
                                             iterations=2, lr=1e-2, max_new_tokens=2, **options)


class LossAfterPlugins:
    """Records, after every plugin's before_backward, the loss and the model's own token loss."""

    def __init__(self):
        from avalanche.core import SupervisedPlugin

        outer = self
        self.seen = []

        class Plugin(SupervisedPlugin):
            def before_backward(self, strategy, **kwargs):
                outer.seen.append((strategy.loss.detach().clone(), strategy.mb_output.detach().clone(),
                                   strategy.balance_plugin.last_term))

        self.plugin = Plugin()


def test_the_strategy_adds_its_coefficient_times_the_term_to_the_loss_once():
    from moram_avalanche.benchmarks import synthetic_text
    from moram_avalanche.layers.base import find_layers
    from moram_avalanche.layers.moram.config import PAPER_LLM
    from moram_avalanche.layers.moram.layer import MoRAMLinear
    from moram_avalanche.text.layer import DropoutBalancedMoRAMLinear

    recorder = LossAfterPlugins()
    strategy = build("moram-load-balance", plugins=[recorder.plugin])
    assert strategy.balance_plugin.coef == 0.01 and strategy.balance_plugin.form == "release"
    layers = find_layers(strategy.model, MoRAMLinear)
    assert layers and all(type(layer) is DropoutBalancedMoRAMLinear for layer in layers.values())
    # every other setting is MoRAM's (paper Sec. 4, LLM settings)
    assert all({k: layer.options[k] for k in PAPER_LLM.options()} == PAPER_LLM.options() and layer.dropout == 0.1
               and not layer.router for layer in layers.values())
    bench = synthetic_text(TASKS, train_per_label=2, test_per_label=1)
    for experience in list(bench.train_stream)[:2]:
        strategy.train(experience)
    assert len(recorder.seen) == 4  # two iterations per task
    for loss, token_loss, term in recorder.seen:
        assert term is not None and term.item() >= 1 - 1e-5
        assert torch.allclose(loss, token_loss + 0.01 * term, atol=1e-6)
    assert all(layer.pop_balance_terms() == [] for layer in layers.values())  # every term was collected


def test_moram_itself_is_unchanged():
    from moram_avalanche.layers.base import find_layers
    from moram_avalanche.layers.moram.layer import MoRAMLinear
    from moram_avalanche.text.layer import DropoutMoRAMLinear

    strategy = build("moram")
    assert strategy.balance_plugin is None
    assert all(type(layer) is DropoutMoRAMLinear for layer in find_layers(strategy.model, MoRAMLinear).values())


def test_bad_balancing_is_refused_before_the_model_changes():
    from moram_avalanche.layers.base import find_layers
    from moram_avalanche.layers.moram.layer import MoRAMLinear

    tokenizer = stream_tokenizer()
    model = FAMILIES["t5"](tokenizer, seed=0)
    with pytest.raises(ValueError, match="balance_coef"):
        build("moram-load-balance", model=model, balance_coef=-1)
    with pytest.raises(ValueError, match="balance_form must be one of"):
        build("moram-load-balance", model=model, balance_form="even")
    assert not find_layers(model, MoRAMLinear)
    build("moram", model=model)  # MoRAM's layers, without the term
    with pytest.raises(ValueError, match="already carries MoRAM layers with load_balance=None"):
        build("moram-load-balance", model=model)
