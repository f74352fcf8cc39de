"""IterationSchedule: a learning-rate factor per optimizer step, restarted every experience."""

from __future__ import annotations

from functools import partial
from typing import Callable

import torch
from avalanche.core import SupervisedPlugin

from ...algorithms.schedules import cosine_lr_factor


class IterationSchedule(SupervisedPlugin, supports_distributed=True):
    """Multiply each experience's base learning rate by ``factor(step, warmup=, total=)``.

    The schedule of the CLIP continual-learning codebases (cosine with optional linear
    warm-up, :func:`~moram_avalanche.algorithms.schedules.cosine_lr_factor`, set every
    iteration and restarted every task), for :class:`~moram_avalanche.strategies.clip.loop.CLIPStrategy`
    and Avalanche's own strategies alike: in ``before_training_exp`` -- after the strategy built
    or updated the experience's optimizer (``make_optimizer``) -- a ``LambdaLR`` over
    ``strategy.optimizer`` starts at step 0 of the base rates (``initial_lr`` of a kept
    optimizer, else the rates it was built with); it steps after every training iteration
    (``after_training_iteration``). Put it before plugins that read the learning rate in those
    hooks (the strategies of this package put it first): they then see the rate of the step
    being taken (``after_update``) and the next one (``after_training_iteration``).
    Data-parallel processes step it identically.

    Args:
        total: optimizer steps per experience (the strategy's iteration budget).
        warmup: linear warm-up steps.
        factor: the per-step factor ``f(step, *, warmup, total)``.
    """

    def __init__(self, total: int, *, warmup: int = 0,
                 factor: Callable[..., float] = cosine_lr_factor) -> None:
        super().__init__()
        self.total, self.warmup, self.factor = int(total), int(warmup), factor
        #: the scheduler of the current experience (None: no optimizer, or not training)
        self.scheduler = None

    def before_training_exp(self, strategy, **kwargs):
        self.scheduler = None
        if strategy.optimizer is not None:
            factor = partial(self.factor, warmup=self.warmup, total=self.total)
            self.scheduler = torch.optim.lr_scheduler.LambdaLR(strategy.optimizer, factor)

    def after_training_iteration(self, strategy, **kwargs):
        if self.scheduler is not None:
            self.scheduler.step()


__all__ = ["IterationSchedule"]
