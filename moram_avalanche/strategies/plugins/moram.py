"""MoRAMPlugin: grow the atom banks task by task ("little by little"), record, prune."""

from __future__ import annotations

from typing import Dict, List, Optional

from ...layers.moram import MoRAMLinear
from .growth import GrowthPlugin


class MoRAMPlugin(GrowthPlugin, supports_distributed=True):
    """MoRAM's experience boundaries (method reference, "continual expansion"):

    * :meth:`grow` (the model-adaptation step, before the optimizer is built): every
      MoRAMLinear freezes its atoms and appends ``atoms_per_task`` new ones; per-atom
      activation statistics restart and are recorded during training (``record=True``).
    * :meth:`settle` (after the experience): the new atoms freeze; their statistics are kept in
      :attr:`history`; with ``prune_mass`` the atoms of the task outside the smallest set
      covering that share of the mass are dropped (paper: 0.99).

    Attributes:
        history: one entry per trained experience: ``{"experience", "domain", "layers":
            {name: {"mass", "hits", "atom_task"}}}`` (CPU tensors), for analysis and plots.
        pruned: atoms dropped per experience, ``{name: count}``.
    """

    layer_type = MoRAMLinear

    def __init__(self, prune_mass: Optional[float] = None, record: bool = True) -> None:
        super().__init__()
        if prune_mass is not None and not 0 < prune_mass <= 1:
            raise ValueError(f"prune_mass must be in (0, 1] or None, got {prune_mass}")
        self.prune_mass = prune_mass
        self.record = record or prune_mass is not None
        self.history: List[dict] = []
        self.pruned: List[Dict[str, int]] = []

    def grow(self, strategy) -> None:
        for layer in self.layers(strategy.model).values():
            layer.expand()
            layer.reset_stats()
            if self.record:
                layer.start_recording()

    def settle(self, strategy) -> None:
        layers = self.layers(strategy.model)
        snapshot = {}
        for name, layer in layers.items():
            layer.stop_recording()
            layer.freeze()
            snapshot[name] = {"mass": layer.atom_mass.detach().cpu().clone(),
                              "hits": layer.atom_hits.detach().cpu().clone(),
                              "atom_task": layer.atom_task.detach().cpu().clone()}
        self.history.append({"experience": strategy.experience.current_experience,
                             "domain": getattr(strategy.experience, "domain", None),
                             "layers": snapshot})
        if self.prune_mass is not None:
            self.pruned.append({name: int(layer.prune(self.prune_mass).numel())
                                for name, layer in layers.items()})

    def state_dict(self) -> dict:
        return {"history": self.history, "pruned": self.pruned}

    def load_state_dict(self, state: dict) -> None:
        self.history, self.pruned = list(state["history"]), list(state["pruned"])


__all__ = ["MoRAMPlugin"]
