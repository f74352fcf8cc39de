"""CLIP + MoRAM in your own Avalanche training loop.

What it shows: load CLIP, build a continual stream, the ``MoRAM`` strategy (an ordinary
Avalanche strategy: its atom banks grow by ``atoms_per_task`` rank-1 atoms at every
experience), then ``for exp in stream: train; eval`` with ``AccuracyMatrix`` filling the
accuracy matrix ``A[t, d]`` (after training on ``t``, accuracy on domain ``d``).

Run it with real weights on X-TAIL (the data laid out as the README's "Data: X-TAIL and MTIL"
says; the paper's CLIP settings are MoRAM's defaults, 500 iterations per domain):

    python examples/clip_moram_avalanche_loop.py --data-root ~/data --device cuda

``--tiny`` runs offline on the CPU in seconds: the package's tiny CLIP with its ``synthetic``
weights (made once and cached, about a minute the first time) on the synthetic five-domain
stream, a few iterations per domain.
"""

import argparse
import json

from avalanche.logging import TensorboardLogger
from avalanche.training.plugins import EvaluationPlugin

from moram_avalanche import AccuracyMatrix, MoRAM, load_clip, seed_everything, synthetic, xtail


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="ViT-B-16", help="an open_clip model name")
    parser.add_argument("--pretrained", default="openai", help="an open_clip pretrained tag or file")
    parser.add_argument("--data-root", default="~/data", help="X-TAIL's data folder")
    parser.add_argument("--iterations", type=int, default=500, help="optimizer steps per domain (paper: 500)")
    parser.add_argument("--lr", type=float, default=5e-4, help="AdamW learning rate (paper: 5e-4)")
    parser.add_argument("--batch-size", type=int, default=64, help="training minibatch (paper: 64)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="runs/moram-loop", help="where the accuracy matrix is written")
    parser.add_argument("--tiny", action="store_true",
                        help="offline CPU smoke run: tiny CLIP, synthetic stream, 10 iterations per domain")
    args = parser.parse_args(argv)
    if args.tiny:
        args.model, args.pretrained, args.device = "moram-synthetic-tiny", "synthetic", "cpu"
        args.iterations, args.batch_size, args.lr = 10, 16, 1e-2  # the demo's rate for the tiny CLIP
    return args


def main(argv=None):
    args = parse_args(argv)
    seed_everything(args.seed)
    model, train_tf, eval_tf, tokenizer = load_clip(args.model, pretrained=args.pretrained, device=args.device)
    if args.tiny:  # three of the synthetic domains, 20 images each
        bench = synthetic(("shapes", "colours", "glyphs"), train_size=20, test_size=20,
                          train_transform=train_tf, eval_transform=eval_tf)
    else:
        bench = xtail(args.data_root, shots=16, train_transform=train_tf, eval_transform=eval_tf)
    matrix = AccuracyMatrix(out_dir=args.out)  # results.json, accuracy_matrix.csv
    strategy = MoRAM(model=model, tokenizer=tokenizer,  # the paper's CLIP defaults: r 16, k 16, tau 0.01, delta 0.2
                     iterations=args.iterations, lr=args.lr, train_mb_size=args.batch_size, device=args.device,
                     progress=not args.tiny,
                     evaluator=EvaluationPlugin(matrix, loggers=[TensorboardLogger(f"{args.out}/tb")]))
    for exp in bench.train_stream:
        strategy.train(exp)
        strategy.eval(bench.test_stream)
    report = matrix.report()
    print(json.dumps({key: report[key] for key in ("domains", "transfer", "average", "last")}, indent=1))


if __name__ == "__main__":
    main()
