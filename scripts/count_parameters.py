"""Trainable parameters per task and model growth of every strategy, on a random-init ViT-B/16.

A thin front to ``moram-avalanche cost --params-only --tasks 1``
(:func:`moram_avalanche.experiments.clip.cost.measure_cost` with ``timing=False``): each strategy is
built on a fresh open_clip ``ViT-B-16`` (random weights: counts do not depend on them) and
trained for 0 iterations on one experience of random images, so its plugins do their
experience-start work (MoRAM expands its atoms, MoE-Adapters adds a router, InfLoRA designs its
projections). Printed per strategy: the parameters that require grad during the experience
(what the optimizer trains) and the parameters + buffers the model holds on top of CLIP
afterwards (teachers and weight copies that plugins hold are not in the model). The method
reference gives MoRAM 4.4 M trainable parameters per task on X-TAIL.

Run: python scripts/count_parameters.py [strategy ...]   (about a minute per strategy on a CPU)
"""

import sys
import warnings

warnings.filterwarnings("ignore")  # before Avalanche's import: its qpsolvers warning

from moram_avalanche.experiments.clip.cost import CostOptions, measure_cost  # noqa: E402
from moram_avalanche.strategies import STRATEGIES  # noqa: E402


def main(names) -> None:
    options = CostOptions(model="ViT-B-16", strategies=names, tasks=(1,), batch_size=6, classes=2,
                          eval_images=6, timing=False)
    results = measure_cost(options, progress=False)
    print(f"{'strategy':24s} {'trainable / task (M)':>22s} {'added to the model (M)':>24s}")
    for row in results["strategies"]:
        first = row["tasks"][0]
        print(f"{row['strategy']:24s} {first['trainable'] / 1e6:22.2f} {first['added'] / 1e6:24.2f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or [n for n in STRATEGIES if n != "zeroshot"])
