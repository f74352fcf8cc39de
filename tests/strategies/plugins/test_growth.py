"""One growth mechanism: adapters grow once the experience's data is adapted, before the model adaptation and the optimizer."""

import pytest
from avalanche.core import SupervisedPlugin
from avalanche.training.plugins import EvaluationPlugin

from moram_avalanche.layers.base import GrowingAdapter, find_layers
from moram_avalanche.layers.moram.layer import MoRAMLinear
from moram_avalanche.strategies import FineTune, InfLoRA, MoEAdapters, MoELoRA, MoRAM
from moram_avalanche.strategies.plugins.growth import GrowthPlugin

pytestmark = pytest.mark.usefixtures("one_thread")


class OptimizerSpy(SupervisedPlugin):
    """After Avalanche built the experience's optimizer: what it holds, and what trains."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def before_training_exp(self, strategy, **kwargs):
        held = {id(p) for group in strategy.optimizer.param_groups for p in group["params"]}
        trainable = {id(p) for p in strategy.model.parameters() if p.requires_grad}
        self.seen.append((held, trainable, strategy.optimizer))  # kept alive: ids stay unique


def build(kind, model, tokenizer, plugins):
    options = dict(model=model, tokenizer=tokenizer, iterations=2, train_mb_size=4, progress=False,
                   evaluator=EvaluationPlugin(loggers=[]), plugins=plugins)
    if kind is MoEAdapters:
        options.update(selector="latest", warmup=0)
    if kind is InfLoRA:
        options.update(rank=2)
    return kind(**options)


@pytest.mark.parametrize("kind", [MoRAM, MoELoRA, InfLoRA, MoEAdapters])
def test_the_optimizer_avalanche_builds_holds_exactly_what_grew(kind, tiny_clip, tokenizer, make_stream):
    spy = OptimizerSpy()
    strategy = build(kind, tiny_clip, tokenizer, [spy])
    calls = []
    make_optimizer = strategy.make_optimizer
    strategy.make_optimizer = lambda **kw: calls.append(strategy.clock.train_exp_counter) or make_optimizer(**kw)
    stream = make_stream("domain")
    for experience in stream.train_stream[:2]:
        strategy.train(experience)
    for held, trainable, _ in spy.seen:
        assert held == trainable and held  # the new parameters, nothing stale, nothing missing
    assert spy.seen[0][2] is not spy.seen[1][2]  # a fresh optimizer per experience
    if kind is not InfLoRA:  # InfLoRA redesigns its factors in place; the others add parameters
        assert spy.seen[0][0] != spy.seen[1][0]
    # Avalanche's own calls only: its initial reset, then one per experience after the
    # model adaptation -- no plugin rebuilds the optimizer by hand
    assert calls == [0, 0, 1]


def test_growth_happens_for_training_only(tiny_clip, tokenizer, make_stream):
    strategy = build(MoRAM, tiny_clip, tokenizer, [])
    stream = make_stream("domain")
    strategy.train(stream.train_stream[0], num_workers=0)
    sizes = {layer.num_atoms for layer in find_layers(tiny_clip, MoRAMLinear).values()}
    strategy.eval(stream.test_stream)  # the model adaptation of evaluation adds nothing
    assert {layer.num_atoms for layer in find_layers(tiny_clip, MoRAMLinear).values()} == sizes == {16}
    assert strategy.moram_plugin.loader_options == {"num_workers": 0}


def test_a_growth_plugin_grows_any_growing_adapter_and_settles_after(tiny_clip, tokenizer, make_stream):
    class Counting(GrowthPlugin):
        def __init__(self):
            super().__init__(MoRAMLinear)
            self.events = []

        def grow(self, strategy):
            self.events.append(("grow", strategy.is_training, strategy.optimizer is None))
            super().grow(strategy)

        def settle(self, strategy):
            self.events.append(("settle",))
            super().settle(strategy)

    counting = Counting()
    strategy = build(MoRAM, tiny_clip, tokenizer, [counting])
    stream = make_stream("domain")
    strategy.train(stream.train_stream[0])
    # grown while training, before the experience's optimizer existed (first experience: none yet)
    assert counting.events == [("grow", True, True), ("settle",)]
    layers = find_layers(tiny_clip, MoRAMLinear).values()
    # two growth plugins over the same layers: each expanded them once
    assert {layer.num_atoms for layer in layers} == {32} and {layer.num_frozen for layer in layers} == {32}


def test_a_growth_plugin_without_its_layers_says_what_to_do(tiny_clip, tokenizer, make_stream):
    strategy = FineTune(model=tiny_clip, tokenizer=tokenizer, iterations=1, train_mb_size=4, progress=False,
                        evaluator=EvaluationPlugin(loggers=[]), plugins=[GrowthPlugin(MoRAMLinear)])
    with pytest.raises(RuntimeError, match="found no MoRAMLinear in the model: inject"):
        strategy.train(make_stream("domain").train_stream[0])
    assert GrowthPlugin().layer_type is GrowingAdapter
