"""Strategies check their plugins when they are built: a string, a class or an object that is not an
Avalanche plugin is refused with the fix, before any training (``plugins="ewc"`` once became the three
plugins 'e', 'w', 'c'; ``plugins=[object()]`` trained)."""

import open_clip
import pytest
from avalanche.training.plugins import EWCPlugin

from moram_avalanche.experiments.clip.demo import TINY_CONFIG
from moram_avalanche.strategies import MoRAM
from moram_avalanche.strategies.registry import get_strategy


def build(name, tokenizer, plugins):
    model = open_clip.CLIP(**TINY_CONFIG)
    if name == "moram":
        return MoRAM(model=model, tokenizer=tokenizer, atoms_per_task=2, topk=2, plugins=plugins, progress=False)
    return get_strategy(name)(model=model, tokenizer=tokenizer, plugins=plugins)


@pytest.mark.parametrize("name", ["moram", "avalanche.naive"])
@pytest.mark.parametrize("plugins, error, message", [
    ("ewc", TypeError, r"plugins=\[EWCPlugin"),
    ([EWCPlugin], TypeError, "class"),
    ([object()], TypeError, "not an Avalanche plugin"),
])
def test_what_is_not_a_plugin_is_refused_when_the_strategy_is_built(name, tokenizer, plugins, error, message):
    with pytest.raises(error, match=message):
        build(name, tokenizer, plugins)


@pytest.mark.parametrize("name", ["moram", "avalanche.naive"])
def test_plugins_are_taken_as_given_and_the_callers_list_is_not_changed(name, tokenizer):
    ewc = EWCPlugin(ewc_lambda=1.0)
    given = [ewc]
    strategy = build(name, tokenizer, given)
    assert given == [ewc] and ewc in strategy.plugins
