"""Small modules the layer and peft tests build again and again: a MoRAM layer grown over a few
tasks (and its output by the naive float64 layer), and two linears in float64 for peft's adapters."""

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


def naive_of(layer, x):
    """Steps 1-6 by the naive float64 layer (``naive_moram``) with ``layer``'s base, atoms (the trainable
    values times ``new_value_scale``) and mode, for ``x`` ``[..., in_features]``."""
    from moram_avalanche.layers.moram.naive import naive_moram

    base = layer.base
    values = layer.values.double().clone()
    values[:, layer.num_frozen:] *= layer.new_value_scale
    out = naive_moram(x.reshape(-1, layer.in_features).double(), base.weight.double(),
                      None if base.bias is None else base.bias.double(), [layer.keys.double()], [values],
                      topk=layer.effective_topk, temperature=layer.temperature, threshold=layer.threshold,
                      training=layer.training)
    return out.reshape(*x.shape[:-1], layer.out_features)


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
