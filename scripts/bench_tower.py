"""Speed of the whole ViT-B/16 image tower with MoRAM atoms, against plain CLIP and rank-16 LoRA.

The image tower of open_clip's ViT-B-16 (random init: speed does not depend on the weights),
``--batch`` images of 224 x 224, atoms on the six linears of every residual block (q, k, v,
out, c_fc, c_proj; the paper's "qkvoinout") after ``--tasks`` tasks of r = 16 atoms (k = 16,
tau = 0.01, delta = 0.2). Timed round-robin in this one process, medians of ``--repeats``, by
each clock of ``bench_timing`` (``synced``: one call between two waits for the device;
``back-to-back``: ``--calls`` calls queued; ``graph``: replayed from a CUDA graph, eval only).
Each in float32 and, with ``--dtypes``, under bfloat16 / float16 autocast:

* eval  -- ``model.visual(images)`` under ``torch.inference_mode()`` in eval mode, on a frozen
  bank (every atom frozen, as after a task): MoRAM against plain CLIP (open_clip's own fused
  attention), beside the split attention alone against plain CLIP (q, k, v, out as separate
  linears, no atoms: what the atoms ride on, so the floor of MoRAM / plain);
* train -- one training step (forward, ``features.square().mean()`` backward, AdamW step):
  MoRAM (the newest 16 atoms train) against a rank-16 LoRA on the same 72 linears.

Values of every atom are drawn N(0, 0.02^2) so the read-out is not trivially zero; the
script prints the share of kept atoms that pass the eval gate (random keys: few do).

Usage: python scripts/bench_tower.py [--tasks 10] [--batch 4] [--repeats 3] [--threads N] [--dtypes float32 bfloat16]
       python scripts/bench_tower.py --quick      (the demo's tiny CLIP on the CPU: checks the script only)
"""

from __future__ import annotations

import argparse
import os

import open_clip
import torch
from bench_copies import frozen_copy, sharing_copy
from bench_timing import CLOCKS, STEP_CLOCKS, add_timing_options, apply_threads, autocast_to, ratio, time_clocks

from moram_avalanche.clip.attention import split_attention
from moram_avalanche.clip.inject import inject_lora, inject_moram
from moram_avalanche.clip.registry import TINY_NAME, register_model_configs
from moram_avalanche.layers.base import find_layers
from moram_avalanche.layers.moram.layer import MoRAMLinear
from moram_avalanche.layers.moram.paths import cpu_kernel as routing_kernel

TARGETS = ("q", "k", "v", "out", "fc", "proj")
#: the tower the goals are set for, and ``--quick``'s: the demo's tiny CLIP (checks the script only)
MODEL, QUICK_MODEL = "ViT-B-16", TINY_NAME


def build_towers(tasks: int, model: str = MODEL):
    """``{name: model}`` of the variants of open_clip's ``model`` (random init; image tower used only),
    sharing the plain model's weights (:func:`bench_copies.sharing_copy`):

    * ``plain``  -- open_clip's model (its fused attention);
    * ``split``  -- the attention split into q, k, v, out linears, no atoms (what the atoms ride on);
    * ``moram``  -- atoms on the 6 linears of every block after ``tasks`` tasks of 16, every atom
      frozen: the bank an evaluation meets after the last task (eval);
    * ``lora``   -- a rank-16 LoRA on the same linears (training);
    * ``moram-train`` -- the same atoms with the last task's 16 trainable (training).
    """
    register_model_configs()  # the package's own models (the tiny CLIP) by name
    plain = open_clip.create_model(model, pretrained=None).eval()
    plain.requires_grad_(False)
    split = sharing_copy(plain)
    split_attention(split, ("visual",))
    training = sharing_copy(plain)
    layers = inject_moram(training, encoders=("visual",), targets=TARGETS)
    for layer in layers.values():
        for _ in range(tasks):
            layer.expand()
            with torch.no_grad():
                layer.new_values.normal_(std=0.02)
    lora = sharing_copy(plain)
    inject_lora(lora, encoders=("visual",), targets=TARGETS, rank=16)
    for layer in find_layers(lora).values():
        with torch.no_grad():
            layer.up.normal_(std=0.02)
    return {"plain": plain, "split": split, "moram": frozen_copy(training), "lora": lora, "moram-train": training}


def images_for(model, batch: int, device) -> torch.Tensor:
    """``batch`` random images of the size ``model``'s image tower takes."""
    size = model.visual.image_size
    size = size if isinstance(size, (tuple, list)) else (size, size)
    return torch.randn(batch, 3, *size, device=device)


def eval_call(model, images, dtype=None):
    def run():
        with torch.inference_mode(), autocast_to(images.device, dtype):
            model.visual(images)
    return run


def train_call(model, images, dtype=None):
    model.train()
    params = [p for p in model.visual.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=5e-4, betas=(0.9, 0.9999), weight_decay=0.0,
                                  foreach=True)

    def run():
        optimizer.zero_grad(set_to_none=True)
        with autocast_to(images.device, dtype):
            loss = model.visual(images).float().square().mean()
        loss.backward()
        optimizer.step()
    return run


def gate_pass_rate(model, images) -> float:
    """Share of the kept (top-k) atoms with relevance >= delta over every MoRAM layer."""
    passed, total = [0], [0]

    def hook(layer, inputs, _output):
        x = inputs[0].reshape(-1, layer.in_features)
        proj = x @ layer.keys.t()
        kept = proj.topk(layer.effective_topk, dim=-1).values
        relevance = kept / proj.norm(dim=-1, keepdim=True).clamp_min(1e-12)
        passed[0] += int((relevance >= layer.threshold).sum())
        total[0] += relevance.numel()

    handles = [layer.register_forward_hook(hook) for layer in find_layers(model, MoRAMLinear).values()]
    with torch.inference_mode():
        model.visual(images)
    for handle in handles:
        handle.remove()
    return passed[0] / max(total[0], 1)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--dtypes", nargs="+", default=["float32"], choices=["float32", "bfloat16", "float16"],
                        help="float32, and/or autocast to bfloat16 / float16")
    parser.add_argument("--clocks", nargs="+", default=list(CLOCKS), choices=list(CLOCKS),
                        help="synced, back-to-back, graph (CUDA; eval only) (default: all)")
    parser.add_argument("--calls", type=int, default=3, help="calls per back-to-back or graph sample (default 3)")
    parser.add_argument("--quick", action="store_true", help=f"the tiny CLIP ({QUICK_MODEL}), 2 images, 1 repeat: "
                                                             "checks the script only")
    add_timing_options(parser)
    args = parser.parse_args(argv)
    apply_threads(args)
    if args.quick:
        args.batch, args.repeats, args.calls = 2, 1, 1
    torch.manual_seed(0)
    towers = {name: model.to(args.device)
              for name, model in build_towers(args.tasks, QUICK_MODEL if args.quick else MODEL).items()}
    if torch.device(args.device).type == "cpu":
        routing_kernel.load()  # MoRAM's CPU routing kernel, built before anything is timed
    images = images_for(towers["plain"], args.batch, args.device)
    with torch.inference_mode():
        plain_out, split_out = towers["plain"].visual(images), towers["split"].visual(images)
    where = torch.cuda.get_device_name() if images.is_cuda else f"{torch.get_num_threads()} CPU threads"
    print(f"torch {torch.__version__}, {where}, load "
          f"{os.getloadavg()[0]:.1f}, {QUICK_MODEL + ' (--quick)' if args.quick else MODEL}, batch {args.batch}, "
          f"{args.tasks} tasks of 16 atoms ({sum(layer.num_atoms for layer in find_layers(towers['moram'], MoRAMLinear).values())} "
          f"atoms in {len(find_layers(towers['moram'], MoRAMLinear))} linears; eval on the frozen bank), median of "
          f"{args.repeats}, {args.calls} calls per back-to-back or graph sample")
    print(f"split attention vs open_clip's: max|diff| {float((plain_out - split_out).abs().max()):.1e}; "
          f"kept atoms passing the eval gate: {gate_pass_rate(towers['moram'], images):.1%}")
    for dtype_name in args.dtypes:
        dtype = None if dtype_name == "float32" else getattr(torch, dtype_name)
        for model in towers.values():
            model.eval()
        times, notes = time_clocks({name: eval_call(towers[name], images, dtype) for name in ("plain", "split", "moram")},
                                   args.repeats, args.device, args.clocks, args.calls)
        for clock, t in times.items():
            if t["moram"] is None:
                print(f"eval  {dtype_name} {clock:12s}: not timed ({notes.get(f'{clock} moram', '')})")
                continue
            print(f"eval  {dtype_name} {clock:12s}: MoRAM {ratio(t['moram'], t['plain']):.2f}x plain CLIP, "
                  f"split attention alone {ratio(t['split'], t['plain']):.2f}x plain CLIP, MoRAM "
                  f"{ratio(t['moram'], t['split']):.2f}x the split attention; ms/image plain "
                  f"{1e3 * t['plain'] / args.batch:.2f}, split {1e3 * t['split'] / args.batch:.2f}, "
                  f"MoRAM {1e3 * t['moram'] / args.batch:.2f}")
        training = [clock for clock in args.clocks if clock in STEP_CLOCKS]
        times, _ = time_clocks({name: train_call(towers[name], images, dtype) for name in ("lora", "moram-train")},
                               args.repeats, args.device, training, args.calls)
        for clock, t in times.items():
            print(f"train {dtype_name} {clock:12s}: MoRAM {ratio(t['moram-train'], t['lora']):.2f}x rank-16 LoRA "
                  f"(forward, backward, AdamW step); ms/image LoRA {1e3 * t['lora'] / args.batch:.2f}, MoRAM "
                  f"{1e3 * t['moram-train'] / args.batch:.2f}")


__all__ = ["MODEL", "QUICK_MODEL", "TARGETS", "build_towers", "eval_call", "gate_pass_rate", "images_for", "main", "train_call"]


if __name__ == "__main__":
    main()
