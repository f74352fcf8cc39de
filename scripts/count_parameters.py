"""Trainable parameters per task and model growth of every strategy, on a random-init ViT-B/16.

Each strategy is built on a fresh open_clip ``ViT-B-16`` (random weights: counts do not depend
on them) and trained for 0 iterations on one tiny synthetic experience, so its plugins do
their experience-start work (MoRAM expands its atoms, MoE-Adapters adds a router, InfLoRA
designs its projections). Printed per strategy: the parameters that require grad during the
experience (what the optimizer trains) and the parameters + buffers the model holds on top
of CLIP afterwards (teachers and weight copies that plugins hold are not in the model). The method reference gives MoRAM 4.4 M trainable parameters per task on
X-TAIL; the first row checks that count.

Run: python scripts/count_parameters.py [strategy ...]   (about a minute per strategy on a CPU)
"""

import logging
import sys
import warnings

warnings.filterwarnings("ignore")  # before Avalanche's import: its qpsolvers warning

import open_clip  # noqa: E402
import torch  # noqa: E402
from avalanche.core import SupervisedPlugin  # noqa: E402
from avalanche.training.plugins import EvaluationPlugin  # noqa: E402

from moram_avalanche.benchmarks.synthetic import synthetic  # noqa: E402
from moram_avalanche.experiments.metrics import AccuracyMatrix  # noqa: E402
from moram_avalanche.strategies import STRATEGIES, get_strategy  # noqa: E402

logging.getLogger().setLevel(logging.ERROR)  # open_clip warns that the weights are random

#: strategy-specific arguments the count needs (no AlexNet download, no reference data)
OPTIONS = {"moe-adapters": {"reference_images": "none", "feature_extractor": torch.nn.AvgPool2d(16)},
           "zscl": {"reference_images": torch.utils.data.TensorDataset(torch.randn(2, 3, 224, 224)),
                    "reference_sentences": ["a photo."]}}


class TrainableCount(SupervisedPlugin):
    """Counts the parameters that require grad when the training epoch starts."""

    def before_training_epoch(self, strategy, **kwargs):
        self.count = sum(p.numel() for p in strategy.model.parameters() if p.requires_grad)


def held(model) -> int:
    return sum(t.numel() for t in [*model.parameters(), *model.buffers()])


def count(name: str):
    torch.manual_seed(0)
    model, _, transform = open_clip.create_model_and_transforms("ViT-B-16", pretrained=None)
    tokenizer = open_clip.get_tokenizer("ViT-B-16")
    clip_size = held(model)
    bench = synthetic(("shapes",), train_size=6, test_size=6, train_transform=transform,
                      eval_transform=transform)
    counter = TrainableCount()
    strategy = get_strategy(name)(model=model, tokenizer=tokenizer, iterations=0, train_mb_size=6,
                                  progress=False, plugins=[counter],
                                  evaluator=EvaluationPlugin(AccuracyMatrix(), loggers=[]),
                                  **OPTIONS.get(name, {}))
    strategy.train(bench.train_stream[0])
    return counter.count, held(model) - clip_size


def main(names) -> None:
    print(f"{'strategy':24s} {'trainable / task (M)':>22s} {'added to the model (M)':>24s}")
    for name in names:
        trainable, extra = count(name)
        print(f"{name:24s} {trainable / 1e6:22.2f} {extra / 1e6:24.2f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:] or [n for n in STRATEGIES if n != "zeroshot"])
