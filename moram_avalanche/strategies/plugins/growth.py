"""GrowthPlugin: the one place where adapters grow before a task and settle after it.

Avalanche prepares every training experience of any ``SupervisedTemplate`` strategy in the
same order (``BaseSGDTemplate._before_training_exp``): adapt the data
(``before_train_dataset_adaptation``, ``train_dataset_adaptation``,
``after_train_dataset_adaptation``), build the data loader, then ``check_model_and_optimizer``
runs the *model adaptation* step (each ``DynamicModule.adaptation``, e.g.
:class:`~moram_avalanche.models.classifier.CLIPClassifier`'s) and builds or updates the
optimizer right after it (``make_optimizer``: Avalanche's ``update_optimizer`` adds new
parameters and swaps replaced ones), so that the optimizer holds whatever was added before
(Avalanche ``training/templates/base_sgd.py``, ``models/dynamic_optimizers.py``). Every
growing adapter of the package grows at the last data step, ``after_train_dataset_adaptation``,
through this class -- the same way in :class:`~moram_avalanche.strategies.clip.loop.CLIPStrategy`
and in Avalanche's own strategies (``Naive(model=CLIPClassifier(clip, tokenizer), ...,
plugins=[MoRAMPlugin()])``):

* :meth:`GrowthPlugin.grow` -- once the experience's data is adapted
  (``strategy.adapted_dataset``; the model is on its device since ``train`` started), before
  the model adaptation and the optimizer: MoRAM appends atoms, MoE-LoRA an expert,
  MoE-Adapters a router, InfLoRA designs its down-projections. Nothing calls
  ``make_optimizer`` by hand.
* :meth:`GrowthPlugin.settle` -- after the experience (``after_training_exp``): freeze, record,
  merge, prune.

One growth per training experience: growing when the data is adapted, rather than inside a
``DynamicModule.adaptation``, lets growth read the strategy (its data, device, loader options)
and works for any model that holds growing adapters, wrapped in a ``CLIPClassifier`` or not.

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


class GrowthPlugin(SupervisedPlugin, supports_distributed=True):
    """Grows the model's adapters before each training experience; settles them after it.

    Data-parallel processes grow identically (the same seeds) and
    :class:`~moram_avalanche.strategies.plugins.data_parallel.DataParallel` copies rank 0's
    model to the others after growth.

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
        """Before the model adaptation and the optimizer: expand every adapter of :attr:`layer_type`."""
        for layer in self.layers(strategy.model).values():
            layer.expand()

    def settle(self, strategy) -> None:
        """After the experience: freeze what it trained."""
        for layer in self.layers(strategy.model).values():
            layer.freeze()

    # -- Avalanche hooks
    def before_training(self, strategy, **kwargs):
        self.loader_options = {k: kwargs[k] for k in LOADER_OPTIONS if k in kwargs}

    def after_train_dataset_adaptation(self, strategy, **kwargs):
        self.grow(strategy)

    def after_training_exp(self, strategy, **kwargs):
        self.settle(strategy)


__all__ = ["LOADER_OPTIONS", "GrowthPlugin"]
