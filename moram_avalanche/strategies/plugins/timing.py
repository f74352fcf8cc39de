"""RunTime: the package's one timer of a strategy, for the run records, ``cost`` and the scripts."""

from __future__ import annotations

from typing import Dict, Sequence

from avalanche.core import SupervisedPlugin

from ...utils.clock import Stopwatch

#: the phases whose iterations :class:`RunTime` can time one by one
ITERATION_PHASES = ("train", "eval")


class RunTime(SupervisedPlugin, supports_distributed=True):
    """Wall-clock time a strategy spends training and evaluating, read with the package's one
    clock (:func:`moram_avalanche.utils.clock.now`: the device synchronised at each read).

    **Totals** (always; the run record's ``time.json``, :meth:`report`): seconds spent in
    ``train`` and ``eval`` calls, summed over the run. An evaluation run inside ``train``
    (Avalanche's periodic evaluation, ``eval_every >= 0``) counts as evaluation, not training.
    The totals survive a run checkpoint (:meth:`state_dict`), so a resumed run reports the time
    of all its parts (not the time lost to an interruption).

    **Per iteration** (on request; ``moram-avalanche cost`` and ``scripts/bench_*.py``): for each
    phase named in ``iterations``, a :class:`~moram_avalanche.utils.clock.Stopwatch` in
    :attr:`iterations` whose spans are that phase's iterations (model forward to optimizer
    step for training; data loading outside), each with its batch size. Training iterations
    leave out the first ``warmup`` of every experience; evaluation iterations keep every one
    until the caller resets their stopwatch (``iterations["eval"].reset()``). Off by default:
    a synchronisation per iteration slows a GPU run.

    Put it before plugins whose iteration hooks should not be timed (Avalanche calls plugins in
    list order).

    Args:
        iterations: the phases to time per iteration, a subset of ``("train", "eval")``.
        warmup: training iterations left out at the start of each experience (>= 0).
    """

    def __init__(self, iterations: Sequence[str] = (), warmup: int = 0) -> None:
        super().__init__()
        if isinstance(iterations, str):
            iterations = (iterations,)
        unknown = sorted(set(iterations) - set(ITERATION_PHASES))
        if unknown:
            raise ValueError(f"RunTime(iterations=...): unknown phases {unknown}; "
                             f"expected a subset of {ITERATION_PHASES}")
        self.train_seconds = 0.0
        self.eval_seconds = 0.0
        self.experiences = 0
        self._training = Stopwatch()
        self._evaluation = Stopwatch()
        self._eval_inside_train = 0.0
        #: per phase, its iterations (only the phases asked for)
        self.iterations: Dict[str, Stopwatch] = {
            phase: Stopwatch(warmup if phase == "train" else 0)
            for phase in ITERATION_PHASES if phase in iterations}

    # -- totals ---------------------------------------------------------------------------------
    def before_training(self, strategy, **kwargs):
        self._training.start(strategy.device)
        self._eval_inside_train = 0.0

    def after_training(self, strategy, **kwargs):
        self.train_seconds += self._training.stop(strategy.device, excluding=self._eval_inside_train)
        self.experiences += 1

    def before_eval(self, strategy, **kwargs):
        self._evaluation.start(strategy.device)

    def after_eval(self, strategy, **kwargs):
        elapsed = self._evaluation.stop(strategy.device)
        self.eval_seconds += elapsed
        if self._training.running:
            self._eval_inside_train += elapsed

    # -- per iteration --------------------------------------------------------------------------
    def before_training_exp(self, strategy, **kwargs):
        if "train" in self.iterations:
            self.iterations["train"].reset()

    def before_training_iteration(self, strategy, **kwargs):
        self._start_iteration("train", strategy)

    def after_training_iteration(self, strategy, **kwargs):
        self._stop_iteration("train", strategy)

    def before_eval_iteration(self, strategy, **kwargs):
        self._start_iteration("eval", strategy)

    def after_eval_iteration(self, strategy, **kwargs):
        self._stop_iteration("eval", strategy)

    def _start_iteration(self, phase: str, strategy) -> None:
        if phase in self.iterations:
            self.iterations[phase].start(strategy.device)

    def _stop_iteration(self, phase: str, strategy) -> None:
        if phase in self.iterations:
            self.iterations[phase].stop(strategy.device, size=int(strategy.mb_x.shape[0]))

    # -- records --------------------------------------------------------------------------------
    def report(self) -> dict:
        """The run record's ``time.json``: ``train_seconds``, ``eval_seconds`` and
        ``train_seconds_per_experience`` (NaN before the first experience)."""
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

    def __setstate__(self, state: dict) -> None:
        # a whole-strategy pickle (Avalanche's checkpoint) of an earlier RunTime lacks the
        # stopwatches: start from a fresh timer, then take what the pickle holds
        self.__init__()
        self.__dict__.update(state)


__all__ = ["ITERATION_PHASES", "RunTime"]
