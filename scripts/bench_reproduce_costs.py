"""Training and evaluation cost per image of each strategy of the paper's tables, relative to MoRAM.

The GPU-time estimates of docs/guides/reproducing.md for ``moram-avalanche reproduce`` scale the paper's measured
MoRAM cost (8.32 ms per training image, 2.07-2.52 ms per test image; ``tab:latency``) by these
ratios. Measured at real model size (random weights: timing only) on one synthetic domain of
``--classes`` classes (X-TAIL averages 110 per domain) with the strategies' paper settings,
at a batch of ``--batch`` images; each round builds every strategy afresh and trains one
experience, round-robin (interleaved), and the medians over the rounds are printed. Times are
the package's one timer's (``RunTime``: the training iterations after the first, and the
evaluation call, the device synchronised at each clock read). What needs a download, or trains
outside the timed iterations, is replaced by the stand-in that each strategy declares for timing
(``StrategyNeeds.cost``, as ``moram-avalanche cost`` does; MoE-Adapters: DDAS's AlexNet with
random weights, the same compute, and one autoencoder step).

Caveats: the ratios come from the device this runs on (a CPU here); on a GPU small operations
(top-k, routing) weigh differently. Per-iteration costs that do not scale with the batch (the
text tower on the class prompts, optimizer steps, weight copies) weigh more at a small batch
than at the paper's 64.

Run: python scripts/bench_reproduce_costs.py [--model ViT-B-16] [--batch 16] [--classes 110]
     [--iterations 3] [--rounds 3] [--test 64] [--threads N] [--device cpu]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import warnings

import torch

warnings.filterwarnings("ignore")

#: the strategies timed, and whether they train
STRATEGIES = ("moram", "zeroshot", "finetune-alone", "wiseft", "lwf", "zscl", "moe-adapters", "inflora",
              "moe-lora", "moram-external-router", "moram-load-balance")


def stream(classes: int, train: int, test: int, size: int):
    from moram_avalanche.benchmarks import Domain, clip_benchmark

    class Images(torch.utils.data.Dataset):
        def __init__(self, count, seed):
            generator = torch.Generator().manual_seed(seed)
            self.images = torch.randn(count, 3, size, size, generator=generator)
            self.targets = [i % classes for i in range(count)]

        def __len__(self):
            return len(self.targets)

        def __getitem__(self, index):
            return self.images[index], self.targets[index]

    domain = Domain("bench", tuple(f"class {i}" for i in range(classes)), "a photo of a {}.")
    return clip_benchmark([domain], [Images(train, 0)], [Images(test, 1)], label_space="all")


def options(name: str, iterations: int, batch: int, eval_transform) -> dict:
    """The strategy's paper settings at ``iterations`` per experience, with what it declares for
    offline timing (``StrategyNeeds.cost``: stand-ins of the same compute for downloads) last."""
    from moram_avalanche.benchmarks.images.reference_sets import synthetic_reference
    from moram_avalanche.experiments.clip.protocols import XTAIL_ORDER1
    from moram_avalanche.experiments.clip.recipes import paper_options, short_budget_options
    from moram_avalanche.strategies.registry import get_strategy

    needs = get_strategy(name).needs
    kwargs = paper_options(name, XTAIL_ORDER1)
    if needs.trains:
        kwargs.update(iterations=iterations, **short_budget_options(name, iterations))
    kwargs["train_mb_size"] = batch
    if needs.references:
        images, sentences = synthetic_reference(eval_transform, images=2 * batch, sentences=200)
        kwargs.update(needs.reference_arguments(images=images, sentences=sentences))
    kwargs.update(needs.cost_options())
    return kwargs


def measure(name, base, tokenizer, eval_transform, args):
    from avalanche.training.plugins import EvaluationPlugin

    from moram_avalanche.strategies.plugins.timing import RunTime
    from moram_avalanche.strategies.registry import get_strategy

    size = base.visual.image_size
    benchmark = stream(args.classes, args.batch * 2, args.test, size[0] if isinstance(size, tuple) else size)
    timer = RunTime(iterations=("train",), warmup=1)  # the first iteration is a warm-up
    strategy = get_strategy(name)(model=copy.deepcopy(base), tokenizer=tokenizer, device=args.device,
                                  progress=False, plugins=[timer],
                                  evaluator=EvaluationPlugin(loggers=[]),
                                  **options(name, args.iterations, args.batch, eval_transform))
    strategy.train(benchmark.train_stream[0])
    iterations = timer.iterations["train"].seconds
    train = statistics.median(iterations) / args.batch if iterations else float("nan")
    before = timer.eval_seconds
    strategy.eval(benchmark.test_stream)
    return train, (timer.eval_seconds - before) / args.test


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="ViT-B-16")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--classes", type=int, default=110)
    parser.add_argument("--iterations", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--test", type=int, default=64)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    from moram_avalanche.clip.load import load_clip

    torch.manual_seed(0)
    base, _, eval_transform, tokenizer = load_clip(args.model, pretrained=None)
    names = [n for n in args.strategies.split(",") if n]
    results = {name: [] for name in names}
    for round_ in range(args.rounds):
        for name in names:
            results[name].append(measure(name, base, tokenizer, eval_transform, args))
            print(f"round {round_ + 1}: {name} train {1000 * results[name][-1][0]:.1f} ms/image, "
                  f"eval {1000 * results[name][-1][1]:.1f} ms/image", flush=True)
    train_ref = statistics.median(t for t, _ in results["moram"])
    eval_ref = statistics.median(e for _, e in results["moram"])
    print(f"\n{args.model}, batch {args.batch}, {args.classes} classes, {args.device}, "
          f"{torch.get_num_threads()} threads; medians of {args.rounds} interleaved rounds")
    print("| strategy | train ms/image | x MoRAM | eval ms/image | x MoRAM |\n|---|---|---|---|---|")
    for name in names:
        train = statistics.median(t for t, _ in results[name])
        test = statistics.median(e for _, e in results[name])
        print(f"| {name} | {1000 * train:.1f} | {train / train_ref:.2f} | {1000 * test:.1f} | "
              f"{test / eval_ref:.2f} |")


if __name__ == "__main__":
    main()
