"""Estimated GPU time of every ``moram-avalanche reproduce`` table, from stated per-image costs.

No GPU was available to this project, so nothing here is measured: the estimate multiplies the
images each run processes by a cost per image. The costs the MoRAM paper gives (its latency
table, GPU not named) are used as given; the others are assumptions, each said below; pass
``--cost NAME=TRAIN_MS,EVAL_MS`` to replace one (e.g. with ratios from
``scripts/bench_reproduce_costs.py`` on your GPU times MoRAM's cost).

Images per run: 500 iterations x 64 images per task; a full evaluation of every domain's test
set after every task (X-TAIL: 89,913 test images, CoOp splits + MNIST; 5-shot MTIL: about
97,209, ZSCL's splits). Run: python scripts/estimate_reproduce_gpu_time.py [--cost ...]
"""

from __future__ import annotations

import argparse

#: test images per evaluation (datasets reference, section 1)
XTAIL_TEST = 3333 + 2465 + 1692 + 8100 + 2463 + 30300 + 10000 + 3669 + 8041 + 19850
MTIL_TEST = 3333 + 1736 + 10000 + 1880 + 5400 + 6149 + 25250 + 10000 + 3669 + 8041 + 21751
#: (tasks, test images per evaluation)
PROTOCOLS = {"xtail": (10, XTAIL_TEST), "mtil": (11, MTIL_TEST)}
TRAIN_IMAGES_PER_TASK = 500 * 64

MORAM_TRAIN = 8.32  # ms per training image (paper, tab:latency)
MORAM_EVAL = 2.30   # ms per test image, the mean of 2.07 (after task 1) .. 2.52 (after task 10)
CLIP_EVAL = 1.95    # ms per test image (paper)
FULL_FT_TRAIN = 1.5 * MORAM_TRAIN  # assumption: gradients for every weight
#: strategy -> (ms per training image, ms per test image, where it comes from)
COSTS = {
    "zeroshot": (0.0, CLIP_EVAL, "paper (CLIP inference)"),
    "moram": (MORAM_TRAIN, MORAM_EVAL, "paper"),
    "finetune-alone": (FULL_FT_TRAIN, CLIP_EVAL, "assumed 1.5x MoRAM training; CLIP inference"),
    "wiseft": (FULL_FT_TRAIN, CLIP_EVAL, "as fine-tuning"),
    "lwf": (2 * FULL_FT_TRAIN + FULL_FT_TRAIN / 3, CLIP_EVAL,
            "assumed: a second forward-backward on the distillation batch + a teacher forward"),
    "lwf-vr": (2 * FULL_FT_TRAIN + FULL_FT_TRAIN / 3, CLIP_EVAL, "as LwF"),
    "zscl": (2 * FULL_FT_TRAIN + FULL_FT_TRAIN / 3 + 0.4, CLIP_EVAL,
             "as LwF on the reference batch, + the L2 anchor's host copy"),
    "moe-adapters": (8.56, 3.25, "paper (DDAS's small autoencoders not counted)"),
    "inflora": (0.8 * MORAM_TRAIN, CLIP_EVAL, "assumed 0.8x MoRAM (image encoder only); merged: CLIP"),
    "moe-lora": (MORAM_TRAIN, MORAM_EVAL, "assumed as MoRAM"),
    "icarl": (2 * FULL_FT_TRAIN + FULL_FT_TRAIN / 3, CLIP_EVAL, "as LwF (distillation on an exemplar batch)"),
    "rail-primal": (0.0, 1.03 * CLIP_EVAL,
                    "training-free: one image forward per 16-shot training image (~17,600 on X-TAIL, "
                    "minutes) neglected; inference CLIP + 3% (scripts/bench_rail.py)"),
    "codyra": (MORAM_TRAIN, CLIP_EVAL, "assumed as MoRAM in training (rank-16 LoRA on the same linears); "
               "merged: CLIP inference"),
    "moram-variant": (MORAM_TRAIN, MORAM_EVAL, "assumed as MoRAM (routing ablations, pruning, sweeps)"),
    "moram-plain-path": (1.15 * MORAM_TRAIN, MORAM_EVAL,
                         "assumed +15% training: external router, load balancing (plain-autograd path)"),
}

#: table -> runs: (strategy cost key, protocol, seeds); a run is shared by the tables that name it
TABLES = {
    "xtail": [(s, "xtail", (42,)) for s in ("zeroshot", "finetune-alone", "lwf", "wiseft", "icarl", "zscl",
                                             "moe-adapters", "rail-primal", "codyra", "moram")],
    "xtail-order2": [(s, "xtail-2", (42,)) for s in ("zeroshot", "lwf", "wiseft", "zscl", "moe-adapters",
                                                     "rail-primal", "codyra", "moram")],
    "mtil": [(s, "mtil", (42,)) for s in ("zeroshot", "lwf", "lwf-vr", "wiseft", "zscl", "moe-adapters",
                                           "rail-primal", "codyra", "moram")],
    "routing": [("moe-lora", "xtail", (42,)), ("moram", "xtail", (42,))]
    + [("moram-plain-path:router", "xtail", (42,))]
    + [(f"moram-variant:{row}", "xtail", (42,)) for row in ("self", "topk", "temperature", "threshold")],
    "robustness": [("inflora", "xtail", (42, 43, 44)), ("codyra", "xtail", (42, 43, 44)),
                   ("moram", "xtail", (42, 43, 44))],
    "pruning": [("moram", "xtail", (42,)), ("moram-variant:pruning", "xtail", (42,))],
    "load-balance": [("moram", "xtail", (42,)), ("moram-plain-path:balance", "xtail", (42,))],
    "sweeps": [("moram", "xtail", (42,))] + [(f"moram-variant:sweep{i}", "xtail", (42,)) for i in range(12)],
    "additional-baselines": [("moram", "xtail", (42,))],
}


def hours(strategy: str, protocol: str) -> float:
    tasks, test = PROTOCOLS[protocol.split("-")[0]]
    train_ms, eval_ms, _ = COSTS[strategy.split(":")[0]]
    return (tasks * TRAIN_IMAGES_PER_TASK * train_ms + tasks * test * eval_ms) / 1000 / 3600


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cost", action="append", default=[], metavar="NAME=TRAIN_MS,EVAL_MS")
    args = parser.parse_args()
    for item in args.cost:
        name, _, values = item.partition("=")
        train, evaluation = (float(v) for v in values.split(","))
        COSTS[name] = (train, evaluation, "given")
    print("| strategy | ms / training image | ms / test image | source | X-TAIL run (h) | MTIL run (h) |")
    print("|---|---|---|---|---|---|")
    for name, (train, evaluation, source) in COSTS.items():
        print(f"| {name} | {train:.2f} | {evaluation:.2f} | {source} | {hours(name, 'xtail'):.2f} | "
              f"{hours(name, 'mtil'):.2f} |")
    print("\n| table | runs | new after the tables above | GPU hours | new GPU hours |\n|---|---|---|---|---|")
    done, total = set(), 0.0
    for table, runs in TABLES.items():
        keys = [(s, p, seed) for s, p, seeds in runs for seed in seeds]
        new = [k for k in keys if k not in done]
        all_hours = sum(hours(s, p) for s, p, _ in keys)
        new_hours = sum(hours(s, p) for s, p, _ in new)
        done.update(keys)
        total += new_hours
        print(f"| {table} | {len(keys)} | {len(new)} | {all_hours:.1f} | {new_hours:.1f} |")
    print(f"| all | {len(done)} | | {total:.1f} | |")


if __name__ == "__main__":
    main()
