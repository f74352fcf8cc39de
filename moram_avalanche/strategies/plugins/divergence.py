"""Stop a run that diverged instead of reporting its numbers as a result.

A learning rate far too large (``--lr 1e4``) drives the trainable weights to infinity and the
loss to NaN within a few steps; the evaluation then scores every image as class 0 (the argmax
of NaN logits) and the accuracy matrix looks like a result. :class:`StopOnDivergence` checks
the loss before every backward pass and the trainable weights after every experience, and
raises :class:`TrainingDiverged` -- one line naming the strategy, the experience, the
iteration and the learning rate -- before anything of that experience is evaluated or saved.
The run path (:func:`~moram_avalanche.experiments.run.run_one`) adds it to every strategy.
"""

from __future__ import annotations

import torch
from avalanche.core import SupervisedPlugin

from ...utils.errors import UserError


class TrainingDiverged(UserError, FloatingPointError):
    """Training produced a non-finite loss or non-finite weights."""


class StopOnDivergence(SupervisedPlugin, supports_distributed=True):
    """Raise :class:`TrainingDiverged` on a non-finite loss (checked before each backward) or
    non-finite trainable weights (checked after each experience)."""

    def before_backward(self, strategy, **kwargs):
        loss = getattr(strategy, "loss", None)
        if isinstance(loss, torch.Tensor) and not bool(torch.isfinite(loss.detach()).all()):
            raise TrainingDiverged(self._where(strategy, f"the loss is {float(loss.detach().float().sum())}"))

    def after_training_exp(self, strategy, **kwargs):
        for name, parameter in strategy.model.named_parameters():
            if parameter.requires_grad and not bool(torch.isfinite(parameter.detach()).all()):
                raise TrainingDiverged(self._where(strategy, f"the trainable weight {name} holds non-finite values"))

    @staticmethod
    def _where(strategy, what: str) -> str:
        experience = getattr(strategy, "experience", None)
        index, domain = getattr(experience, "current_experience", None), getattr(experience, "domain", None)
        groups = getattr(getattr(strategy, "optimizer", None), "param_groups", None) or [{}]
        lr = groups[0].get("lr")
        where = "" if index is None else f" of experience {index + 1}" + (f" ({domain})" if domain else "")
        rate = "" if lr is None else f" with learning rate {lr:g}"
        return (f"{type(strategy).__name__} diverged: {what} at iteration "
                f"{getattr(strategy.clock, 'train_exp_iterations', '?')}{where}{rate}: lower the learning "
                "rate (--lr); nothing of this experience was recorded (the run resumes from its last checkpoint)")


__all__ = ["StopOnDivergence", "TrainingDiverged"]
