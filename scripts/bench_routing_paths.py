"""Time one MoRAMLinear forward+backward: the fused method path vs the ablations' plain path.

ViT-B/16-like shapes (d = 768, 2048 tokens) after 10 tasks of 16 atoms, top-k 16, CPU.
Run: python scripts/bench_routing_paths.py [threads]; prints each path's time and its ratio to
the fused path measured in the same process.
"""

import sys

import torch
from torch import nn

from moram_avalanche.layers.moram.paths import cpu_kernel as routing_kernel
from moram_avalanche.layers.moram.variants import moram_layer
from moram_avalanche.utils.clock import now


def main(threads: int = 1) -> None:
    torch.manual_seed(0)
    torch.set_num_threads(threads)
    routing_kernel.load()  # the method's CPU routing kernel, built before anything is timed
    x = torch.randn(2048, 768)
    baseline = None
    for name, options in [("fused (method)", {}), ("router (plain)", {"router": True}),
                          ("load-balance (plain)", {"load_balance": True})]:
        layer = moram_layer(nn.Linear(768, 768), atoms_per_task=16, topk=16, **options).train()
        for _ in range(10):
            layer.expand()
        with torch.no_grad():
            layer.new_values.normal_()
        times = []
        for _ in range(6):
            start = now()
            layer(x).sum().backward()
            if hasattr(layer, "pop_balance_terms"):
                layer.pop_balance_terms()
            times.append(now() - start)
        median = sorted(times)[len(times) // 2]
        baseline = baseline or median
        print(f"{name:22s} fwd+bwd {1000 * median:.1f} ms (median of 6), "
              f"{median / baseline:.2f}x the fused path")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
