"""Speed of MoRAMLinear against the plain nn.Linear and the naive reference, in one process.

Sizes are CLIP ViT-B/16's: the six linears of one residual block (q, k, v, out: 768->768;
c_fc: 768->3072; c_proj: 3072->768) on 8 images x 197 tokens, with 16, 80 and 160 atoms
(1, 5 and 10 tasks of r = 16) and k = 16. Two modes:

* eval  -- forward under ``torch.no_grad()`` in eval mode (threshold gate on);
* train -- forward + backward in train mode; the input requires grad (a frozen backbone with
  atoms in earlier layers), the base is frozen, the newest 16 atoms are trainable.

The baseline for both is the frozen nn.Linear doing the same work. ``torch path`` is the same
MoRAMLinear with the compiled CPU routing kernel switched off (``MORAM_AVALANCHE_PATH=no-cpu-kernel``,
:mod:`moram_avalanche.layers.moram.paths.cpu_kernel`), timed in the same rounds. Ratios are medians of
repeated timings taken in this run; outputs and gradients are checked against the naive
reference before timing.

Usage: python scripts/bench_atoms.py [--repeats 20] [--threads N] [--atoms 16 80 160]
"""

from __future__ import annotations

import argparse

import torch
from bench_timing import add_timing_options, apply_threads, time_round_robin
from torch import nn

from moram_avalanche.layers.moram.layer import MoRAMLinear
from moram_avalanche.layers.moram.naive import NaiveMoRAMLinear
from moram_avalanche.layers.moram.paths import cpu_kernel as routing_kernel
from moram_avalanche.layers.moram.paths import use_path

BLOCK = {"q": (768, 768), "k": (768, 768), "v": (768, 768), "out": (768, 768),
         "c_fc": (768, 3072), "c_proj": (3072, 768)}
TOKENS = (8, 197)


def build(d_in: int, d_out: int, num_atoms: int, per_task: int = 16):
    base = nn.Linear(d_in, d_out)
    layer = MoRAMLinear(base, atoms_per_task=per_task, topk=16, temperature=0.01, threshold=0.2)
    for _ in range(num_atoms // per_task):
        layer.expand()
        with torch.no_grad():  # trained-looking values so the read-out is not trivially zero
            layer.new_values.normal_(std=0.02)
    frozen = layer.num_frozen
    naive = NaiveMoRAMLinear(
        base.weight, base.bias, layer.keys[:frozen], layer.values[:, :frozen],
        layer.keys[frozen:], layer.values[:, frozen:], topk=16, temperature=0.01, threshold=0.2,
    )
    return base, layer, naive


def eval_step(module, x, setting="auto"):
    """One timed eval call of ``module``, MoRAM layers with the switch's ``setting`` (``auto`` / ``no-cpu-kernel``)."""
    def run():
        with use_path(setting), torch.no_grad():
            module(x)
    return run


def train_step(module, x, grad, setting="auto"):
    """One timed training step of ``module``, MoRAM layers with the switch's ``setting``."""
    def run():
        with use_path(setting):
            inp = x.detach().requires_grad_()
            module(inp).backward(grad)
        for p in module.parameters():
            p.grad = None
    return run


def check_same(layer, naive, x) -> float:
    """Largest output/gradient difference between MoRAMLinear and the naive reference."""
    worst = 0.0
    for training in (False, True):
        layer.train(training), naive.train(training)
        xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
        ya, yb = layer(xa), naive(xb)
        ya.sum().backward(), yb.sum().backward()
        worst = max(worst, (ya - yb).abs().max().item(), (xa.grad - xb.grad).abs().max().item())
        if training:
            worst = max(worst, (layer.new_keys.grad - naive.new_keys.grad).abs().max().item(),
                        (layer.new_values.grad.t() - naive.new_values.grad).abs().max().item())
        for p in list(layer.parameters()) + list(naive.parameters()):
            p.grad = None
    return worst


def gate_pass_fraction(layer, x) -> float:
    """Share of the kept (top-k) atoms whose relevance passes the eval gate ``s >= delta``.

    The eval read-out skips the others, so eval timings depend on it: random keys (this
    script) pass few atoms; a trained bank may pass more (at most ``1 / delta^2`` per token).
    """
    with torch.no_grad():
        proj = x.reshape(-1, layer.in_features) @ layer.keys.t()
        kept = proj.topk(layer.effective_topk, dim=-1).values
        relevance = kept / proj.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    return float((relevance >= layer.threshold).float().mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_timing_options(parser, repeats=20, device=False)
    parser.add_argument("--atoms", type=int, nargs="+", default=[16, 80, 160])
    args = parser.parse_args()
    apply_threads(args)
    torch.manual_seed(0)
    built = routing_kernel.load() is not None
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, tokens {TOKENS}, "
          f"median of {args.repeats}; CPU routing kernel: {'built' if built else 'not available'}")
    for num_atoms in args.atoms:
        totals = {key: 0.0 for key in ("lin_eval", "mo_eval", "pt_eval", "nv_eval", "lin_tr", "mo_tr", "pt_tr",
                                       "nv_tr")}
        print(f"\n== {num_atoms} atoms ==")
        print(f"{'layer':8s} {'eval x lin':>10s} {'torch path':>10s} {'eval nv/mo':>10s} {'train x lin':>11s} "
              f"{'torch path':>10s} {'train nv/mo':>11s} {'max|diff|':>10s} {'gate pass':>9s}")
        for name, (d_in, d_out) in BLOCK.items():
            base, layer, naive = build(d_in, d_out, num_atoms)
            x = torch.randn(*TOKENS, d_in)
            grad = torch.randn(*TOKENS, d_out)  # an upstream gradient like a real one (dense)
            diff = check_same(layer, naive, x)
            passed = gate_pass_fraction(layer, x)
            for module in (base, layer, naive):
                module.eval()
            t = time_round_robin({"lin_eval": eval_step(base, x), "mo_eval": eval_step(layer, x),
                                  "pt_eval": eval_step(layer, x, "no-cpu-kernel"), "nv_eval": eval_step(naive, x)},
                                 args.repeats)
            for module in (base, layer, naive):
                module.train()
            t.update(time_round_robin({"lin_tr": train_step(base, x, grad), "mo_tr": train_step(layer, x, grad),
                                       "pt_tr": train_step(layer, x, grad, "no-cpu-kernel"),
                                       "nv_tr": train_step(naive, x, grad)}, args.repeats))
            for key in totals:
                totals[key] += t[key]
            print(f"{name:8s} {t['mo_eval'] / t['lin_eval']:10.2f} {t['pt_eval'] / t['lin_eval']:10.2f} "
                  f"{t['nv_eval'] / t['mo_eval']:10.2f} {t['mo_tr'] / t['lin_tr']:11.2f} "
                  f"{t['pt_tr'] / t['lin_tr']:10.2f} {t['nv_tr'] / t['mo_tr']:11.2f} {diff:10.1e} {passed:9.1%}")
        print(f"{'block':8s} {totals['mo_eval'] / totals['lin_eval']:10.2f} "
              f"{totals['pt_eval'] / totals['lin_eval']:10.2f} {totals['nv_eval'] / totals['mo_eval']:10.2f} "
              f"{totals['mo_tr'] / totals['lin_tr']:11.2f} {totals['pt_tr'] / totals['lin_tr']:10.2f} "
              f"{totals['nv_tr'] / totals['mo_tr']:11.2f}")
        print(f"  block ms: linear eval {1e3 * totals['lin_eval']:.1f}, MoRAM eval "
              f"{1e3 * totals['mo_eval']:.1f} (torch path {1e3 * totals['pt_eval']:.1f}), naive eval "
              f"{1e3 * totals['nv_eval']:.1f}; linear train {1e3 * totals['lin_tr']:.1f}, MoRAM train "
              f"{1e3 * totals['mo_tr']:.1f} (torch path {1e3 * totals['pt_tr']:.1f}), naive train "
              f"{1e3 * totals['nv_tr']:.1f}")


if __name__ == "__main__":
    main()
