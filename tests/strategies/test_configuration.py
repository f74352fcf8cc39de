"""A strategy's options are checked once, in one place, before anything is built."""

import pytest
from avalanche.training.plugins import EvaluationPlugin

from moram_avalanche.strategies import options as options_module
from moram_avalanche.strategies.clip.moram import MoRAM
from moram_avalanche.strategies.registry import get_strategy


class Untouchable:
    """A model that fails the test if a strategy reads anything from it."""

    def __getattr__(self, name):
        raise AssertionError(f"the model was touched ({name}) before the options were checked")


BAD = [
    ("moram", {"topk": -1}, ValueError, "topk must be a positive int"),
    ("moram", {"topkk": 2}, TypeError, "MoRAM takes no option 'topkk'"),
    ("moram", {"temperature": "0.01"}, TypeError, "MoRAM option temperature takes"),
    ("seq-lora", {"rank": 0}, ValueError, "rank must be a positive int"),
    ("icarl", {"teacher": "oracle"}, ValueError, "teacher must be one of ('zeroshot', 'previous')"),
    ("rail-primal", {"fusion_weight": 1.5}, ValueError, "fusion_weight must be in [0, 1]"),
    ("rail-dual", {"passes": 0}, ValueError, "passes must be a positive int"),
    ("rail-primal", {"iterations": 3}, ValueError, "RAIL is training-free"),
    ("moe-adapters", {"recipe": "fullshot", "reference_images": "none"}, ValueError, "recipe must be one of"),
    ("inflora", {"memory": "ring"}, ValueError, "memory must be one of"),
    ("zscl", {"reference_images": [1], "reference_sentences": ["a"], "weights_on": "disk"}, ValueError,
     "weight copies go on 'cpu' or 'model'"),
    ("avalanche.naive", {"lr": -1.0}, ValueError, "lr must be a finite number > 0"),
    ("avalanche.replay", {"mem_sise": 3}, ValueError, "avalanche.replay has no argument(s) ['mem_sise']"),
]


@pytest.mark.parametrize("name, given, error, message", BAD, ids=[f"{b[0]}-{next(iter(b[1]))}" for b in BAD])
def test_bad_options_are_refused_before_the_model_is_touched(name, given, error, message):
    with pytest.raises(error) as info:
        get_strategy(name)(model=Untouchable(), tokenizer=Untouchable(), **given)
    assert message in str(info.value)


def test_a_strategy_checks_its_options_once(tiny_clip, tokenizer, monkeypatch):
    calls = {"shared": 0, "moram": 0}
    shared = options_module.check_shared_options
    own = MoRAM.check_values

    def count_shared(given):
        calls["shared"] += 1
        return shared(given)

    def count_own(given):
        calls["moram"] += 1
        return own(given)

    monkeypatch.setattr(options_module, "check_shared_options", count_shared)
    monkeypatch.setattr(MoRAM, "check_values", staticmethod(count_own))
    get_strategy("moram-self+topk")(model=tiny_clip, tokenizer=tokenizer, iterations=2, lr=1e-3, train_mb_size=4,
                                    atoms_per_task=4, progress=False, evaluator=EvaluationPlugin(loggers=[]))
    assert calls == {"shared": 1, "moram": 1}


def test_a_subclass_adds_checks_and_drops_none():
    checks = options_module.strategy_checks(get_strategy("moram-load-balance"))
    assert len(checks) == 1  # the variants declare no checks of their own: MoRAM's, once
    assert options_module.strategy_checks(get_strategy("lwf-vr"))[1:] == options_module.strategy_checks(
        get_strategy("lwf"))
