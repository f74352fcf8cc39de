"""The text recipes' settings that say where 0.7 made a method compute what its published code
computes: set (and so recorded) on every stream, equal to the strategies' own defaults, each with
the file it follows."""

import inspect

import pytest

CHANGED = {"ogd": {"projection": "per-parameter", "directions": "last-steps", "gradients_per_task": 1},
           "l2p": {"prompt_init_divisor": 1.0},
           "lori-d": {"loss_reduction": "example-sum"}, "lori-s": {"loss_reduction": "example-sum"}}


@pytest.mark.parametrize("benchmark", ["synthetic-text", "lm-cl", "trace", "superni", "codealpaca"])
def test_every_stream_records_the_methods_published_behaviour(benchmark):
    from moram_avalanche.experiments.text.recipes import stream_options, stream_settings

    for name, expected in CHANGED.items():
        options = stream_options(benchmark, name)
        assert {option: options[option] for option in expected} == expected, (benchmark, name)
        sources = {s.option: s.source for s in stream_settings(benchmark, name) if s.option in expected}
        assert all(".py:" in source for source in sources.values()), sources  # a file and its lines
    assert "prompt_init_divisor" not in stream_options(benchmark, "dualprompt")  # L2P's only


def test_the_recorded_values_are_the_strategies_defaults():
    """Recording them changes no run of 0.7: they are what the strategies do when not told."""
    from moram_avalanche.strategies.registry import get_strategy

    for name, expected in CHANGED.items():
        cls = get_strategy(name, family="text")
        defaults = {}
        for klass in reversed(cls.__mro__):
            init = vars(klass).get("__init__")
            if init is not None:
                defaults.update({k: p.default for k, p in inspect.signature(init).parameters.items()})
        assert {option: defaults[option] for option in expected} == expected, name


def test_a_0_6_record_of_these_methods_differs_in_the_new_option():
    """A 0.6 folder recorded the options it was given; this version's record of the same run names
    the option 0.7 added, so resuming is refused with it rather than continued under another method."""
    from moram_avalanche.experiments.record import CHECKED_BEFORE_BUILDING, differences, make_record
    from moram_avalanche.experiments.text.recipes import stream_options

    run = {"benchmark": "lm-cl", "strategy": "l2p"}
    old = make_record(run, strategy="TextL2P", options={"pool_size": 4})
    new = make_record(run, strategy="TextL2P", options={**stream_options("lm-cl", "l2p"), "pool_size": 4})
    assert differences(old, new, CHECKED_BEFORE_BUILDING) == ['options.prompt_init_divisor: "(absent)" there, 1.0 now']
