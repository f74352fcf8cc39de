"""TrainingProgress: a tqdm bar over each experience's training iterations."""

from __future__ import annotations

import time

from avalanche.core import SupervisedPlugin
from tqdm.auto import tqdm

#: seconds between two reads of the loss for the bar (each read makes a GPU wait for the device)
LOSS_EVERY_SECONDS = 1.0


class TrainingProgress(SupervisedPlugin, supports_distributed=True):
    """One bar per training experience (``len(strategy.dataloader)`` steps, the loss as postfix).

    Shown while ``strategy.progress`` is true, and then on a terminal only (written to a file
    or a pipe, bars are left out). Put it after the plugin that sets the experience's batches
    (:class:`~moram_avalanche.strategies.plugins.budget.IterationBudget`). The loss is read at
    most once per :data:`LOSS_EVERY_SECONDS` and only for a bar that is shown: on a GPU each read
    waits for the device.
    """

    def __init__(self) -> None:
        super().__init__()
        self.bar = None
        self._loss_read = float("-inf")

    def before_training_epoch(self, strategy, **kwargs):
        experience = strategy.experience
        name = getattr(experience, "domain", experience.current_experience)
        self.bar = tqdm(total=len(strategy.dataloader), desc=f"train {name}",
                        disable=None if strategy.progress else True, leave=False)  # None: terminals only

    def after_training_iteration(self, strategy, **kwargs):
        if self.bar is None:
            return
        self.bar.update()
        last = self.bar.n >= (self.bar.total or 0)
        if not self.bar.disable and (last or time.monotonic() - self._loss_read >= LOSS_EVERY_SECONDS):
            self._loss_read = time.monotonic()
            self.bar.set_postfix(loss=f"{strategy.loss.item():.3f}")

    def after_training_epoch(self, strategy, **kwargs):
        if self.bar is not None:
            self.bar.close()
            self.bar = None


__all__ = ["TrainingProgress"]
