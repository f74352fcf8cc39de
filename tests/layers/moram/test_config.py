"""MoRAM's layer options are one checked object, and the paper's settings of them are written once."""

import inspect

import pytest
from torch import nn

from moram_avalanche.layers import MoRAMAblationLinear, MoRAMLinear, routing_options
from moram_avalanche.layers.moram.config import PAPER_CLIP, PAPER_LLM, PAPER_TRACE, RELEASE_TRACE, MoRAMLayerConfig

# the paper's numbers, typed from the paper (method reference, Sec. 4) and the release's script
CLIP = dict(atoms_per_task=16, topk=16, temperature=0.01, threshold=0.2)
LLM = dict(atoms_per_task=8, topk=4, temperature=0.1, threshold=0.2)
TRACE = dict(atoms_per_task=16, topk=16, temperature=0.03, threshold=0.2)
RELEASE = dict(atoms_per_task=8, topk=8, temperature=0.03, threshold=0.2)


@pytest.mark.parametrize("setting, numbers", [(PAPER_CLIP, CLIP), (PAPER_LLM, LLM), (PAPER_TRACE, TRACE),
                                              (RELEASE_TRACE, RELEASE)])
def test_the_paper_settings_are_the_papers_numbers(setting, numbers):
    assert setting.options() == numbers


def test_every_default_of_the_layers_reads_the_one_place():
    from moram_avalanche.strategies import MORAM
    from moram_avalanche.strategies.clip.moram import MoRAM
    from moram_avalanche.text.inject import inject_moram
    from moram_avalanche.text.layer import DropoutMoRAMLinear

    def defaults(function):
        return {name: p.default for name, p in inspect.signature(function).parameters.items() if name in CLIP}

    for function in (MoRAMLinear.__init__, MoRAMAblationLinear.__init__, routing_options, MoRAM.__init__):
        assert defaults(function) == CLIP, function
    assert {k: getattr(MORAM, k) for k in CLIP} == CLIP
    for function in (DropoutMoRAMLinear.__init__, inject_moram):
        assert defaults(function) == LLM, function


def test_a_config_is_checked_once_when_it_is_made():
    with pytest.raises(ValueError, match="topk must be a positive int, got 0"):
        MoRAMLayerConfig(topk=0)
    with pytest.raises(ValueError, match="temperature must be a finite number > 0"):
        MoRAMLayerConfig(temperature=0.0)
    with pytest.raises(ValueError, match=r"threshold must be a finite number in \[0, 1\]"):
        MoRAMLayerConfig(threshold=1.5)
    with pytest.raises(ValueError, match="atoms_per_task must be a positive int"):
        MoRAMLayerConfig(atoms_per_task=2.5)


def test_options_are_what_a_layer_built_with_them_reports():
    config = MoRAMLayerConfig(atoms_per_task=3, topk=None, temperature=None, threshold=0.0)
    assert config.options() == {"atoms_per_task": 3, "topk": None, "temperature": 1.0, "threshold": 0.0}
    assert MoRAMLinear(nn.Linear(4, 3), **vars(config)).options == config.options()


def test_the_strategies_check_their_layer_options_with_the_config():
    from moram_avalanche.strategies.clip.moram import check_moram_strategy_options
    from moram_avalanche.strategies.text.moram import check_text_moram_options

    for check in (check_moram_strategy_options, check_text_moram_options):
        with pytest.raises(ValueError, match="threshold must be"):
            check({"threshold": -1})
