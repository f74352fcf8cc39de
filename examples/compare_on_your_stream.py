"""Compare MoRAM with fine-tuning and other baselines on your own stream of image folders, from Python.

What it shows: your data as a continual stream -- one domain per folder, laid out as
torchvision's ``ImageFolder`` reads it (``ROOT/<domain>/{train,test}/<class name>/*.png``), the
class names taken from the folder names and a prompt template per domain -- built with
``clip_benchmark``; then ``run_comparison``, the machinery of the ``compare`` sub-command: every
strategy from the same freshly loaded CLIP, the same data, seed and budget. It writes under
``--out``: ``table.md`` / ``table.csv`` (Transfer, Average and Last per strategy and domain),
``summary.md``, ``accuracy_matrices.png`` and one run folder per strategy with its accuracy
matrix (``<strategy>/accuracy_matrix.csv``, ``results.json``), resumable per strategy.

Run it with real weights on your folders (the paper's budget: 500 iterations of 64 per domain):

    python examples/compare_on_your_stream.py --data-root ~/my-stream --domains aircraft,flowers,pets --device cuda

``--tiny`` runs offline on the CPU in seconds: it first writes a toy stream of two domains
(coloured squares by colour, striped squares by stripe direction) as image folders beside
``--out`` (``<out>-toy-stream``), then compares ZeroShot, FineTune and MoRAM on it with the package's tiny CLIP
(10 iterations per domain at the demo's learning rates).
"""

import argparse
from pathlib import Path

from torchvision.datasets import ImageFolder

from moram_avalanche import Domain, Setup, clip_benchmark, load_clip, run_comparison

#: your prompt per domain (CLIP reads the class name in it); a domain not listed gets DEFAULT_TEMPLATE
TEMPLATES = {"colours": "a square of {} colour.", "stripes": "a square with {} stripes."}
DEFAULT_TEMPLATE = "a photo of a {}."
#: --tiny's options of its own per strategy: the demo's learning rates for the tiny CLIP
#: (moram_avalanche.experiments.clip.demo.DemoConfig); with real weights each strategy's default is the paper's
TINY_OPTIONS = {"finetune": {"lr": 3e-4}, "moram": {"lr": 1e-2}}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-root", default="~/my-stream", help="ROOT/<domain>/{train,test}/<class>/<image>")
    parser.add_argument("--domains", default=None, help="comma-separated, in stream order (default: ROOT's folders, sorted)")
    parser.add_argument("--strategies", default=None,
                        help="registry names, as `compare --strategies` takes them (default: zeroshot,finetune,wiseft,"
                             "lwf,moram; --tiny: zeroshot,finetune,moram)")
    parser.add_argument("--model", default="ViT-B-16", help="an open_clip model name")
    parser.add_argument("--pretrained", default="openai", help="an open_clip pretrained tag or file")
    parser.add_argument("--iterations", type=int, default=500, help="minibatches per domain (paper: 500)")
    parser.add_argument("--batch-size", type=int, default=64, help="paper: 64")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--seed", type=int, default=42, help="compare's default, the MoRAM release's")
    parser.add_argument("--out", default="runs/my-stream-compare")
    parser.add_argument("--tiny", action="store_true",
                        help="offline CPU smoke run: a toy stream written under --out, the tiny CLIP, 5 iterations")
    args = parser.parse_args(argv)
    args.options = {}  # per strategy, as compare's --set STRATEGY.KEY=VALUE
    if args.tiny:
        args.model, args.pretrained, args.device = "moram-synthetic-tiny", "synthetic", "cpu"
        args.strategies = args.strategies or "zeroshot,finetune,moram"
        args.iterations, args.batch_size, args.options = 10, 8, TINY_OPTIONS
        args.data_root = write_toy_stream(f"{args.out}-toy-stream")  # beside --out: never inside it
    return args


def write_toy_stream(root, per_class=6, size=32):
    """The ``--tiny`` stream as image folders: squares of a colour, squares striped one way."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    colours = {"red": (220, 30, 30), "green": (30, 180, 40), "blue": (40, 60, 220)}
    drawers = {
        "colours": {name: (lambda a, c=c: a + np.array(c)) for name, c in colours.items()},
        "stripes": {"horizontal": lambda a: a + 200 * (np.arange(size)[:, None, None] // 4 % 2),
                    "vertical": lambda a: a + 200 * (np.arange(size)[None, :, None] // 4 % 2)},
    }
    for domain, classes in drawers.items():
        for split in ("train", "test"):
            for name, draw in classes.items():
                folder = Path(root, domain, split, name)
                folder.mkdir(parents=True, exist_ok=True)
                for i in range(per_class):
                    pixels = draw(rng.integers(0, 40, (size, size, 3))).clip(0, 255).astype(np.uint8)
                    Image.fromarray(pixels).save(folder / f"{i}.png")
    return str(root)


def my_stream(root, domains, train_transform, eval_transform):
    """One experience per domain folder; labels are each domain's own (ImageFolder: sorted class folders)."""
    root = Path(root).expanduser()
    names = domains.split(",") if domains else sorted(p.name for p in root.iterdir() if p.is_dir())
    train = [ImageFolder(root / name / "train") for name in names]
    test = [ImageFolder(root / name / "test") for name in names]
    domain_list = [Domain(name, data.classes, TEMPLATES.get(name, DEFAULT_TEMPLATE)) for name, data in zip(names, train)]
    return clip_benchmark(domain_list, train, test, label_space="all",  # X-TAIL's: every class of every domain
                          train_transform=train_transform, eval_transform=eval_transform)


def main(argv=None):
    args = parse_args(argv)
    budget = {"iterations": args.iterations, "train_mb_size": args.batch_size}
    setup = Setup(
        make_model=lambda: load_clip(args.model, pretrained=args.pretrained, device=args.device),
        make_benchmark=lambda train_tf, eval_tf: my_stream(args.data_root, args.domains, train_tf, eval_tf),
        # each strategy's keyword arguments: the shared budget (ZeroShot trains nothing) and its own options
        options=lambda name, eval_tf: {**({} if name == "zeroshot" else budget), **args.options.get(name, {})},
        settings={"data": str(Path(args.data_root).expanduser().resolve()), "model": args.model,
                  "pretrained": args.pretrained, **budget},  # recorded; a resumed comparison must match them
        seed=args.seed, device=args.device, data_roots=(args.data_root,))
    strategies = (args.strategies or "zeroshot,finetune,wiseft,lwf,moram").split(",")
    reports = run_comparison(setup, strategies, args.out, progress=not args.tiny)
    for name, report in reports.items():
        print(f"{name:>10}: transfer {report.get('transfer', float('nan')):5.1f}  "
              f"average {report['average']:5.1f}  last {report['last']:5.1f}")


if __name__ == "__main__":
    main()
