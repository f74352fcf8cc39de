"""Cost of RAIL's training-free fit against the CLIP image forward it needs anyway, in one process.

RAIL's training is one pass of frozen CLIP over a domain's few-shot images plus the analytic
update of its head. This script times, interleaved and repeated (medians), per image:

* ``clip``   -- the ViT-B/16 image forward (random init: the cost does not depend on the
  weights) on batches of ``--clip-batch`` images of 224x224, under ``torch.no_grad()``;
* ``primal`` -- :class:`~moram_avalanche.algorithms.analytic.RecursiveRidge` (with the random
  ReLU expansion to ``--hidden-dim``) taking one batch of ``--batch`` unit features;
* ``dual``   -- :class:`~moram_avalanche.algorithms.analytic.KernelRidge` re-solved on a memory
  of ``--memory`` features, divided by the ``--images`` of the task that triggers the solve.

and prints each head's cost as a ratio of the CLIP forward. RAIL's defaults: hidden 15000,
batch 128; X-TAIL's first task is Aircraft, 16 shots x 100 classes = 1600 images.

Usage: python scripts/bench_rail.py [--hidden-dim 15000] [--batch 128] [--memory 1600]
       [--images 1600] [--clip-batch 4] [--repeats 3] [--threads N] [--device cpu]
"""

from __future__ import annotations

import argparse
import statistics

import torch
import torch.nn.functional as F
from bench_timing import add_timing_options, apply_threads

from moram_avalanche.algorithms.analytic import KernelRidge, RandomFeatures, RecursiveRidge
from moram_avalanche.utils.clock import now


def timed(fn, device) -> float:
    """Seconds of one call of ``fn``, read with the package's one clock (``device`` synchronised)."""
    start = now(device)
    fn()
    return now(device) - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hidden-dim", type=int, default=15000)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--memory", type=int, default=1600)
    parser.add_argument("--images", type=int, default=1600)
    parser.add_argument("--clip-batch", type=int, default=4)
    add_timing_options(parser)
    args = parser.parse_args()
    apply_threads(args)
    device = torch.device(args.device)

    import open_clip

    model = open_clip.create_model("ViT-B-16", pretrained=None).to(device).eval()
    dim = int(model.visual.output_dim)
    images = torch.randn(args.clip_batch, 3, 224, 224, device=device)
    gen = torch.Generator().manual_seed(0)
    expansion = RandomFeatures(dim, args.hidden_dim, generator=gen).to(device)
    batch = F.normalize(torch.randn(args.batch, dim, generator=gen), dim=-1).to(device)
    targets = torch.eye(100, device=device)[torch.randint(0, 100, (args.batch,), generator=gen)]
    memory = F.normalize(torch.randn(args.memory, dim, generator=gen), dim=-1).to(device)
    memory_targets = torch.eye(100, device=device)[torch.randint(0, 100, (args.memory,), generator=gen)]

    def clip_forward():
        with torch.no_grad():
            model.encode_image(images)

    ridge = RecursiveRidge(args.hidden_dim, dtype=torch.float32, device=device)
    ridge.add_classes(100)

    def primal():
        ridge.update(expansion(batch), targets)

    def dual():
        head = KernelRidge()
        head.add(memory, memory_targets)
        head.fit()

    per_image = {"clip": (clip_forward, args.clip_batch), "primal": (primal, args.batch),
                 "dual": (dual, args.images)}
    for fn, _ in per_image.values():  # warm-up
        timed(fn, device)
    samples = {name: [] for name in per_image}
    for _ in range(args.repeats):
        for name, (fn, count) in per_image.items():
            samples[name].append(timed(fn, device) / count)
    medians = {name: statistics.median(values) for name, values in samples.items()}
    print(f"device {device}, threads {torch.get_num_threads()}, hidden {args.hidden_dim}, batch {args.batch}, "
          f"dual memory {args.memory} for a task of {args.images} images, repeats {args.repeats}")
    for name in ("primal", "dual"):
        print(f"{name:>6}: {medians[name] / medians['clip']:.4f} x the CLIP image forward per image")


if __name__ == "__main__":
    main()
