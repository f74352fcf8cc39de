"""The paper's cost table: ms/image of training and inference after 1 / 5 / 10 tasks, per method.

MoRAM reports (X-TAIL, ViT-B/16, GPU) inference latency per image CLIP 1.95 ms, MoRAM 2.07 /
2.27 / 2.52 ms after tasks 1 / 5 / 10. This script measures the same quantities through the
strategies themselves (their growth, routing and merging as in a real run), on a random-init
model and random images (speed does not depend on the weights):

* for each method, a fresh model and a 10-domain synthetic stream (``--classes`` per domain,
  X-TAIL's "all" label space);
* training: every task is trained (``--train-steps`` steps on the tasks that are timed, one
  step on the others); the time of one training iteration (forward, loss, backward,
  optimizer step; synchronised on CUDA) per image, median over the timed steps;
* inference: ``--eval-repeats`` evaluations of one test set of ``--eval-images`` images
  (image feature replay off); the time of one evaluation minibatch (forward and logits,
  synchronised) per image, median over every minibatch of every repeat.

Methods: ``zeroshot`` (plain CLIP), ``moram``, ``moe-adapters`` (DDAS with a seeded random
convolution as its feature extractor, ``--ae-steps`` autoencoder steps: the ImageNet AlexNet
cannot be fetched offline), ``inflora``.

    python scripts/bench_latency.py --device cuda --out latency.md            # the paper's setting
    python scripts/bench_latency.py --model tiny --tasks 1 2 --train-steps 2  # smoke test (CPU)
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from pathlib import Path

import open_clip
import torch
from avalanche.core import SupervisedPlugin
from avalanche.training.plugins import EvaluationPlugin

from moram_avalanche.algorithms.ddas import random_conv_features
from moram_avalanche.benchmarks import Domain, clip_benchmark
from moram_avalanche.experiments.demo import TINY_CONFIG
from moram_avalanche.strategies import get_strategy

warnings.filterwarnings("ignore", message="No loggers specified")
METHODS = ("zeroshot", "moram", "moe-adapters", "inflora")


class IterationTimer(SupervisedPlugin):
    """Wall time of every training and evaluation iteration (synchronised on CUDA)."""

    def __init__(self, device):
        super().__init__()
        self.cuda = torch.device(device).type == "cuda"
        self.train, self.eval = [], []
        self._start = None

    def _now(self):
        if self.cuda:
            torch.cuda.synchronize()
        return time.perf_counter()

    def before_training_iteration(self, strategy, **kwargs):
        self._start = self._now()

    def after_training_iteration(self, strategy, **kwargs):
        self.train.append((self._now() - self._start) / len(strategy.mb_y))

    def before_eval_forward(self, strategy, **kwargs):
        self._start = self._now()

    def after_eval_forward(self, strategy, **kwargs):
        self.eval.append((self._now() - self._start) / len(strategy.mb_y))


class RandomImages(torch.utils.data.Dataset):
    def __init__(self, size, classes, resolution, seed):
        generator = torch.Generator().manual_seed(seed)
        self.images = torch.randn(min(size, 64), 3, resolution, resolution, generator=generator)
        self.size = size
        self.targets = [i % classes for i in range(size)]

    def __len__(self):
        return self.size

    def __getitem__(self, index):
        return self.images[index % len(self.images)], self.targets[index]


def build_model(name):
    if name == "tiny":
        simple = open_clip.tokenizer.SimpleTokenizer(context_length=TINY_CONFIG["text_cfg"]["context_length"])
        return open_clip.CLIP(**TINY_CONFIG), (lambda texts: simple(texts)), TINY_CONFIG["vision_cfg"]["image_size"]
    model = open_clip.create_model(name, pretrained=None)
    return model, open_clip.get_tokenizer(name), model.visual.image_size[0]


def method_options(name, args):
    if name == "moe-adapters":
        return {"reference_images": "none", "feature_extractor": random_conv_features(0, patch=16),
                "ae_iterations": args.ae_steps, "ae_reference_iterations": args.ae_steps}
    return {}


def measure(name, args):
    """``{tasks: (train ms/image or None, inference ms/image)}`` of method ``name``."""
    torch.manual_seed(0)
    model, tokenizer, resolution = build_model(args.model)
    domains = [Domain(f"domain{d}", tuple(f"thing {d}-{c}" for c in range(args.classes)), "a photo of a {}.")
               for d in range(max(args.tasks))]
    train = [RandomImages(args.batch, args.classes, resolution, d) for d in range(len(domains))]
    test = [RandomImages(args.eval_images, args.classes, resolution, 100 + d) for d in range(len(domains))]
    benchmark = clip_benchmark(domains, train, test, label_space="all")
    timer = IterationTimer(args.device)
    strategy_class = get_strategy(name)
    options = dict(model=model, tokenizer=tokenizer, train_mb_size=args.batch, eval_mb_size=args.batch,
                   device=args.device, progress=False, plugins=[timer], amp=args.amp,
                   evaluator=EvaluationPlugin(loggers=[]), cache_image_features=False,
                   **method_options(name, args))
    if strategy_class.needs.trains:
        options["iterations"] = args.train_steps
    strategy = strategy_class(**options)
    rows = {}
    for done, experience in enumerate(benchmark.train_stream, start=1):
        timed = done in args.tasks
        if strategy_class.needs.trains:
            strategy.iterations = args.train_steps if timed else 1
        timer.train.clear()
        strategy.train(experience)
        if not timed:
            continue
        train_ms = 1e3 * statistics.median(timer.train[1:] or timer.train) if timer.train else None
        timer.eval.clear()
        for _ in range(args.eval_repeats):
            strategy.eval(benchmark.test_stream[done - 1:done])
        rows[done] = (train_ms, 1e3 * statistics.median(timer.eval))
        print(f"  {name} after {done} task(s): train {train_ms if train_ms is None else round(train_ms, 3)} "
              f"ms/image, inference {rows[done][1]:.3f} ms/image", flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="ViT-B-16", help="open_clip name, or 'tiny' (the demo's)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--tasks", type=int, nargs="+", default=[1, 5, 10])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--classes", type=int, default=100, help="classes per domain")
    parser.add_argument("--train-steps", type=int, default=12)
    parser.add_argument("--eval-images", type=int, default=512)
    parser.add_argument("--eval-repeats", type=int, default=3)
    parser.add_argument("--ae-steps", type=int, default=20)
    parser.add_argument("--amp", action="store_true", help="fp16 autocast (the strategies' amp=True)")
    parser.add_argument("--out", default=None, help="also write the table (Markdown) here")
    args = parser.parse_args()
    device = torch.device(args.device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    print(f"{args.model} on {name}, torch {torch.__version__}, batch {args.batch}, amp {args.amp}", flush=True)
    results = {method: measure(method, args) for method in args.methods}
    header = "| method | " + " | ".join(f"train ms/img after {t}" for t in args.tasks) + " | " + \
        " | ".join(f"infer ms/img after {t}" for t in args.tasks) + " |"
    lines = [f"{args.model} on {name}, torch {torch.__version__}, batch {args.batch}, "
             f"{'fp16 autocast' if args.amp else 'fp32'}; medians (scripts/bench_latency.py)", "",
             header, "|" + "---|" * (1 + 2 * len(args.tasks))]
    for method, rows in results.items():
        train = [rows[t][0] for t in args.tasks]
        infer = [rows[t][1] for t in args.tasks]
        cells = ["—" if v is None else f"{v:.3f}" for v in train] + [f"{v:.3f}" for v in infer]
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    table = "\n".join(lines) + "\n"
    print(table)
    if args.out:
        Path(args.out).write_text(table)


if __name__ == "__main__":
    main()
