"""CostProbe: what one training experience holds -- trainable parameters and memory.

Its time is measured by the package's one timer,
:class:`~moram_avalanche.strategies.plugins.timing.RunTime` (per iteration), beside it.
"""

from __future__ import annotations

from typing import Dict

from avalanche.core import SupervisedPlugin

from ....layers.base import find_layers
from ....strategies.plugins.memory import memory_footprint
from .formula import Formula, trainable_formula


class CostProbe(SupervisedPlugin):
    """Records, per training experience, once the optimizer is built:

    * ``trainable``: parameters that require grad; ``formulas``: per adapter layer, its
      :class:`~.formula.Formula`;
    * ``proxy_peak``: the largest :func:`~moram_avalanche.strategies.plugins.memory.memory_footprint`
      after a training iteration (the CPU proxy: tensors held, activations not counted).

    Time per iteration is :class:`~moram_avalanche.strategies.plugins.timing.RunTime`'s
    (``RunTime(iterations=("train", "eval"), warmup=...)``), placed before this plugin so that
    its iteration spans do not include this plugin's memory count.
    """

    def __init__(self) -> None:
        super().__init__()
        self.reset()

    def reset(self) -> None:
        self.trainable = 0
        self.formulas: Dict[str, Formula] = {}
        self.proxy_peak = 0

    def before_training_exp(self, strategy, **kwargs):
        self.reset()

    def before_training_epoch(self, strategy, **kwargs):
        model = strategy.model
        self.trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
        self.formulas = {name: formula for name, layer in find_layers(model).items()
                         if (formula := trainable_formula(layer)) is not None}

    def after_training_iteration(self, strategy, **kwargs):
        self.proxy_peak = max(self.proxy_peak, sum(memory_footprint(strategy).values()))


__all__ = ["CostProbe"]
