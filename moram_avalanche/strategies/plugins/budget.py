"""IterationBudget: exactly N optimizer steps per experience, for any Avalanche strategy."""

from __future__ import annotations

from typing import Iterator

from avalanche.core import SupervisedPlugin

from ...utils.iteration import cycle


class FixedBatches:
    """Exactly ``count`` batches of ``loader``, re-iterating (re-shuffling) it as often as needed."""

    def __init__(self, loader, count: int, what: str) -> None:
        self.loader, self.count, self.what = loader, count, what

    def __iter__(self) -> Iterator:
        batches = cycle(self.loader, self.what)
        for _ in range(self.count):
            yield next(batches)

    def __len__(self) -> int:
        return self.count


class IterationBudget(SupervisedPlugin, supports_distributed=True):
    """Train every experience for exactly ``iterations`` minibatches (one "epoch").

    The budget of the MoRAM release (``iterations`` per task, cycling small datasets), for
    :class:`~moram_avalanche.strategies.clip.loop.CLIPStrategy` (which attaches it) and Avalanche's
    own strategies alike, whose loops run epochs over the data loader: in ``before_training_epoch`` -- after every ``before_training_exp``, so
    after a ``ReplayPlugin`` or ``GDumbPlugin`` installed its loader -- the strategy's loader is
    replaced by exactly ``iterations`` of its batches. The strategy must train one epoch per
    experience (``train_epochs=1``); Avalanche's epoch metrics then mean "per experience".
    Early stopping (``strategy.stop_training()``) is left to the strategy's loop. ``0``
    iterations run the experience's callbacks without a step (an untrained baseline).
    """

    def __init__(self, iterations: int) -> None:
        super().__init__()
        if iterations < 0:
            raise ValueError(f"iterations must be >= 0, got {iterations}")
        self.iterations = int(iterations)

    def before_training_exp(self, strategy, **kwargs):
        if strategy.train_epochs != 1:
            raise ValueError(
                f"IterationBudget gives each experience exactly {self.iterations} iterations in "
                f"one epoch; the strategy trains {strategy.train_epochs} epochs: pass train_epochs=1")

    def before_training_epoch(self, strategy, **kwargs):
        experience = strategy.experience
        what = (f"the training data of domain {experience.domain!r}" if hasattr(experience, "domain")
                else f"the training data of experience {experience.current_experience}")
        strategy.dataloader = FixedBatches(strategy.dataloader, self.iterations, what)


__all__ = ["FixedBatches", "IterationBudget"]
