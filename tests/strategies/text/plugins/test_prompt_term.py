"""PromptTermPlugin, the base of L2P's and DualPrompt's plugins: the terms the prefix recorded in an
iteration, averaged and weighted into the loss with the subclass's sign, by hand."""

from types import SimpleNamespace

import pytest
import torch

from moram_avalanche.strategies.text.plugins.prompt_term import PromptTermPlugin
from moram_avalanche.text.soft_prompt import PromptPrefix


class Recording(PromptPrefix):
    """A prefix holding the terms it is handed (PromptPool and DualPromptPrefix record theirs in forward)."""

    def __init__(self):
        super().__init__()
        self.recorded = []

    def pop(self):
        recorded, self.recorded = self.recorded, []
        return recorded


class Adds(PromptTermPlugin):
    prefix_type = Recording
    built_by = "the test's strategy"

    def pop_terms(self, prefix):
        return prefix.pop()


class Subtracts(Adds):
    sign = -1.0


@pytest.mark.parametrize("plugin_class, sign", [(Adds, 1.0), (Subtracts, -1.0)])
def test_the_iterations_terms_are_averaged_weighted_and_signed(plugin_class, sign):
    plugin, prefix = plugin_class(0.25), Recording()
    strategy = SimpleNamespace(model=SimpleNamespace(prefix=prefix), loss=torch.tensor(2.0))
    prefix.recorded = [torch.tensor(9.0)]  # a forward before the iteration (an evaluation, another plugin)
    plugin.before_training_iteration(strategy)
    assert prefix.recorded == []
    prefix.recorded = [torch.tensor(1.0), torch.tensor(3.0)]  # two forwards in the iteration: mean 2
    plugin.before_backward(strategy)
    assert strategy.loss.item() == pytest.approx(2.0 + sign * 0.25 * 2.0)
    assert plugin.last_term.item() == 2.0 and not plugin.last_term.requires_grad
    plugin.before_backward(strategy)  # nothing recorded: the loss stays, no term logged
    assert strategy.loss.item() == pytest.approx(2.0 + sign * 0.5) and plugin.last_term is None


def test_a_model_without_the_prefix_is_refused_naming_what_builds_it():
    with pytest.raises(RuntimeError, match="Adds needs a Recording as the model's prefix, found NoneType: build the "
                                           "model through the test's strategy"):
        Adds(1.0).before_backward(SimpleNamespace(model=SimpleNamespace(prefix=None), loss=torch.tensor(0.0)))


def test_l2p_subtracts_and_dualprompt_adds():
    from moram_avalanche.strategies.text.plugins.dualprompt import DualPromptPlugin
    from moram_avalanche.strategies.text.plugins.l2p import L2PPlugin

    assert issubclass(L2PPlugin, PromptTermPlugin) and issubclass(DualPromptPlugin, PromptTermPlugin)
    assert (L2PPlugin.sign, DualPromptPlugin.sign) == (-1.0, 1.0)
    assert (L2PPlugin().coef, DualPromptPlugin().coef) == (0.5, 1.0)  # TRACE's pull, the paper's matching weight
