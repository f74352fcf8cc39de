"""Small modules the layer and peft tests build again and again: a MoRAM layer grown over a few
tasks, and two linears in float64 for peft's adapters."""

import torch
from torch import nn

from moram_avalanche.layers.moram.layer import MoRAMLinear


def grown(d_in=24, d_out=20, tasks=4, per_task=6, topk=4, frozen=True, dtype=torch.float32, seed=0):
    """A ``MoRAMLinear`` over a fresh ``nn.Linear`` in ``dtype``, expanded ``tasks`` times (each task's
    values drawn N(0, 0.5^2) so that the atoms' term is not zero), frozen unless ``frozen`` is False."""
    torch.manual_seed(seed)
    layer = MoRAMLinear(nn.Linear(d_in, d_out).to(dtype), atoms_per_task=per_task, topk=topk,
                        temperature=0.05, threshold=0.2)
    for _ in range(tasks):
        layer.expand()
        with torch.no_grad():
            layer.new_values.normal_(std=0.5)
    if frozen:
        layer.freeze()
    return layer


class TwoLinears(nn.Module):
    """Two linear layers in float64 (exact comparisons)."""

    def __init__(self, seed=0):
        super().__init__()
        torch.manual_seed(seed)
        self.lin0 = nn.Linear(10, 12).double()
        self.lin1 = nn.Linear(12, 4).double()

    def forward(self, x):
        return self.lin1(torch.relu(self.lin0(x)))


__all__ = ["TwoLinears", "grown"]
