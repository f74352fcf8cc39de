"""What the benchmark scripts share to build the models they compare: copies that share the weights.

* :func:`sharing_copy` -- a copy of a model's modules that shares every parameter and buffer with
  it, so that several variants of one base model (plain, LoRA, MoRAM) hold one copy of its weights
  and can be timed round-robin in one process;
* :func:`frozen_copy` -- a sharing copy whose MoRAM banks are frozen: the layer an evaluation
  meets after a task ends (every atom in the frozen rows, nothing trainable to cast and join per
  call; :meth:`~moram_avalanche.layers.moram.bank.MoRAMBank.freeze`), while the original keeps its
  current task's atoms trainable for the training step.
"""

from __future__ import annotations

import copy

from torch import nn

from moram_avalanche.layers.base import find_layers
from moram_avalanche.layers.moram.layer import MoRAMLinear


def sharing_copy(model: nn.Module) -> nn.Module:
    """A copy of ``model``'s modules that shares every parameter and buffer with it (no weight is copied)."""
    memo = {id(tensor): tensor for tensor in [*model.parameters(), *model.buffers()]}
    return copy.deepcopy(model, memo)


def frozen_copy(model: nn.Module) -> nn.Module:
    """A :func:`sharing_copy` of ``model`` with every MoRAM bank frozen (module docstring); ``model``
    itself is unchanged (freezing replaces the copy's own buffers)."""
    frozen = sharing_copy(model)
    for layer in find_layers(frozen, MoRAMLinear).values():
        layer.freeze()
    return frozen


__all__ = ["frozen_copy", "sharing_copy"]
