"""Hand-written gates for the MoE-Adapters tests (imported by tests/layers and tests/clip)."""

import torch


def naive_top2(x0, weight):
    """Gates by hand: the two largest logits, softmax over them, zeros elsewhere."""
    logits = (x0 @ weight).tolist()
    gates = torch.zeros(len(logits), weight.shape[1], dtype=torch.float64)
    for row, values in enumerate(logits):
        order = sorted(range(len(values)), key=lambda e: -values[e])[:2]
        a, b = values[order[0]], values[order[1]]
        ea, eb = 1.0, torch.exp(torch.tensor(b - a, dtype=torch.float64)).item()
        gates[row, order[0]], gates[row, order[1]] = ea / (ea + eb), eb / (ea + eb)
    return gates
