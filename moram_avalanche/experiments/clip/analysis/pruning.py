"""What pruning kept and saved, per task and layer (the paper: about 30% of the storage saved).

With ``prune_mass`` (:class:`~moram_avalanche.strategies.plugins.moram.MoRAMPlugin`), after each
task every layer keeps the smallest set of the task's new atoms that covers that share of the
mass recorded while training the task, and drops the rest. Storage is counted in stored
numbers: an atom holds a key (``d_in``) and a value (``d_out``), plus a router row (``d_in``) in
the external-router ablation. Without pruning, the same rule applied to the recorded masses
says what 99% pruning *would* have kept (:func:`pruning_rows` with ``hypothetical=True``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List

from .mass import PAPER_SHARE, atoms_for_mass
from .records import RunRecord, parse_layer_name


@dataclass
class PruneRow:
    """One task of one layer."""

    task: int  # 0-based
    layer: str
    label: str
    added: int  # atoms the task added
    kept: int  # of them, kept after pruning
    per_atom: int  # stored numbers per atom

    @property
    def dropped(self) -> int:
        return self.added - self.kept

    @property
    def stored(self) -> int:
        return self.kept * self.per_atom

    @property
    def saved(self) -> int:
        return self.dropped * self.per_atom


def pruned(record: RunRecord) -> bool:
    """Whether the run pruned (the plugin kept a record of dropped atoms)."""
    return bool(record.pruned)


def pruning_rows(record: RunRecord, hypothetical: bool = False,
                 share: float = PAPER_SHARE) -> List[PruneRow]:
    """Per task and layer, the atoms added and kept.

    ``hypothetical=False``: what the run's pruning did (from what it recorded as dropped).
    ``hypothetical=True``: what keeping ``share`` of each task's recorded mass among its new
    atoms would keep (the rule of :meth:`~moram_avalanche.layers.moram.layer.MoRAMLinear.prune`).
    """
    if not hypothetical and not pruned(record):
        raise ValueError(f"{record.log_dir} was not pruned (prune_mass=None); pass hypothetical=True "
                         "for what pruning would have kept")
    rows = []
    for task, entry in enumerate(record.history):
        for name, stats in entry["layers"].items():
            new = stats["atom_task"] == task
            added = int(new.sum())
            if hypothetical:
                mass = stats["mass"][new].double().numpy()
                if mass.sum() <= 0:
                    raise ValueError(f"{record.log_dir}: no activation mass recorded for {name} in task "
                                     f"{task + 1} (record_activations=False?)")
                kept = atoms_for_mass(mass, share)
            elif "dropped" in stats:
                kept = added - int(stats["dropped"].numel())
            else:
                kept = added - int(record.pruned[task].get(name, 0))
            rows.append(PruneRow(task, name, parse_layer_name(name).label, added, kept,
                                 record.parameters_per_atom(name)))
    return rows


def per_task(rows: List[PruneRow]) -> List[Dict[str, float]]:
    """Totals per task: atoms added and kept, stored numbers saved and the share saved."""
    tasks = sorted({row.task for row in rows})
    totals = []
    for task in tasks:
        part = [row for row in rows if row.task == task]
        added = sum(row.added * row.per_atom for row in part)
        saved = sum(row.saved for row in part)
        totals.append({"task": task, "atoms_added": sum(row.added for row in part),
                       "atoms_kept": sum(row.kept for row in part), "parameters_added": added,
                       "parameters_saved": saved, "saved_share": saved / added if added else 0.0})
    return totals


def overall_saved_share(rows: List[PruneRow]) -> float:
    """Stored numbers saved over all tasks and layers, as a share of those added (paper: ~0.3)."""
    added = sum(row.added * row.per_atom for row in rows)
    return sum(row.saved for row in rows) / added if added else 0.0


__all__ = ["PruneRow", "overall_saved_share", "per_task", "pruned", "pruning_rows"]
