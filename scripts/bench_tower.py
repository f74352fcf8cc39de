"""Speed of the whole ViT-B/16 image tower with MoRAM atoms, against plain CLIP and rank-16 LoRA.

The image tower of open_clip's ViT-B-16 (random init: speed does not depend on the weights),
``--batch`` images of 224 x 224, atoms on the six linears of every residual block (q, k, v,
out, c_fc, c_proj; the paper's "qkvoinout") after ``--tasks`` tasks of r = 16 atoms (k = 16,
tau = 0.01, delta = 0.2). Timed round-robin in this one process, medians of ``--repeats``:

Each in float32 and, with ``--dtypes``, under bfloat16 / float16 autocast:

* eval  -- ``model.visual(images)`` under ``torch.inference_mode()`` in eval mode: MoRAM
  against plain CLIP (open_clip's own fused attention) and against the split attention alone
  (q, k, v, out as separate linears, no atoms: what the atoms ride on);
* train -- one training step (forward, ``features.square().mean()`` backward, AdamW step):
  MoRAM (the newest 16 atoms train) against a rank-16 LoRA on the same 72 linears.

Values of every atom are drawn N(0, 0.02^2) so the read-out is not trivially zero; the
script prints the share of kept atoms that pass the eval gate (random keys: few do).

Usage: python scripts/bench_tower.py [--tasks 10] [--batch 4] [--repeats 3] [--threads N] [--dtypes float32 bfloat16]
"""

from __future__ import annotations

import argparse
import copy
import os

import open_clip
import torch
from bench_timing import add_timing_options, apply_threads, time_round_robin

from moram_avalanche.clip.attention import split_attention
from moram_avalanche.clip.inject import inject_lora, inject_moram
from moram_avalanche.layers.base import find_layers
from moram_avalanche.layers.moram.layer import MoRAMLinear
from moram_avalanche.layers.moram.paths import cpu_kernel as routing_kernel

TARGETS = ("q", "k", "v", "out", "fc", "proj")


def build_towers(tasks: int):
    """``{name: model}`` of the plain, split, MoRAM and LoRA variants (image tower used only)."""
    plain = open_clip.create_model("ViT-B-16", pretrained=None).eval()
    plain.requires_grad_(False)
    split = copy.deepcopy(plain)
    split_attention(split, ("visual",))
    moram = copy.deepcopy(plain)
    layers = inject_moram(moram, encoders=("visual",), targets=TARGETS)
    for layer in layers.values():
        for _ in range(tasks):
            layer.expand()
            with torch.no_grad():
                layer.new_values.normal_(std=0.02)
    lora = copy.deepcopy(plain)
    inject_lora(lora, encoders=("visual",), targets=TARGETS, rank=16)
    for layer in find_layers(lora).values():
        with torch.no_grad():
            layer.up.normal_(std=0.02)
    return {"plain": plain, "split": split, "moram": moram, "lora": lora}


def autocast(images, dtype=None):
    """bfloat16 / float16 autocast on the images' device, or nothing (``dtype`` None: float32)."""
    return torch.autocast(images.device.type, dtype=dtype or torch.float32, enabled=dtype is not None)


def eval_call(model, images, dtype=None):
    def run():
        with torch.inference_mode(), autocast(images, dtype):
            model.visual(images)
    return run


def train_call(model, images, dtype=None):
    model.train()
    params = [p for p in model.visual.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=5e-4, betas=(0.9, 0.9999), weight_decay=0.0,
                                  foreach=True)

    def run():
        optimizer.zero_grad(set_to_none=True)
        with autocast(images, dtype):
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--dtypes", nargs="+", default=["float32"], choices=["float32", "bfloat16", "float16"],
                        help="float32, and/or autocast to bfloat16 / float16")
    add_timing_options(parser)
    args = parser.parse_args()
    apply_threads(args)
    torch.manual_seed(0)
    towers = {name: model.to(args.device) for name, model in build_towers(args.tasks).items()}
    if torch.device(args.device).type == "cpu":
        routing_kernel.load()  # MoRAM's CPU routing kernel, built before anything is timed
    images = torch.randn(args.batch, 3, 224, 224, device=args.device)
    with torch.inference_mode():
        plain_out, split_out = towers["plain"].visual(images), towers["split"].visual(images)
    where = torch.cuda.get_device_name() if images.is_cuda else f"{torch.get_num_threads()} CPU threads"
    print(f"torch {torch.__version__}, {where}, load "
          f"{os.getloadavg()[0]:.1f}, batch {args.batch}, {args.tasks} tasks of 16 atoms "
          f"({sum(layer.num_atoms for layer in find_layers(towers['moram'], MoRAMLinear).values())} atoms "
          f"in 72 linears), median of {args.repeats}")
    print(f"split attention vs open_clip's: max|diff| {float((plain_out - split_out).abs().max()):.1e}; "
          f"kept atoms passing the eval gate: {gate_pass_rate(towers['moram'], images):.1%}")
    for dtype_name in args.dtypes:
        dtype = None if dtype_name == "float32" else getattr(torch, dtype_name)
        for model in towers.values():
            model.eval()
        t = time_round_robin({name: eval_call(towers[name], images, dtype) for name in ("plain", "split", "moram")},
                             args.repeats)
        print(f"eval  {dtype_name}: MoRAM {t['moram'] / t['plain']:.2f}x plain CLIP, "
              f"{t['moram'] / t['split']:.2f}x the split attention alone; "
              f"ms/image plain {1e3 * t['plain'] / args.batch:.2f}, split {1e3 * t['split'] / args.batch:.2f}, "
              f"MoRAM {1e3 * t['moram'] / args.batch:.2f}")
        t = time_round_robin({name: train_call(towers[name], images, dtype) for name in ("lora", "moram")},
                             args.repeats)
        print(f"train {dtype_name}: MoRAM {t['moram'] / t['lora']:.2f}x rank-16 LoRA (forward, backward, AdamW "
              f"step); ms/image LoRA {1e3 * t['lora'] / args.batch:.2f}, MoRAM {1e3 * t['moram'] / args.batch:.2f}")


if __name__ == "__main__":
    main()
