"""CoDyRA on the shared CLIP loop: gates shrink on schedule, ranks are selected, updates merge."""

import warnings

import pytest
import torch
from avalanche.core import SupervisedPlugin
from avalanche.training.plugins import EvaluationPlugin

from moram_avalanche.experiments.metrics import AccuracyMatrix
from moram_avalanche.layers.base import find_layers
from moram_avalanche.layers.gated_lora import GatedLoRALinear
from moram_avalanche.strategies import STRATEGIES, CoDyRA

warnings.filterwarnings("ignore", message="No loggers specified")


class GateSpy(SupervisedPlugin):
    """Every gate after each optimizer step (after CoDyRA's thresholding, which runs first)."""

    def __init__(self):
        super().__init__()
        self.gates = []

    def after_update(self, strategy, **kwargs):
        self.gates.append({n: layer.gate.detach().clone() for n, layer in find_layers(strategy.model, GatedLoRALinear).items()})


def test_registered_with_the_release_setting(tiny_clip, tokenizer):
    assert STRATEGIES["codyra"] is CoDyRA
    strategy = CoDyRA(model=tiny_clip, tokenizer=tokenizer, progress=False, evaluator=EvaluationPlugin(loggers=[]))
    layers = find_layers(tiny_clip, GatedLoRALinear)
    # both encoders (2 blocks each in the tiny model), six targets each
    assert len(layers) == 2 * 2 * 6 and all(layer.rank == 16 for layer in layers.values())
    assert strategy.iterations == 500 and strategy.lr == 5e-4 and strategy.train_mb_size == 64
    plugin = strategy.codyra_plugin
    assert (plugin.max_kappa, plugin.steps, plugin.dense_fraction) == (0.005, 50, 0.5)
    trainable = {n for n, p in tiny_clip.named_parameters() if p.requires_grad}
    assert trainable and all(n.rpartition(".")[2] in ("down", "up", "gate") for n in trainable)


def test_two_experiences_select_ranks_and_merge(tiny_clip, tokenizer, make_stream):
    spy, metric = GateSpy(), AccuracyMatrix()
    # 12 iterations, dense half 6, 3 thresholds 0, 0.5, 1.0 -> step 2: kappa 0.5 from iteration 6, 1.0 from 8
    strategy = CoDyRA(model=tiny_clip, tokenizer=tokenizer, rank=4, iterations=12, lr=1e-2, max_kappa=1.0,
                      kappa_steps=3, train_mb_size=4, plugins=[spy], progress=False,
                      evaluator=EvaluationPlugin(metric, loggers=[]))
    layers = find_layers(tiny_clip, GatedLoRALinear)
    weights = {n: layer.base.weight.detach().clone() for n, layer in layers.items()}
    stream = make_stream("all")
    for experience in stream.train_stream[:2]:
        strategy.train(experience)
        strategy.eval(stream.test_stream)
    assert torch.as_tensor(metric.result()).shape == (2, 3)
    assert len(spy.gates) == 24
    name = next(iter(layers))
    # dense iterations 0..6: no thresholding (Adam moves gates by ~lr, so no gate is exactly 0)
    assert all(bool((g[name] != 0).all()) for g in spy.gates[:7])
    # after the last steps of each task, every gate with |g| < 2 * 1.0 was zeroed
    for last in (spy.gates[11], spy.gates[23]):
        for gate in last.values():
            assert bool(((gate == 0) | (gate.abs() >= 1.0)).all())
    history = strategy.codyra_plugin.history
    assert [h["domain"] for h in history] == ["alpha", "beta"]
    assert all(h["ranks"][n] == int(torch.count_nonzero(spy.gates[11 + 12 * i][n]))
               for i, h in enumerate(history) for n in layers)
    # merged after each task: the weights moved where a component survived, U restarted at zero
    for n, layer in layers.items():
        assert torch.equal(layer.up, torch.zeros_like(layer.up))
        survived = any(h["ranks"][n] for h in history)
        assert survived == (not torch.equal(layer.base.weight, weights[n]))
    assert any(h["ranks"][n] < 4 for h in history for n in layers)  # some rank was dropped


def test_bad_schedule_is_refused_before_the_model_changes(tiny_clip, tokenizer):
    with pytest.raises(ValueError, match="dense_fraction"):
        CoDyRA(model=tiny_clip, tokenizer=tokenizer, dense_fraction=2.0)
    assert not find_layers(tiny_clip, GatedLoRALinear)
