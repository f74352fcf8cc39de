"""Avalanche's own ``Naive`` strategy on CLIP, grown by ``MoRAMPlugin``, with Avalanche's metrics and loggers.

What it shows: ``inject_moram`` puts an (empty) atom bank on every frozen linear of CLIP;
``CLIPClassifier`` makes CLIP an ordinary Avalanche model (logits over the stream's classes);
``MoRAMPlugin`` grows every bank by ``atoms_per_task`` atoms when an experience starts and freezes
them when it ends, before Avalanche builds the optimizer, so any ``SupervisedTemplate`` strategy
trains them. ``IterationBudget`` / ``IterationSchedule`` give it the paper's budget (exactly
``n`` minibatches per experience, a per-iteration cosine rate). Avalanche's ``EvaluationPlugin``
collects its accuracy, loss and forgetting metrics for its text and CSV loggers, beside the
package's ``AccuracyMatrix``. At the end it writes ``atoms.json``: the atoms of every layer, by
how many are frozen.

Run it with real weights on X-TAIL (the README's "Data: X-TAIL and MTIL"):

    python examples/avalanche_strategy_with_moram_plugin.py --data-root ~/data --device cuda

``--tiny`` runs offline on the CPU in seconds: the package's tiny CLIP with its ``synthetic``
weights (made once and cached) on two domains of the synthetic stream.
"""

import argparse
import json
from pathlib import Path

import torch
from avalanche.evaluation.metrics import accuracy_metrics, forgetting_metrics, loss_metrics
from avalanche.logging import CSVLogger, TextLogger
from avalanche.training import Naive
from avalanche.training.plugins import EvaluationPlugin

from moram_avalanche import (
    AccuracyMatrix,
    CLIPClassifier,
    IterationBudget,
    IterationSchedule,
    MoRAMLinear,
    MoRAMPlugin,
    find_layers,
    inject_moram,
    load_clip,
    seed_everything,
    synthetic,
    xtail,
)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="ViT-B-16", help="an open_clip model name")
    parser.add_argument("--pretrained", default="openai", help="an open_clip pretrained tag or file")
    parser.add_argument("--data-root", default="~/data", help="X-TAIL's data folder")
    parser.add_argument("--iterations", type=int, default=500, help="minibatches per domain (paper: 500)")
    parser.add_argument("--lr", type=float, default=5e-4, help="AdamW learning rate (paper: 5e-4)")
    parser.add_argument("--batch-size", type=int, default=64, help="training minibatch (paper: 64)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="runs/naive-moram", help="where the logs and matrices are written")
    parser.add_argument("--tiny", action="store_true",
                        help="offline CPU smoke run: tiny CLIP, two synthetic domains, 10 iterations each")
    args = parser.parse_args(argv)
    if args.tiny:
        args.model, args.pretrained, args.device = "moram-synthetic-tiny", "synthetic", "cpu"
        args.iterations, args.batch_size, args.lr = 10, 16, 1e-2  # the demo's rate for the tiny CLIP
    return args


def main(argv=None):
    args = parse_args(argv)
    seed_everything(args.seed)
    out = Path(args.out)
    clip, train_tf, eval_tf, tokenizer = load_clip(args.model, pretrained=args.pretrained, device=args.device)
    if args.tiny:
        bench = synthetic(("shapes", "colours"), train_size=20, test_size=20,
                          train_transform=train_tf, eval_transform=eval_tf)
    else:
        bench = xtail(args.data_root, shots=16, train_transform=train_tf, eval_transform=eval_tf)

    inject_moram(clip)  # the paper's CLIP setting: r = 16 atoms per task, top-k 16, tau 0.01, delta 0.2
    model = CLIPClassifier(clip, tokenizer)
    out.mkdir(parents=True, exist_ok=True)
    matrix = AccuracyMatrix(out_dir=str(out))
    with open(out / "log.txt", "w") as log:
        evaluator = EvaluationPlugin(
            accuracy_metrics(epoch=True, experience=True, stream=True),
            loss_metrics(epoch=True, experience=True, stream=True), forgetting_metrics(experience=True),
            matrix, loggers=[TextLogger(log), CSVLogger(str(out / "csv"))])
        strategy = Naive(model=model, optimizer=torch.optim.AdamW(model.parameters(), lr=args.lr),
                         criterion=torch.nn.CrossEntropyLoss(), train_mb_size=args.batch_size, train_epochs=1,
                         plugins=[IterationBudget(args.iterations), IterationSchedule(args.iterations),
                                  MoRAMPlugin()],
                         evaluator=evaluator, device=args.device)
        for exp in bench.train_stream:
            strategy.train(exp)
            strategy.eval(bench.test_stream)

    layers = find_layers(clip, MoRAMLinear)  # {dotted name: MoRAMLinear}
    atoms = {name: {"frozen": layer.num_frozen, "total": layer.num_atoms} for name, layer in layers.items()}
    (out / "atoms.json").write_text(json.dumps(atoms, indent=1) + "\n")
    print(f"{len(layers)} MoRAM layers, {next(iter(atoms.values()))['total']} atoms each; "
          f"average accuracy {matrix.report()['average']:.1f}%")


if __name__ == "__main__":
    main()
