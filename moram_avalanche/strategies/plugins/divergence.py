"""Stop a run that diverged instead of reporting its numbers as a result.

A learning rate far too large (``--lr 1e4``) drives the trainable weights to infinity and the
loss to NaN within a few steps; the evaluation then scores every image as class 0 (the argmax
of NaN logits) and the accuracy matrix looks like a result. :class:`StopOnDivergence` checks
the loss of every training step and the trainable weights after every experience, and raises
:class:`TrainingDiverged` -- one line naming the strategy, the experience, the first iteration
with a non-finite loss, the loss and the learning rate -- before anything of that experience is
evaluated or saved. The run path (:func:`~moram_avalanche.experiments.run.run_one`) adds it to
every strategy.

Reading a loss on the host makes a GPU wait for the device at every step. So on a GPU the check
stays on the device (whether a loss was non-finite, the first such iteration and its loss:
tensors updated without reading them) and is read every ``check_every`` iterations and at the
end of the experience: one wait per ``check_every`` steps. A diverged run is then stopped at
most ``check_every - 1`` steps later; the message still names the first bad iteration. On the
CPU the loss is read at every step (nothing to wait for).
"""

from __future__ import annotations

import torch
from avalanche.core import SupervisedPlugin

from ...utils.checks import check_positive_int
from ...utils.errors import UserError

#: iterations between two reads of the on-device check on a GPU (one host synchronisation each)
CHECK_EVERY = 50


class TrainingDiverged(UserError, FloatingPointError):
    """Training produced a non-finite loss or non-finite weights."""


class StopOnDivergence(SupervisedPlugin, supports_distributed=True):
    """Raise :class:`TrainingDiverged` on a non-finite loss (every step; read every ``check_every``
    steps on a GPU) or non-finite trainable weights (after each experience). Module docstring.

    Args:
        check_every: steps between two reads of the on-device check.
        deferred: keep the check on the device and read it every ``check_every`` steps; default
            (None): for losses off the CPU only.
    """

    # A 0.4 whole-strategy checkpoint (Avalanche's strategies) pickled this plugin before it held any
    # state, and pickle restores an empty state without calling ``__setstate__``: the class holds
    # the defaults such an instance reads.
    check_every = CHECK_EVERY
    deferred = None
    _first = None
    _loss = None
    _unread = 0

    def __init__(self, check_every: int = CHECK_EVERY, deferred=None) -> None:
        super().__init__()
        self.check_every = check_positive_int("check_every", check_every)
        self.deferred = deferred
        self._first = None  # on the device: the first iteration with a non-finite loss, or -1
        self._loss = None  # on the device: that iteration's loss
        self._unread = 0  # steps recorded since the last read

    def before_training_exp(self, strategy, **kwargs):
        self._first = self._loss = None
        self._unread = 0

    def before_backward(self, strategy, **kwargs):
        loss = getattr(strategy, "loss", None)
        if not isinstance(loss, torch.Tensor):
            return
        loss = loss.detach()
        iteration = getattr(strategy.clock, "train_exp_iterations", -1)
        if not (loss.device.type != "cpu" if self.deferred is None else self.deferred):
            if not bool(torch.isfinite(loss).all()):
                self._raise(strategy, iteration, float(loss.float().sum()))
            return
        value = loss.float().sum()
        bad = ~torch.isfinite(value)
        if self._first is None:
            self._first = torch.full((), -1, dtype=torch.long, device=loss.device)
            self._loss = torch.zeros((), device=loss.device)
        first_bad = bad & (self._first < 0)
        self._first = torch.where(first_bad, iteration, self._first)
        self._loss = torch.where(first_bad, value, self._loss)
        self._unread += 1
        if self._unread >= self.check_every:
            self.read(strategy)

    def read(self, strategy) -> None:
        """Read the on-device check (one host synchronisation) and raise if a loss was non-finite."""
        self._unread = 0
        if self._first is not None and int(self._first) >= 0:
            self._raise(strategy, int(self._first), float(self._loss))

    def after_training_exp(self, strategy, **kwargs):
        self.read(strategy)
        named = [(name, p) for name, p in strategy.model.named_parameters() if p.requires_grad]
        if not named:
            return
        finite = torch.stack([torch.isfinite(p.detach()).all().to(named[0][1].device) for _, p in named])
        if not bool(finite.all()):  # one read for every weight
            name = named[int((~finite).nonzero()[0])][0]
            raise TrainingDiverged(self._where(strategy, f"the trainable weight {name} holds non-finite values"))

    def _raise(self, strategy, iteration: int, loss: float):
        at = "" if iteration < 0 else f" at iteration {iteration}"
        raise TrainingDiverged(self._where(strategy, f"the loss is {loss}", at))

    @staticmethod
    def _where(strategy, what: str, at: str = None) -> str:
        experience = getattr(strategy, "experience", None)
        index, domain = getattr(experience, "current_experience", None), getattr(experience, "domain", None)
        groups = getattr(getattr(strategy, "optimizer", None), "param_groups", None) or [{}]
        lr = groups[0].get("lr")
        if at is None:
            at = f" at iteration {getattr(strategy.clock, 'train_exp_iterations', '?')}"
        where = "" if index is None else f" of experience {index + 1}" + (f" ({domain})" if domain else "")
        rate = "" if lr is None else f" with learning rate {lr:g}"
        return (f"{type(strategy).__name__} diverged: {what}{at}{where}{rate}: lower the learning "
                "rate (--lr); nothing of this experience was recorded (the run resumes from its last checkpoint)")


__all__ = ["CHECK_EVERY", "StopOnDivergence", "TrainingDiverged"]
