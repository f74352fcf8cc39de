"""Time of MoRAM's dropout made again in the backward against autograd through ``F.dropout``.

What 0.7.4 changed (``moram_avalanche/layers/moram/dropped.py``): a language model's MoRAM layer reads
its atoms on ``d = dropout(x)``, and its backward now keeps ``x`` and makes ``d`` again (from the
kept noise on the CPU; drawn again from the generator's state on CUDA, or on the CPU with
``--redraw-on-cpu``) instead of keeping ``d`` and the mask. This script times one forward and
backward of ``--layers`` such layers reading one input (q, k, v, o of an attention read it in
pairs and threes), both ways, interleaved in one process (medians of ``--repeats`` rounds of
``--calls`` steps each), and checks first that both ways give the same gradients bit for bit.
"Before" is 0.7.3's forward written out: ``base(x) + read(dropout(x))``, autograd through the
dropout.

Example (what the CHANGELOG quotes, three runs):
    OMP_NUM_THREADS=1 python scripts/bench_dropout.py --threads 1 --width 1024 --tokens 512
    OMP_NUM_THREADS=1 python scripts/bench_dropout.py --threads 1 --width 1024 --tokens 512 --redraw-on-cpu
"""

from __future__ import annotations

import argparse
from typing import List, Optional

import torch
from bench_timing import add_timing_options, apply_threads, time_back_to_back
from torch import nn

from moram_avalanche.layers.moram import dropped
from moram_avalanche.text.layer import PAPER_DROPOUT, DropoutMoRAMLinear


def build_layers(count: int, width: int, tasks: int, per_task: int, dtype: torch.dtype, device) -> List[nn.Module]:
    """``count`` dropout MoRAM layers ``width`` -> ``width`` in train mode, grown over ``tasks`` tasks
    (the last trainable; values drawn so the atoms' term is not zero), the paper's TRACE routing."""
    torch.manual_seed(0)
    layers = []
    for _ in range(count):
        layer = DropoutMoRAMLinear(nn.Linear(width, width), atoms_per_task=per_task, topk=per_task,
                                   temperature=0.03, threshold=0.2, dropout=PAPER_DROPOUT)
        for _ in range(tasks):
            layer.expand()
            with torch.no_grad():
                layer.new_values.normal_(std=0.02)
        layers.append(layer.to(device=device, dtype=dtype).train())
    return layers


def before(layer: DropoutMoRAMLinear, x: torch.Tensor) -> torch.Tensor:
    """0.7.3's training forward: autograd through the dropout, the base called after it."""
    dropped_x = layer.atom_dropout(x)
    base_out = layer.base(x)
    return base_out + layer.read(dropped_x).to(base_out.dtype)


def step(layers, x: torch.Tensor, forward):
    """One forward and backward of every layer on ``x`` (``x * 1``: a fresh input each step)."""
    def run():
        shared = x * 1
        sum(forward(layer, shared).float().sum() for layer in layers).backward()
    return run


def gradients(layers, x: torch.Tensor, forward) -> list:
    for layer in layers:
        layer.zero_grad(set_to_none=True)
    x.grad = None
    torch.manual_seed(1)
    step(layers, x, forward)()
    return [x.grad.clone()] + [layer.new_keys.grad.clone() for layer in layers]


def main(argv: Optional[List[str]] = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=1024, help="in and out features of each layer")
    parser.add_argument("--tokens", type=int, default=512, help="token rows of the input")
    parser.add_argument("--layers", type=int, default=4, help="layers reading the one input (q, k, v, o: 4)")
    parser.add_argument("--tasks", type=int, default=8, help="tasks grown (TRACE: 8)")
    parser.add_argument("--atoms-per-task", type=int, default=16, help="atoms per task and top-k (TRACE: 16)")
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    parser.add_argument("--calls", type=int, default=3, help="steps per timing")
    parser.add_argument("--redraw-on-cpu", action="store_true", help="draw the dropout again on the CPU too (CUDA's way)")
    add_timing_options(parser, repeats=7)
    args = parser.parse_args(argv)
    apply_threads(args)
    dropped.REDRAW_ON_CPU = args.redraw_on_cpu
    dtype = getattr(torch, args.dtype)
    layers = build_layers(args.layers, args.width, args.tasks, args.atoms_per_task, dtype, args.device)
    x = torch.randn(args.tokens, args.width, dtype=dtype, device=args.device, requires_grad=True)
    same = all(torch.equal(a, b) for a, b in zip(gradients(layers, x, DropoutMoRAMLinear.__call__),
                                                  gradients(layers, x, before)))
    times = time_back_to_back({"made again": step(layers, x, DropoutMoRAMLinear.__call__),
                               "autograd through F.dropout": step(layers, x, before)},
                              args.repeats, calls=args.calls)
    ratio = times["made again"] / times["autograd through F.dropout"]
    way = "drawn again" if dropped.redrawn(x) else "from the kept noise"
    print(f"{args.layers} layers {args.width} wide, {args.tokens} tokens, {args.dtype}, {args.device}, "
          f"{torch.get_num_threads()} threads; the dropout made again {way}")
    print(f"same gradients bit for bit: {'yes' if same else 'NO'}")
    print(f"step: made again / autograd through F.dropout = {ratio:.3f} "
          f"({times['autograd through F.dropout'] * 1e3:.1f} ms before)")
    return {"ratio": ratio, "same": same}


if __name__ == "__main__":
    main()
