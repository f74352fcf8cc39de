"""The model as it was after any task, rebuilt from the final atom banks.

Every task freezes the atoms it trained and only appends new ones; pruning drops atoms of the
task just trained and never touches older ones. So the bank a layer held after task ``t`` is
exactly the final bank's atoms of tasks ``<= t``, in order: :func:`bank_after` selects them, and
checks them against the size and fingerprint the MoRAMPlugin recorded after that task
(:func:`~moram_avalanche.strategies.plugins.moram.bank_checksum`), so a bank that changed after
its task is an error, never a silently wrong picture.
"""

from __future__ import annotations

import math
from typing import Dict

import torch
from torch import nn

from ....layers.base import find_layers, load_adapter_state_dict
from ....layers.moram.layer import MoRAMLinear
from .records import TRANSPOSED_BANKS, RunRecord


def bank_after(record: RunRecord, layer: str, task: int) -> Dict[str, torch.Tensor]:
    """The checkpoint entries of ``layer`` as they were after task ``task`` (0-based)."""
    if not 0 <= task < record.tasks:
        raise ValueError(f"task must be in 1..{record.tasks} (the tasks of this run), got {task + 1}")
    entries = record.banks[layer]
    keep = entries["atom_task"] <= task
    bank = {}
    for key, rows in entries.items():
        if key == "num_frozen":
            bank[key] = torch.tensor(int(keep.sum()))
        elif key in TRANSPOSED_BANKS:
            bank[key] = rows[:, keep]
        else:
            bank[key] = rows[keep]
    _check(record, layer, task, bank)
    return bank


def _check(record: RunRecord, layer: str, task: int, bank: Dict[str, torch.Tensor]) -> None:
    stats = record.history[task]["layers"][layer]
    if "bank_size" not in stats:
        return  # an older checkpoint: no fingerprint to check against
    size = int(bank["atom_task"].numel())
    checksum = float(bank["atom_keys"].double().sum() + bank["atom_values"].double().sum())
    if size != stats["bank_size"] or not math.isclose(checksum, stats["bank_checksum"],
                                                      rel_tol=1e-9, abs_tol=1e-9):
        raise ValueError(
            f"{record.log_dir}: the atoms of {layer} after task {task + 1} are not the final bank's "
            f"atoms of tasks <= {task + 1} ({size} atoms, checksum {checksum!r}; recorded "
            f"{stats['bank_size']} atoms, {stats['bank_checksum']!r}): frozen atoms changed after "
            "their task, so the run's intermediate models cannot be rebuilt")


def check_model_layers(model: nn.Module, record: RunRecord) -> Dict[str, MoRAMLinear]:
    """The model's MoRAM layers, which must be the run's (same names)."""
    layers = find_layers(model, MoRAMLinear)
    if set(layers) != set(record.banks):
        missing, extra = sorted(set(record.banks) - set(layers)), sorted(set(layers) - set(record.banks))
        raise ValueError(f"the model's MoRAM layers are not the run's: {len(missing)} of the run missing "
                         f"(e.g. {missing[:2]}), {len(extra)} not in the run (e.g. {extra[:2]}); build "
                         "the model with the encoders and targets of the run")
    return layers


def install_banks(model: nn.Module, record: RunRecord, task: int) -> None:
    """Put into ``model``'s MoRAM layers the banks they held after task ``task`` (0-based)."""
    check_model_layers(model, record)
    state = {f"{layer}.{key}": value for layer in record.banks
             for key, value in bank_after(record, layer, task).items()}
    load_adapter_state_dict(model, state)


__all__ = ["bank_after", "check_model_layers", "install_banks"]
