"""check_plugins: what Avalanche takes as plugins, accepted as a new list."""

from avalanche.core import SupervisedPlugin
from avalanche.training.plugins import EWCPlugin, ReplayPlugin

from moram_avalanche.strategies.plugins.validate import check_plugins


class DuckTyped:
    """Not a SupervisedPlugin subclass, but with a callback: Avalanche calls it."""

    def after_training_exp(self, strategy, **kwargs):
        pass


def test_plugins_avalanche_takes_are_accepted_as_a_new_list():
    assert check_plugins(None) == []
    given = [EWCPlugin(ewc_lambda=1.0), ReplayPlugin(mem_size=4), SupervisedPlugin(), DuckTyped()]
    checked = check_plugins(given)
    assert checked == given and checked is not given
    assert check_plugins(tuple(given)) == given
    assert check_plugins([]) == []
