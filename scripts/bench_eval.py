"""Images per second of an X-TAIL-sized evaluation: the evaluation path before and after issue 15.

X-TAIL evaluates every domain's test set after every task, in the label space of all 1,100
classes: 89,913 test images (the ten domains' test splits, /work/shared/reference/datasets.md),
ten times per run. This script builds a benchmark of that shape from random tensors (``--scale``
shrinks every test set, at least one image each) and evaluates a zero-shot CLIP model on it,
timed round-robin in one process (medians of ``--repeats``):

* before -- the evaluation loop as it was (Avalanche's ``torch.no_grad()``, eval batch = the
  training batch, every image through the tower every time);
* after  -- :class:`~moram_avalanche.strategies.clip.loop.CLIPStrategy`'s loop now
  (``torch.inference_mode()``, eval batch 4 x the training batch), first evaluation of a tower;
* replay -- the same strategy evaluating again with an unchanged image tower: the cached image
  features are replayed (what zero-shot CLIP, text-only adapters and frozen image towers get
  after every task).

Every evaluation's per-image predictions and top logits are compared with the "before" path.
Random tensors in memory: decoding (and data workers) are not part of these figures.

    python scripts/bench_eval.py --model tiny                  # the demo's tiny CLIP, full size
    python scripts/bench_eval.py --model ViT-B-16 --scale 0.0005 --classes 10
"""

from __future__ import annotations

import argparse
import os
import statistics
import warnings

import open_clip
import torch
from avalanche.core import SupervisedPlugin
from avalanche.training.plugins import EvaluationPlugin
from bench_timing import add_timing_options, apply_threads
from tqdm.auto import tqdm

from moram_avalanche.benchmarks import Domain, clip_benchmark
from moram_avalanche.experiments.clip.demo import TINY_CONFIG
from moram_avalanche.strategies import ZeroShot
from moram_avalanche.utils.clock import now

warnings.filterwarnings("ignore", message="No loggers specified")

#: X-TAIL's domains: (classes, test images)
XTAIL_TEST = {"Aircraft": (100, 3333), "Caltech101": (100, 2465), "DTD": (47, 1692),
              "EuroSAT": (10, 8100), "Flowers": (102, 2463), "Food": (101, 30300),
              "MNIST": (10, 10000), "OxfordPet": (37, 3669), "StanfordCars": (196, 8041),
              "SUN397": (397, 19850)}


class PoolDomain(torch.utils.data.Dataset):
    """``size`` images drawn (by index) from a shared pool of random tensors."""

    def __init__(self, pool, size, classes):
        self.pool, self.size, self.classes = pool, size, classes
        self.targets = [i % classes for i in range(size)]

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        return self.pool[index % len(self.pool)], self.targets[index]


class Predictions(SupervisedPlugin):
    """Per-image argmax and top logit of the last evaluation."""

    def before_eval(self, strategy, **kwargs):
        self.top, self.arg = [], []

    def after_eval_iteration(self, strategy, **kwargs):
        values, indices = strategy.mb_output.float().max(dim=1)
        self.top.append(values.clone())
        self.arg.append(indices.clone())

    def result(self):
        return torch.cat(self.top), torch.cat(self.arg)


class BeforeIssue15(ZeroShot):
    """The evaluation loop before issue 15 (Avalanche's no_grad, no feature cache)."""

    def eval_epoch(self, **kwargs):
        for self.mbatch in self.dataloader:  # noqa: B020 - Avalanche's templates' own idiom
            self._unpack_minibatch()
            self._before_eval_iteration(**kwargs)
            self._before_eval_forward(**kwargs)
            with self.autocast():
                self.mb_output = self.forward()
            self._after_eval_forward(**kwargs)
            self.loss = self.criterion()
            self._after_eval_iteration(**kwargs)


def build(args):
    if args.model == "tiny":
        model = open_clip.CLIP(**TINY_CONFIG)
        size = TINY_CONFIG["vision_cfg"]["image_size"]
        tokenizer_length = TINY_CONFIG["text_cfg"]["context_length"]
    else:
        model = open_clip.create_model(args.model, pretrained=None)
        size, tokenizer_length = model.visual.image_size[0], model.context_length
    simple = open_clip.tokenizer.SimpleTokenizer(context_length=tokenizer_length)
    pool = torch.randn(512, 3, size, size)
    domains, tests = [], []
    for name, (classes, images) in XTAIL_TEST.items():
        classes = args.classes or classes
        domains.append(Domain(name, tuple(f"{name} class {c}" for c in range(classes)), "a photo of a {}."))
        tests.append(PoolDomain(pool, max(1, round(images * args.scale)), classes))
    benchmark = clip_benchmark(domains, tests, tests, label_space="all")
    return model.eval(), (lambda texts: simple(texts)), benchmark


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="tiny", help="'tiny' (the demo's) or an open_clip name")
    parser.add_argument("--scale", type=float, default=1.0, help="share of each test set")
    parser.add_argument("--classes", type=int, default=None, help="classes per domain (default: X-TAIL's)")
    parser.add_argument("--batch-size", type=int, default=64, help="training batch size")
    add_timing_options(parser)
    args = parser.parse_args()
    apply_threads(args)
    torch.manual_seed(0)
    model, tokenizer, benchmark = build(args)
    total = sum(len(e.dataset) for e in benchmark.test_stream)
    spies = {"before": Predictions(), "after": Predictions()}
    common = dict(model=model, tokenizer=tokenizer, progress=False, train_mb_size=args.batch_size,
                  device=args.device)
    before = BeforeIssue15(eval_mb_size=args.batch_size, plugins=[spies["before"]],
                           evaluator=EvaluationPlugin(loggers=[]), **common)
    after = ZeroShot(plugins=[spies["after"]], evaluator=EvaluationPlugin(loggers=[]), **common)
    for strategy in (before, after):  # warm-up on one domain: embeds the 1,100 class prompts once
        strategy.eval(benchmark.test_stream[:1])
    where = torch.cuda.get_device_name() if str(args.device).startswith("cuda") else \
        f"{torch.get_num_threads()} CPU threads"
    print(f"torch {torch.__version__}, {where}, load {os.getloadavg()[0]:.1f}; "
          f"{args.model}, {total} test images in {len(XTAIL_TEST)} domains, "
          f"{sum(len(d.classnames) for d in benchmark.test_stream[0].domains)} classes; "
          f"eval batch before {before.eval_mb_size}, after {after.eval_mb_size}; median of {args.repeats}")
    samples = {"before": [], "after": [], "replay": []}
    worst = {"after": 0.0, "replay": 0.0}
    flips = {"after": 0, "replay": 0}
    for _ in tqdm(range(args.repeats), desc="rounds", leave=False):
        runs = (("before", before, False), ("after", after, True), ("replay", after, False))
        for name, strategy, fresh in runs:
            if fresh:
                strategy.image_cache.clear()  # a tower evaluated for the first time
            start = now(args.device)
            strategy.eval(benchmark.test_stream)
            samples[name].append(now(args.device) - start)
            result = spies["before" if name == "before" else "after"].result()
            if name == "before":
                reference = result
            else:
                worst[name] = max(worst[name], float((result[0] - reference[0]).abs().max()))
                flips[name] += int((result[1] != reference[1]).sum())
    rate = {name: total / statistics.median(values) for name, values in samples.items()}
    for name in samples:
        extra = "" if name == "before" else (f"  ({rate[name] / rate['before']:.2f}x before; top logit "
                                             f"max|diff| {worst[name]:.1e}, {flips[name]} changed predictions)")
        print(f"{name:7s} {rate[name]:9.3g} images/s{extra}")


if __name__ == "__main__":
    main()
