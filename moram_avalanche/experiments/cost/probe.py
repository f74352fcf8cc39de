"""CostProbe: what one training experience costs -- parameters, memory, time per iteration."""

from __future__ import annotations

import time
from typing import Dict, List

import torch
from avalanche.core import SupervisedPlugin

from ...layers.base import find_layers
from ...strategies.plugins.memory import memory_footprint
from .formula import Formula, trainable_formula


def synchronize(device) -> None:
    """Wait for the device's queued work (CUDA), so a clock read after it counts that work."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


class CostProbe(SupervisedPlugin):
    """Records, per training experience, once the optimizer is built:

    * ``trainable``: parameters that require grad; ``formulas``: per adapter layer, its
      :class:`~.formula.Formula`;
    * ``iteration_seconds`` / ``iteration_images``: wall-clock time of every training
      iteration after the first ``warmup`` (the device synchronised at both ends) and its
      batch size;
    * ``proxy_peak``: the largest :func:`~moram_avalanche.strategies.plugins.memory.memory_footprint`
      after an iteration (the CPU proxy: tensors held, activations not counted);

    and, while :attr:`timing_eval` is set, ``eval_seconds`` / ``eval_images`` of every evaluation
    iteration (synchronised likewise).
    """

    def __init__(self, warmup: int = 2) -> None:
        super().__init__()
        self.warmup = warmup
        self.timing_eval = False
        self.eval_seconds: List[float] = []
        self.eval_images: List[int] = []
        self.reset()

    def reset(self) -> None:
        self.trainable = 0
        self.formulas: Dict[str, Formula] = {}
        self.iteration_seconds: List[float] = []
        self.iteration_images: List[int] = []
        self.proxy_peak = 0
        self._started = None
        self._iteration = 0

    def before_training_exp(self, strategy, **kwargs):
        self.reset()

    def before_training_epoch(self, strategy, **kwargs):
        model = strategy.model
        self.trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
        self.formulas = {name: formula for name, layer in find_layers(model).items()
                         if (formula := trainable_formula(layer)) is not None}

    def before_training_iteration(self, strategy, **kwargs):
        synchronize(strategy.device)
        self._started = time.perf_counter()

    def after_training_iteration(self, strategy, **kwargs):
        synchronize(strategy.device)
        elapsed = time.perf_counter() - self._started
        self._iteration += 1
        if self._iteration > self.warmup:
            self.iteration_seconds.append(elapsed)
            self.iteration_images.append(int(strategy.mb_x.shape[0]))
        self.proxy_peak = max(self.proxy_peak, sum(memory_footprint(strategy).values()))

    def before_eval_iteration(self, strategy, **kwargs):
        if self.timing_eval:
            synchronize(strategy.device)
            self._started = time.perf_counter()

    def after_eval_iteration(self, strategy, **kwargs):
        if self.timing_eval:
            synchronize(strategy.device)
            self.eval_seconds.append(time.perf_counter() - self._started)
            self.eval_images.append(int(strategy.mb_x.shape[0]))


__all__ = ["CostProbe", "synchronize"]
