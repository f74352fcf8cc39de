"""MoRAMPlugin: grow the atom banks task by task ("little by little"), record, prune."""

from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np
import torch

from ...algorithms.data_parallel import all_reduce_sum, world_size
from ...layers.base import find_layers
from ...layers.moram.layer import MoRAMLinear
from ...layers.moram.paths import cpu_kernel as routing_kernel
from .growth import GrowthPlugin
from .run_hooks import RunHooks


def bank_checksum(layer: MoRAMLinear) -> float:
    """A fingerprint of the bank a layer holds: the float64 sum of its keys and values.

    Frozen atoms never change, so the bank after task ``t`` is the final bank's rows of tasks
    ``<= t``; the analysis (:mod:`moram_avalanche.experiments.clip.analysis`) checks that against
    this number, recorded after each task.
    """
    return float(layer.keys.double().sum() + layer.values.double().sum())


def reduce_recorded_stats(layers) -> None:
    """Sum each layer's recorded activation mass and hit counts over the data-parallel processes.

    Each process records the atoms' activations on its own share of every batch; summed, every
    process holds what one process seeing the whole batches records, so :attr:`MoRAMPlugin.history`
    and pruning (which reads the mass) agree across processes. Nothing without a process group.
    """
    if world_size() == 1:
        return
    for layer in layers:
        layer.atom_mass = all_reduce_sum(layer.atom_mass)
        layer.atom_hits = all_reduce_sum(layer.atom_hits)


def atom_usage(history_entry: dict, title: str = "share of activation mass by task") -> dict:
    """Per layer (rows), the share of the recorded activation mass taken by each task's atoms
    (columns), as the keyword arguments of :func:`~moram_avalanche.experiments.viz.heatmap`."""
    layers = history_entry["layers"]
    names = list(layers)
    tasks = int(max(int(v["atom_task"].max()) for v in layers.values())) + 1
    shares = np.zeros((len(names), tasks))
    for row, name in enumerate(names):
        mass = layers[name]["mass"].double().numpy()
        owner = layers[name]["atom_task"].numpy()
        total = mass.sum()
        for task in range(tasks):
            shares[row, task] = mass[owner == task].sum() / total if total > 0 else np.nan
    short = [n.replace("transformer.resblocks.", "").replace("visual.", "v.") for n in names]
    return {"values": shares, "row_labels": short, "col_labels": [f"task {t}" for t in range(tasks)],
            "title": title, "fmt": "{:.2f}", "vmin": 0, "vmax": 1}


class MoRAMPlugin(GrowthPlugin, RunHooks, supports_distributed=True):
    """MoRAM's experience boundaries (method reference, "continual expansion"):

    * :meth:`grow` (once the experience's data is adapted, before the model adaptation and the
      optimizer): every MoRAMLinear freezes its atoms and appends ``atoms_per_task`` new ones; per-atom
      activation statistics restart and are recorded during training (``record=True``).
    * :meth:`settle` (after the experience): the new atoms freeze; their statistics are kept in
      :attr:`history`; with ``prune_mass`` the atoms of the task outside the smallest set
      covering that share of the mass are dropped (paper: 0.99).

    The run path's hooks (:class:`~.run_hooks.RunHooks`): :meth:`prepare_run` builds the CPU
    routing kernel before a run's first experience; :meth:`run_pictures` draws ``atom_usage.png``.

    ``fresh_atoms_at_eval`` (the MoRAM release's order, an option; default off): :meth:`settle`
    ends by appending the next task's ``atoms_per_task`` atoms (Kaiming keys, zero values), so
    every evaluation after a task runs with them in the routing -- they join the L2 norm, the
    top-k and the softmax while adding nothing -- and :meth:`grow` trains those same atoms on the
    next task instead of appending others. The release calls ``increment_task()`` (freeze, then
    re-initialise the new atoms) in ``save_model`` before each round is saved and evaluated
    (``TRACE/model/Regular/MoRAM.py``; ``inference/infer_part.py`` loads that saved round). With
    the text family's ``new_value_scale`` (the release's ``lora_alpha / r = 2``) this is the
    release's evaluation: the atoms just trained read at half their training scale, beside r
    fresh ones. The history's ``bank_size`` / ``bank_checksum`` describe the bank before the
    fresh atoms are added.

    Attributes:
        history: one entry per trained experience: ``{"experience", "domain", "layers":
            {name: {"mass", "hits", "atom_task", "dropped", "bank_size", "bank_checksum"}}}``.
            ``mass`` / ``hits`` / ``atom_task`` describe the bank the task trained with (before
            pruning; CPU tensors), ``dropped`` the positions in that bank that pruning removed
            (empty without pruning), ``bank_size`` and ``bank_checksum`` (:func:`bank_checksum`)
            the bank the layer keeps after the task. Enough to redraw the paper's figures from
            the final bank alone (frozen atoms never change).
        pruned: atoms dropped per experience, ``{name: count}``.
        layer_options: ``{name: layer.options}`` of the layers it grows (how to rebuild them).
    """

    layer_type = MoRAMLinear
    #: the files it adds to a run folder (:attr:`RunHooks.run_files`; drawn from :meth:`run_pictures`)
    run_files = ("atom_usage.png",)

    def __init__(self, prune_mass: Optional[float] = None, record: bool = True,
                 fresh_atoms_at_eval: bool = False) -> None:
        super().__init__()
        if prune_mass is not None and not 0 < prune_mass <= 1:
            raise ValueError(f"prune_mass must be in (0, 1] or None, got {prune_mass}")
        if not isinstance(fresh_atoms_at_eval, bool):
            raise ValueError(f"fresh_atoms_at_eval must be True (the release's order) or False, got "
                             f"{fresh_atoms_at_eval!r}")
        self.prune_mass = prune_mass
        self.fresh_atoms_at_eval = fresh_atoms_at_eval
        self.record = record or prune_mass is not None
        self.history: List[dict] = []
        self.pruned: List[Dict[str, int]] = []
        self.layer_options: Dict[str, dict] = {}

    def grow(self, strategy) -> None:
        for layer in self.layers(strategy.model).values():
            if not (self.fresh_atoms_at_eval and layer.num_trainable):  # the fresh atoms of settle() train now
                layer.expand()
            layer.reset_stats()
            if self.record:
                layer.start_recording()

    def settle(self, strategy) -> None:
        layers = self.layers(strategy.model)
        reduce_recorded_stats(layers.values())  # a data-parallel process recorded its share
        snapshot = {}
        for name, layer in layers.items():
            layer.stop_recording()
            layer.freeze()
            snapshot[name] = {"mass": layer.atom_mass.detach().cpu().clone(),
                              "hits": layer.atom_hits.detach().cpu().clone(),
                              "atom_task": layer.atom_task.detach().cpu().clone()}
        if self.prune_mass is not None:
            dropped = {name: layer.prune(self.prune_mass).detach().cpu() for name, layer in layers.items()}
            self.pruned.append({name: int(index.numel()) for name, index in dropped.items()})
        for name, layer in layers.items():
            stats = snapshot[name]
            stats["dropped"] = dropped[name] if self.prune_mass is not None else torch.zeros(0, dtype=torch.long)
            stats["bank_size"] = layer.num_atoms
            stats["bank_checksum"] = bank_checksum(layer)
        self.layer_options = {name: dict(layer.options) for name, layer in layers.items()}
        self.history.append({"experience": strategy.experience.current_experience,
                             "domain": getattr(strategy.experience, "domain", None),
                             "layers": snapshot})
        if self.fresh_atoms_at_eval:  # the next task's atoms, in every evaluation from now on
            for layer in layers.values():
                layer.expand()

    def prepare_run(self, strategy) -> None:
        """Before a run's first experience, outside every timed step: on the CPU, build MoRAM's
        routing kernel (first use on this machine: about a minute; MoRAM layers never build it
        inside a forward and take the PyTorch path until it is built)."""
        if torch.device(strategy.device).type == "cpu" and find_layers(strategy.model, self.layer_type):
            routing_kernel.load()

    def run_pictures(self) -> Dict[str, dict]:
        """``{"atom_usage.png": heatmap}`` after a task ({} before): per layer (rows), the share of
        the activation mass recorded on the last task taken by each task's atoms (columns), as the
        keyword arguments of a heatmap (values, row and column labels, title, scale)."""
        if not self.history:
            return {}
        return {"atom_usage.png": atom_usage(self.history[-1])}

    def state_dict(self) -> dict:
        return {"history": self.history, "pruned": self.pruned, "layer_options": self.layer_options,
                "prune_mass": self.prune_mass}

    def load_state_dict(self, state: dict) -> None:
        self.history, self.pruned = list(state["history"]), list(state["pruned"])
        self.layer_options = dict(state.get("layer_options", {}))  # absent in older checkpoints


__all__ = ["MoRAMPlugin", "atom_usage", "bank_checksum", "reduce_recorded_stats"]
