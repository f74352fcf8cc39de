"""One transformer block's six linears with MoRAM atoms: ours against nn.Linear and the official release's way.

Sizes are CLIP ViT-B/16's residual block (q, k, v, out: 768->768; c_fc: 768->3072; c_proj:
3072->768), ``--atoms`` atoms per linear (160 = 10 tasks of r = 16; k = 16, tau = 0.01,
delta = 0.2) on ``--batch`` x 197 tokens. Three ways, timed round-robin in this one process
(medians of ``--repeats``) by each of three clocks (``bench_timing``: ``synced``, one call
between two waits for the device; ``back-to-back``, ``--calls`` calls queued, as a model calls
its layers; ``graph``, the calls replayed from a CUDA graph, the device's time alone):

* ``linear``  -- the frozen ``nn.Linear`` alone (what the atoms ride on);
* ``moram``   -- :class:`~moram_avalanche.layers.moram.layer.MoRAMLinear` on the path the library picks
  for the device (``--path`` forces one: reference, cpu-kernel, dense, triton);
* ``release`` -- :class:`ReleaseWayLinear`: the official release's layer as its code computes
  it (``XTAIL/loralib/moram.py`` of Artificer-AI-Lab/MoRAM, read for its operations and
  re-written here): frozen and current atoms concatenated at every call, ``F.normalize``, a
  full ``-inf`` mask filled by ``scatter``, softmax over the whole bank, the eval gate as a
  float mask, one dense ``(w * p) B^T`` read-out, autograd for the backward.

Modes: ``eval`` (forward under ``torch.inference_mode`` in eval mode, gate on, on a frozen bank:
every atom frozen, what an evaluation after a task meets) and ``train`` (forward + backward in
train mode with a dense upstream gradient; the input requires grad, as inside a model with atoms
in earlier layers; the newest 16 atoms trainable), each in float32
and under bfloat16 autocast (``--dtypes``). Before timing, the outputs and gradients of
``moram`` and ``release`` are compared with ours in float32 (relative error of the whole
tensor, the worst of the block): in float32 the two must agree; under bfloat16 the column shows
how far each drifts (ours routes in float32, the release in bfloat16).

Prints one line per clock, mode and dtype: MoRAM / nn.Linear and release / MoRAM (above 1: ours
is faster), against the project's goals (:data:`GOALS`, :data:`RELEASE_GOAL`).

Usage: python scripts/bench_block.py [--device cuda] [--batch 64] [--atoms 160] [--repeats 20]
       python scripts/bench_block.py --quick      (tiny linears on the CPU: checks the script only)
"""

from __future__ import annotations

import argparse
import contextlib
import copy
from typing import Dict, Optional

import torch
import torch.nn.functional as F
from bench_copies import frozen_copy
from bench_timing import CLOCKS, add_timing_options, apply_threads, autocast_to, ratio, time_clocks
from torch import nn

from moram_avalanche.layers.moram.layer import MoRAMLinear
from moram_avalanche.layers.moram.paths import cpu_kernel as routing_kernel
from moram_avalanche.layers.moram.paths import path_name, use_path

BLOCK = {"q": (768, 768), "k": (768, 768), "v": (768, 768), "out": (768, 768),
         "c_fc": (768, 3072), "c_proj": (3072, 768)}
TOKENS_PER_IMAGE = 197
#: ``--quick``: a block of tiny linears on few tokens (every figure meaningless; checks the script)
QUICK_BLOCK = {"q": (32, 32), "c_fc": (32, 64), "c_proj": (64, 32)}
QUICK_TOKENS = 5
#: the project's goals for one block at 160 atoms, eval: MoRAM / nn.Linear (issue "GPU path II")
GOALS = {("eval", "float32"): 1.35, ("eval", "bfloat16"): 1.60}
#: ours must be this much faster than the release's way, in every cell
RELEASE_GOAL = 1.2


class ReleaseWayLinear(nn.Module):
    """The official release's MoRAM layer, as its code computes it (module docstring), over a MoRAMLinear's bank."""

    def __init__(self, layer: MoRAMLinear) -> None:
        super().__init__()
        frozen = layer.num_frozen
        self.weight = nn.Parameter(layer.base.weight.detach().clone(), requires_grad=False)
        self.bias = nn.Parameter(layer.base.bias.detach().clone(), requires_grad=False)
        self.register_buffer("old_keys", layer.keys[:frozen].clone())
        self.register_buffer("old_values", layer.values[:, :frozen].clone())   # [d_out, F]
        self.new_keys = nn.Parameter(layer.keys[frozen:].clone())
        self.new_values = nn.Parameter(layer.values[:, frozen:].clone())       # [d_out, r]
        self.topk, self.temperature, self.threshold = layer.topk, layer.temperature, layer.threshold

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        result = F.linear(x, self.weight, self.bias)
        keys = torch.cat([self.old_keys, self.new_keys], dim=0)
        values = torch.cat([self.old_values, self.new_values], dim=1)
        proj = x @ keys.T
        relevance = F.normalize(proj, p=2, dim=-1)
        kept, index = torch.topk(relevance, k=max(self.topk, 2), dim=-1)
        logits = torch.full_like(relevance, float("-inf")).scatter_(-1, index, kept)
        weights = F.softmax(logits / self.temperature, dim=-1)
        if not self.training and self.threshold > 0:
            weights = weights * (relevance >= self.threshold).float()
        return result + torch.matmul(proj * weights, values.T)


def build(d_in: int, d_out: int, atoms: int, device, per_task: int = 16, seed: int = 0) -> Dict[str, nn.Module]:
    """``{"linear", "moram", "release"}`` over one frozen ``nn.Linear(d_in, d_out)`` with ``atoms`` atoms."""
    torch.manual_seed(seed)
    base = nn.Linear(d_in, d_out)
    layer = MoRAMLinear(copy.deepcopy(base), atoms_per_task=per_task, topk=16, temperature=0.01, threshold=0.2)
    for _ in range(atoms // per_task):
        layer.expand()
        with torch.no_grad():  # trained-looking values so the read-out is not trivially zero
            layer.new_values.normal_(std=0.02)
    base.requires_grad_(False)
    return {"linear": base.to(device), "moram": layer.to(device), "release": ReleaseWayLinear(layer).to(device)}


def eval_call(module: nn.Module, x: torch.Tensor, dtype: str):
    module.eval()

    def run():
        with torch.inference_mode(), autocast_to(x.device, dtype):
            module(x)
    return run


def train_call(module: nn.Module, x: torch.Tensor, grad: torch.Tensor, dtype: str):
    def run():
        module.train()
        inp = x.detach().requires_grad_()
        with autocast_to(x.device, dtype):
            out = module(inp)
        out.backward(grad.to(out.dtype))
        for p in module.parameters():
            p.grad = None
    return run


def relative_error(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def outputs_and_grads(module: nn.Module, x: torch.Tensor, grad: torch.Tensor, dtype: str, training: bool):
    """``[y, dL/dx, dL/dA_new, dL/dB_new]`` of one forward and backward (values' gradient as ``[d_out, r]``)."""
    module.train(training)
    inp = x.detach().requires_grad_()
    with autocast_to(x.device, dtype):
        out = module(inp)
    out.backward(grad.to(out.dtype))
    values = module.new_values.grad
    got = [out.detach(), inp.grad, module.new_keys.grad, values.t() if isinstance(module, MoRAMLinear) else values]
    for p in module.parameters():
        p.grad = None
    return got


def errors(models: Dict[str, nn.Module], x: torch.Tensor, dtype: str) -> Dict[str, float]:
    """Worst relative error of ``moram`` and of ``release`` in ``dtype`` against ``moram`` in float32
    (eval and train: outputs, dL/dx, the new atoms' gradients): float32 checks the two agree; under
    bfloat16 it shows how close each stays to float32 (ours routes in float32)."""
    worst = {"moram": 0.0, "release": 0.0}
    grad = torch.randn(*x.shape[:-1], models["moram"].out_features, device=x.device)
    for training in (False, True):
        truth = outputs_and_grads(models["moram"], x, grad, "float32", training)
        for name in worst:
            got = outputs_and_grads(models[name], x, grad, dtype, training)
            worst[name] = max([worst[name]] + [relative_error(a, b) for a, b in zip(got, truth)])
    return worst


def measure(device, batch: int, atoms: int, repeats: int, dtypes=("float32", "bfloat16"),
            path: Optional[str] = None, modes=("eval", "train"), clocks=tuple(CLOCKS), calls: int = 20,
            shapes: Optional[Dict[str, tuple]] = None, tokens: int = TOKENS_PER_IMAGE) -> Dict[tuple, dict]:
    """``{(mode, dtype): {clock: {"linear", "moram", "release"}: seconds or None}}`` summed over the block's
    linears (``shapes``, default :data:`BLOCK`), plus ``("error", dtype)``: each way's worst relative
    error against ours in float32 (:func:`errors`), and ``("notes",)``: ``{why a clock timed nothing:
    [the cells it did not time]}``.

    Eval times a frozen bank (:func:`bench_copies.frozen_copy`: every atom frozen, as after a task),
    training the bank with its newest ``per_task`` atoms trainable. A sum holds None when a linear's
    time is None (a graph that could not be captured)."""
    totals: Dict[tuple, dict] = {("notes",): {}}
    with (use_path(path) if path else contextlib.nullcontext()):
        for d_in, d_out in (shapes or BLOCK).values():
            models = build(d_in, d_out, atoms, device)
            evaluated = dict(models, moram=frozen_copy(models["moram"]))
            x = torch.randn(batch, tokens, d_in, device=device)
            grad = torch.randn(batch, tokens, d_out, device=device)
            for dtype in dtypes:
                worst = totals.setdefault(("error", dtype), {"moram": 0.0, "release": 0.0})
                for way, error in errors(models, x[: max(1, batch // 8)], dtype).items():
                    worst[way] = max(worst[way], error)
                for mode in modes:
                    calls_of = ({key: eval_call(m, x, dtype) for key, m in evaluated.items()} if mode == "eval" else
                                {key: train_call(m, x, grad, dtype) for key, m in models.items() if key != "linear"})
                    # (a frozen nn.Linear has nothing to train: the training ratio is against the release's way)
                    times, notes = time_clocks(calls_of, repeats, device, clocks, calls)
                    for key, why in notes.items():  # grouped by reason: "clock way" of each linear
                        totals[("notes",)].setdefault(why, []).append(f"{key} {mode} {dtype} {d_in}->{d_out}")
                    cell = totals.setdefault((mode, dtype), {clock: {} for clock in clocks})
                    for clock, seconds in times.items():
                        for key, value in seconds.items():
                            held = cell[clock].get(key, 0.0)
                            cell[clock][key] = None if held is None or value is None else held + value
    return totals


def cells(totals: Dict[tuple, dict]):
    """``(mode, dtype)`` of every timed cell of :func:`measure`'s result, in order."""
    return [key for key in totals if len(key) == 2 and key[0] != "error"]


def report(totals: Dict[tuple, dict]) -> str:
    """One line per clock, mode and dtype: MoRAM / nn.Linear and the release's way / MoRAM against their goals."""
    lines = [f"{'clock':12s} {'mode':5s} {'dtype':8s} {'MoRAM/Linear':>12s} {'goal':>6s} {'release/MoRAM':>13s} "
             f"{'goal':>6s} {'ms linear':>9s} {'ms MoRAM':>9s} {'ms release':>10s} {'err MoRAM':>9s} "
             f"{'err release':>11s}"]
    show = lambda value, scale=1e3, form="9.2f": format(scale * value, form) if value is not None else "-"  # noqa: E731
    for mode, dtype in cells(totals):
        error = totals[("error", dtype)]
        for clock, cell in totals[(mode, dtype)].items():
            goal = GOALS.get((mode, dtype))
            ours, release = ratio(cell["moram"], cell.get("linear")), ratio(cell["release"], cell["moram"])
            lines.append(
                f"{clock:12s} {mode:5s} {dtype:8s} {show(ours, 1, '11.2f') + 'x' if ours else '-':>12s} "
                f"{('<=' + format(goal, 'g')) if goal else '':>6s} "
                f"{show(release, 1, '12.2f') + 'x' if release else '-':>13s} {'>=' + format(RELEASE_GOAL, 'g'):>6s} "
                f"{show(cell.get('linear')):>9s} {show(cell['moram']):>9s} {show(cell['release']):>10s} "
                f"{error['moram']:9.1e} {error['release']:11.1e}")
    lines += [f"  not timed ({len(where)} cells, e.g. {where[0]}): {why}" for why, where in totals[("notes",)].items()]
    return "\n".join(lines)


def main(argv=None) -> Dict[tuple, dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=8, help="images of 197 tokens (GPU goal: 64)")
    parser.add_argument("--atoms", type=int, default=160)
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"], choices=["float32", "bfloat16"])
    parser.add_argument("--path", default=None, help="force a MoRAM path (default: the library's choice)")
    parser.add_argument("--clocks", nargs="+", default=list(CLOCKS), choices=list(CLOCKS),
                        help="synced, back-to-back, graph (CUDA) (default: all)")
    parser.add_argument("--calls", type=int, default=20, help="calls per back-to-back or graph sample (default 20)")
    parser.add_argument("--quick", action="store_true", help="tiny linears, 1 repeat: checks the script only")
    add_timing_options(parser, repeats=10)
    args = parser.parse_args(argv)
    apply_threads(args)
    device = torch.device(args.device)
    shapes, tokens = (QUICK_BLOCK, QUICK_TOKENS) if args.quick else (BLOCK, TOKENS_PER_IMAGE)
    if args.quick:
        args.batch, args.atoms, args.repeats, args.calls = 1, 32, 1, 2
    if device.type == "cpu":
        routing_kernel.load()  # MoRAM's CPU routing kernel, built before anything is timed
    probe = torch.empty(1, device=device)
    chosen = args.path or path_name(probe, args.atoms, 16, gated=True)
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else f"{torch.get_num_threads()} CPU threads"
    print(f"torch {torch.__version__}, {where}; block of {len(shapes)} linears "
          f"({'--quick, tiny' if args.quick else 'ViT-B/16'}), {args.atoms} atoms each, {args.batch} x {tokens} "
          f"tokens; MoRAM path: {chosen}; median of {args.repeats}, {args.calls} calls per back-to-back or graph sample")
    totals = measure(device, args.batch, args.atoms, args.repeats, args.dtypes, args.path, clocks=args.clocks,
                     calls=args.calls, shapes=shapes, tokens=tokens)
    print(report(totals))
    return totals


__all__ = ["BLOCK", "GOALS", "QUICK_BLOCK", "QUICK_TOKENS", "RELEASE_GOAL", "TOKENS_PER_IMAGE", "ReleaseWayLinear", "build",
           "cells", "errors", "eval_call", "main", "measure", "outputs_and_grads", "relative_error", "report", "train_call"]


if __name__ == "__main__":
    main()
