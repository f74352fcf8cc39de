"""Wall-clock time a run spends training and evaluating, kept across resumes."""

from __future__ import annotations

import time

import torch
from avalanche.core import SupervisedPlugin


class RunTime(SupervisedPlugin, supports_distributed=True):
    """Seconds spent in ``train`` and ``eval`` calls, summed over the run.

    On CUDA the device is synchronised at each boundary, so queued kernels are counted where
    they ran. An evaluation run inside ``train`` (Avalanche's periodic evaluation,
    ``eval_every >= 0``) counts as evaluation, not training. Totals survive a run checkpoint
    (``state_dict``), so a resumed run reports the time of all its parts (not the time lost
    to an interruption).
    """

    def __init__(self) -> None:
        super().__init__()
        self.train_seconds = 0.0
        self.eval_seconds = 0.0
        self.experiences = 0
        self._train_started = None
        self._eval_started = None
        self._eval_inside_train = 0.0

    def _now(self, strategy) -> float:
        if torch.device(strategy.device).type == "cuda":
            torch.cuda.synchronize(strategy.device)
        return time.perf_counter()

    def before_training(self, strategy, **kwargs):
        self._train_started = self._now(strategy)
        self._eval_inside_train = 0.0

    def after_training(self, strategy, **kwargs):
        elapsed = self._now(strategy) - self._train_started
        self.train_seconds += elapsed - self._eval_inside_train
        self.experiences += 1
        self._train_started = None

    def before_eval(self, strategy, **kwargs):
        self._eval_started = self._now(strategy)

    def after_eval(self, strategy, **kwargs):
        elapsed = self._now(strategy) - self._eval_started
        self.eval_seconds += elapsed
        if self._train_started is not None:
            self._eval_inside_train += elapsed
        self._eval_started = None

    def report(self) -> dict:
        per = self.train_seconds / self.experiences if self.experiences else float("nan")
        return {"train_seconds": self.train_seconds, "eval_seconds": self.eval_seconds,
                "train_seconds_per_experience": per}

    def state_dict(self) -> dict:
        return {"train_seconds": self.train_seconds, "eval_seconds": self.eval_seconds,
                "experiences": self.experiences}

    def load_state_dict(self, state: dict) -> None:
        self.train_seconds = float(state["train_seconds"])
        self.eval_seconds = float(state["eval_seconds"])
        self.experiences = int(state["experiences"])


__all__ = ["RunTime"]
