"""MoEAdaptersPlugin: MoE-Adapters' experience boundaries (a router per task, frozen experts, DDAS)."""

from __future__ import annotations

from typing import List, Optional

from ....algorithms.ddas import DDAS
from ....layers.moe_adapter import MoEAdapterMixture
from ...plugins.growth import GrowthPlugin


class MoEAdaptersPlugin(GrowthPlugin):
    """The experience-boundary work of MoE-Adapters (baselines reference, section 2.2-2.3).

    * :meth:`grow` (once the experience's data is adapted, before the optimizer is built): (once) the
      DDAS reference autoencoder on the reference images; a new router in every block
      (:meth:`~moram_avalanche.layers.moe_adapter.MoEAdapterMixture.expand`), the only router
      that trains; experts frozen so far keep ``requires_grad=False``; selection counts restart.
    * :meth:`settle` (after the experience): the ``freeze_per_task`` most-selected experts of every block
      join its frozen set (cumulative); DDAS trains the experience's autoencoder. The release
      follows the same procedure in a separate run on its own 5-per-class draw of the
      augmented train loader; here on the experience's own training set (train transform,
      re-augmented on every pass).

    DDAS's DataLoaders use ``ae_workers`` workers, or when it is None the ``num_workers`` the
    run passes to ``strategy.train(...)``
    (:attr:`~moram_avalanche.strategies.plugins.growth.GrowthPlugin.loader_options`;
    :func:`~moram_avalanche.experiments.runner.run_stream` passes ``num_workers``).

    Attributes:
        history: per experience, ``{"domain": name, "blocks": {block name: {"counts": [selections
            per expert], "frozen": [expert indices frozen after it]}}}`` (plain Python).
    """

    def __init__(self, ddas: Optional[DDAS], reference_images=None, freeze_per_task: int = 2,
                 ae_workers: Optional[int] = None) -> None:
        super().__init__(MoEAdapterMixture)
        self.ddas, self.reference_images = ddas, reference_images
        self.freeze_per_task = freeze_per_task
        self.ae_workers = ae_workers
        self.history: List[dict] = []

    def _workers(self) -> int:
        if self.ae_workers is not None:
            return self.ae_workers
        return int(self.loader_options.get("num_workers", 0))

    def grow(self, strategy) -> None:
        if self.ddas is not None:
            self.ddas.to(strategy.device)
            if self.reference_images is not None and self.ddas.reference is None:
                self.ddas.fit_reference(self.reference_images, num_workers=self._workers())
        routers = {mixture.expand() for mixture in self.layers(strategy.model).values()}
        if len(routers) != 1:
            raise RuntimeError(f"the blocks' MoE adapters disagree on the new router's index: "
                               f"{sorted(routers)}; inject them once, into a fresh model")
        strategy.active_router = routers.pop()

    def settle(self, strategy) -> None:
        blocks = {}
        for name, mixture in self.layers(strategy.model).items():
            counts = mixture.counts.tolist()
            blocks[name] = {"counts": counts,
                            "frozen": mixture.freeze_most_used(self.freeze_per_task).tolist()}
            mixture.freeze()
        self.history.append({"domain": strategy.experience.domain, "blocks": blocks})
        strategy.active_router = None
        if self.ddas is not None:
            self.ddas.fit_task(strategy.experience.dataset, num_workers=self._workers())

    def state_dict(self) -> dict:
        return {"ddas": None if self.ddas is None else self.ddas.state_dict(),
                "history": self.history}

    def load_state_dict(self, state: dict) -> None:
        if (state["ddas"] is None) != (self.ddas is None):
            raise ValueError("the checkpoint and this strategy disagree on using DDAS (selector)")
        if self.ddas is not None:
            self.ddas.load_state_dict(state["ddas"])
        self.history = list(state["history"])


__all__ = ["MoEAdaptersPlugin"]
