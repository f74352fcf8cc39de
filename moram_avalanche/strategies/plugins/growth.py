"""GrowthPlugin: the one place where adapters grow before a task and settle after it.

Avalanche prepares every training experience in the same order: adapt the data, build the
data loader, then ``check_model_and_optimizer`` runs the *model adaptation* step (each
``DynamicModule.adaptation``) and builds the optimizer right after it, so that the optimizer
holds whatever the adaptation added (Avalanche ``models/dynamic_modules.py``;
:meth:`~moram_avalanche.strategies.base.CLIPStrategy.model_adaptation`). Every growing
adapter of the package grows in that step, through this class:

* :meth:`GrowthPlugin.grow` -- called by the strategy's model adaptation when it trains, after
  the experience's data is adapted (``strategy.adapted_dataset``) and the model is on its
  device, before the optimizer is built: MoRAM appends atoms, MoE-LoRA an expert, MoE-Adapters
  a router, InfLoRA designs its down-projections. Nothing calls ``make_optimizer`` by hand.
* :meth:`GrowthPlugin.settle` -- after the experience (``after_training_exp``): freeze, record,
  merge, prune.

The default grows every :class:`~moram_avalanche.layers.base.GrowingAdapter` of
:attr:`layer_type` (``expand()``) and freezes them after (``freeze()``): that alone is
MoE-LoRA's plugin. Subclasses add their method's work around it.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Type

from avalanche.core import SupervisedPlugin
from torch import nn

from ...layers.base import GrowingAdapter, find_layers

#: the keyword arguments of ``strategy.train(...)`` that configure data loading, which a growth
#: step that reads data (InfLoRA's covariance pass, DDAS) uses for its own loaders
LOADER_OPTIONS = ("num_workers", "pin_memory", "persistent_workers")


class GrowthPlugin(SupervisedPlugin):
    """Grows the model's adapters in the model-adaptation step; settles them after the experience.

    Args:
        layer_type: the growing adapters this plugin expands (default: every one).

    Attributes:
        loader_options: the data-loading keyword arguments of the current ``train(...)`` call
            (:data:`LOADER_OPTIONS`), for growth steps that read data.
    """

    layer_type: Type[GrowingAdapter] = GrowingAdapter

    def __init__(self, layer_type: Optional[Type[GrowingAdapter]] = None) -> None:
        super().__init__()
        if layer_type is not None:
            self.layer_type = layer_type
        self.loader_options: Dict[str, Any] = {}

    def layers(self, model: nn.Module) -> Dict[str, GrowingAdapter]:
        """The adapters this plugin grows, by name; a clear error when the model has none."""
        layers = find_layers(model, self.layer_type)
        if not layers:
            raise RuntimeError(
                f"{type(self).__name__} found no {self.layer_type.__name__} in the model: inject "
                "the adapters first (the strategy does it when it is built)")
        return layers

    # -- the protocol
    def grow(self, strategy) -> None:
        """Before the experience's optimizer is built: expand every adapter of :attr:`layer_type`."""
        for layer in self.layers(strategy.model).values():
            layer.expand()

    def settle(self, strategy) -> None:
        """After the experience: freeze what it trained."""
        for layer in self.layers(strategy.model).values():
            layer.freeze()

    # -- Avalanche hooks
    def before_training(self, strategy, **kwargs):
        self.loader_options = {k: kwargs[k] for k in LOADER_OPTIONS if k in kwargs}

    def after_training_exp(self, strategy, **kwargs):
        self.settle(strategy)


def grow_adapters(strategy) -> None:
    """Run :meth:`GrowthPlugin.grow` of every growth plugin of ``strategy``, in plugin order."""
    for plugin in strategy.plugins:
        if isinstance(plugin, GrowthPlugin):
            plugin.grow(strategy)


__all__ = ["LOADER_OPTIONS", "GrowthPlugin", "grow_adapters"]
