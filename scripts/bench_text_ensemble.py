"""Speed of TextHead.ensemble (all templates in one pass) against one encoder call per
template, on MTIL's Caltech101 template list (34 templates) and a tiny random open_clip model.

    python scripts/bench_text_ensemble.py [--classes 101] [--repeats 5]

Prints the median time of each way and their ratio, both measured in this process.
"""

import argparse
import statistics

import open_clip
import torch
import torch.nn.functional as F

from moram_avalanche.benchmarks.images.prompts import ZSCL_TEMPLATES
from moram_avalanche.clip.head import TextHead
from moram_avalanche.utils.clock import now

TINY = {"embed_dim": 64, "vision_cfg": {"image_size": 32, "layers": 1, "width": 64, "patch_size": 8},
        "text_cfg": {"context_length": 32, "vocab_size": 49408, "width": 128, "heads": 2, "layers": 4}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--classes", type=int, default=101)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = open_clip.CLIP(**TINY).eval()
    simple = open_clip.tokenizer.SimpleTokenizer(context_length=32)
    tokenizer = lambda texts: simple(texts)  # noqa: E731
    classes = [f"class {i}" for i in range(args.classes)]
    sets = [[t.format(c) for c in classes] for t in ZSCL_TEMPLATES["Caltech101"]]

    def per_template():
        head = TextHead(model, tokenizer)
        stacked = torch.stack([head.embed(prompts) for prompts in sets])
        return F.normalize(stacked.mean(0), dim=-1)

    def one_pass():
        return TextHead(model, tokenizer).ensemble(sets)

    torch.testing.assert_close(per_template(), one_pass(), rtol=1e-4, atol=1e-5)
    times = {"per template": [], "one pass": []}
    for _ in range(args.repeats):  # round robin, fresh heads (no cache)
        for name, fn in (("per template", per_template), ("one pass", one_pass)):
            start = now()
            fn()
            times[name].append(now() - start)
    medians = {k: statistics.median(v) for k, v in times.items()}
    for name, value in medians.items():
        print(f"{name:>13}: {value * 1000:8.1f} ms  ({len(sets)} templates x {len(classes)} classes)")
    print(f"per template / one pass: {medians['per template'] / medians['one pass']:.2f}x")


if __name__ == "__main__":
    main()
