"""CoDyRAPlugin: CoDyRA's gate thresholding during each task and its merge after it."""

from __future__ import annotations

from typing import Dict, List

from ....algorithms.rank_selection import (
    DENSE_FRACTION,
    KAPPA_STEPS,
    MAX_KAPPA,
    check_schedule,
    kappa_at,
    prunes_at,
    soft_threshold_gates_,
)
from ....layers.gated_lora import GatedLoRALinear
from ...plugins.growth import GrowthPlugin


class CoDyRAPlugin(GrowthPlugin):
    """Rank selection and merging of every :class:`~moram_avalanche.layers.gated_lora.GatedLoRALinear`.

    * :meth:`grow` (before the experience's optimizer is built): the gated factors train; the
      iteration counter of the threshold schedule restarts.
    * ``after_update`` (after each optimizer step, before the scheduler steps): at iterations
      past the dense share, every gate is soft-thresholded by the schedule's current threshold
      (:func:`~moram_avalanche.algorithms.rank_selection.kappa_at`,
      :func:`~moram_avalanche.algorithms.rank_selection.soft_threshold_gates_`) [CoDyRA
      models/codyra.py ``train_model``].
    * :meth:`settle` (after the experience): the active rank of every layer goes into
      :attr:`history`; each layer merges its gated update into its weight and draws fresh
      factors for the next task (the official ``increment_task``, which does it at the start
      of the next task: the same function, merged for evaluation, as the paper's latency table).

    Args: max_kappa (0.005), steps (50), dense_fraction (0.5): the schedule
    (:mod:`~moram_avalanche.algorithms.rank_selection`).

    Attributes:
        history: per experience ``{"domain": name, "ranks": {layer: active rank}}``.
    """

    layer_type = GatedLoRALinear

    def __init__(self, max_kappa: float = MAX_KAPPA, steps: int = KAPPA_STEPS,
                 dense_fraction: float = DENSE_FRACTION) -> None:
        super().__init__()
        check_schedule(max_kappa, steps, dense_fraction)
        self.max_kappa, self.steps, self.dense_fraction = float(max_kappa), steps, float(dense_fraction)
        self.iteration = 0
        self.total = 0
        self.history: List[dict] = []

    def grow(self, strategy) -> None:
        for layer in self.layers(strategy.model).values():
            for parameter in (layer.down, layer.up, layer.gate):
                parameter.requires_grad_(True)
        self.iteration = 0
        self.total = int(strategy.iterations)

    def after_update(self, strategy, **kwargs):
        if prunes_at(self.iteration, self.total, self.dense_fraction):
            kappa = kappa_at(self.iteration, self.total, self.max_kappa, self.steps, self.dense_fraction)
            for layer in self.layers(strategy.model).values():
                soft_threshold_gates_(layer.gate.data, kappa)
        self.iteration += 1

    def settle(self, strategy) -> None:
        layers = self.layers(strategy.model)
        ranks: Dict[str, int] = {name: layer.active_rank for name, layer in layers.items()}
        self.history.append({"domain": str(getattr(strategy.experience, "domain", "")), "ranks": ranks})
        for layer in layers.values():
            layer.merge()
            layer.restart()

    def state_dict(self) -> dict:
        return {"history": self.history}

    def load_state_dict(self, state: dict) -> None:
        self.history = list(state["history"])


__all__ = ["CoDyRAPlugin"]
