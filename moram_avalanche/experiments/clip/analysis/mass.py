"""How many atoms carry the activation mass (paper Figs. 9-11) -- from the run's records alone.

While a task trains, every MoRAM layer adds each token's mixture weights to its atoms'
activation mass (:meth:`~moram_avalanche.layers.moram.layer.MoRAMLinear.start_recording`;
:class:`~moram_avalanche.strategies.plugins.moram.MoRAMPlugin` keeps it per task). The
*cumulative* mass of an atom is the sum of what it received over every task it took part in
(the tasks after the one that added it included: old atoms keep being routed to). After all
tasks, the count of a layer is the smallest number of its atoms whose cumulative masses reach
99% of the layer's total (atoms sorted by mass, largest first): the paper's "number of atoms
needed to capture 99% of the cumulative activation mass". Atoms dropped by pruning are not in
the final bank and not counted (their mass is part of the pruning section instead).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

import numpy as np

from .records import RunRecord, parse_layer_name

#: the share of the mass the paper's figures and pruning keep
PAPER_SHARE = 0.99


def atoms_for_mass(mass, share: float = PAPER_SHARE) -> int:
    """The smallest number of atoms whose masses sum to at least ``share`` of the total.

    0 when nothing was recorded (total 0).
    """
    if not 0 < share <= 1:
        raise ValueError(f"share must be in (0, 1], got {share}")
    mass = np.sort(np.asarray(mass, dtype=np.float64))[::-1]
    total = mass.sum()
    if total <= 0:
        return 0
    cumulative = np.cumsum(mass)
    return int(min(np.searchsorted(cumulative, share * total) + 1, mass.size))


def cumulative_curve(mass) -> np.ndarray:
    """Share of the total mass held by the ``n`` largest atoms, for ``n = 1..R``."""
    mass = np.sort(np.asarray(mass, dtype=np.float64))[::-1]
    total = mass.sum()
    return np.cumsum(mass) / total if total > 0 else np.zeros_like(mass)


@dataclass
class AtomMass:
    """The cumulative mass of every atom of a layer's final bank, in bank order."""

    layer: str
    mass: np.ndarray  # [R]
    atom_task: np.ndarray  # [R] task (0-based) that added each atom
    dropped_mass: float  # recorded mass of atoms that pruning removed


def final_bank_mass(record: RunRecord, layer: str, until: Optional[int] = None) -> AtomMass:
    """Cumulative activation mass of each atom that layer ``layer`` holds after task ``until``
    (default: the last), summed over tasks ``0..until``.

    Follows every atom through the tasks: the bank a task trained with is the bank kept after
    the previous task followed by the task's new atoms, and ``dropped`` says which of them
    pruning removed (:class:`~moram_avalanche.strategies.plugins.moram.MoRAMPlugin` history).
    """
    until = record.tasks - 1 if until is None else until
    alive: List[int] = []  # atom ids of the bank kept after the previous task
    totals: dict = {}
    owner: dict = {}
    dropped_mass = 0.0
    next_id = 0
    for task, entry in enumerate(record.history[: until + 1]):
        stats = entry["layers"][layer]
        mass = stats["mass"].double().numpy()
        new = int((stats["atom_task"] == stats["atom_task"].max()).sum()) if len(mass) else 0
        if len(mass) != len(alive) + new:
            raise ValueError(f"{record.log_dir}: the records of {layer} do not chain at task {task + 1} "
                             f"({len(mass)} atoms recorded, {len(alive)} kept before + {new} new)")
        ids = alive + list(range(next_id, next_id + new))
        next_id += new
        for atom, value in zip(ids, mass):
            totals[atom] = totals.get(atom, 0.0) + float(value)
        for atom in ids[len(alive):]:
            owner[atom] = task
        dropped = set(_dropped(record, task, layer, stats))
        dropped_mass += sum(totals[ids[i]] for i in dropped)
        alive = [atom for i, atom in enumerate(ids) if i not in dropped]
    result = AtomMass(layer, np.array([totals[a] for a in alive]), np.array([owner[a] for a in alive],
                                                                         dtype=np.int64), dropped_mass)
    final = record.banks[layer]["atom_task"].numpy()
    if until == record.tasks - 1 and not np.array_equal(result.atom_task, final):
        raise ValueError(f"{record.log_dir}: the records of {layer} end with {len(alive)} atoms but the "
                         f"checkpoint holds {len(final)}; they were not written by the same run")
    return result


def _dropped(record: RunRecord, task: int, layer: str, stats: dict) -> List[int]:
    """Positions (in the bank task ``task`` trained with) that pruning removed after it."""
    if "dropped" in stats:
        return [int(i) for i in stats["dropped"]]
    count = record.pruned[task].get(layer, 0) if task < len(record.pruned) else 0
    if count:
        raise ValueError(f"{record.log_dir} was pruned by a version that did not record which "
                         "atoms it dropped; the cumulative masses cannot be followed across tasks")
    return []


@dataclass
class MassCount:
    """One layer's row of the 99% figure."""

    layer: str
    label: str
    encoder: str
    block: int
    projection: str
    atoms: int  # in the final bank
    needed: int  # atoms carrying ``share`` of the cumulative mass
    total_mass: float


def mass_counts(record: RunRecord, share: float = PAPER_SHARE) -> List[MassCount]:
    """The 99% count of every layer after all tasks (:func:`final_bank_mass`, :func:`atoms_for_mass`)."""
    rows = []
    for name in record.banks:
        where = parse_layer_name(name)
        mass = final_bank_mass(record, name)
        rows.append(MassCount(name, where.label, where.encoder, where.block, where.projection,
                              len(mass.mass), atoms_for_mass(mass.mass, share), float(mass.mass.sum())))
    return rows


__all__ = ["AtomMass", "MassCount", "PAPER_SHARE", "atoms_for_mass", "cumulative_curve",
           "final_bank_mass", "mass_counts"]
