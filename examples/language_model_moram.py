"""MoRAM on a language model's continual stream: T5 (or LLaMA) learning classification tasks in turn.

What it shows: ``load_language_model`` (a Hub name or a folder), a text stream (the paper's
standard CL benchmark, order 1: dbpedia, amazon, yahoo, ag_news), and ``TextMoRAM``, the
generative loop with MoRAM atoms on the query and key projections (the paper's language-model
setting: r = 8 atoms per task and layer, top-k 4, tau 0.1, delta 0.2, dropout 0.1; AdamW at a
constant 1e-3, batch 64, one epoch per task). Every answer is generated greedily and scored by
exact match, so ``AccuracyMatrix`` fills ``A[t, d]`` with the accuracy on task ``d`` after task
``t``, and ``results.json`` holds OP (the mean of the last row) and BWT (positive = forgetting).

Run it with real weights (O-LoRA's ``CL_Benchmark`` folder; ``meta-llama/Llama-3.2-1B-Instruct``
works the same):

    python examples/language_model_moram.py --model google-t5/t5-large --data-root CL_Benchmark --device cuda

``--tiny`` runs offline on the CPU in seconds: a tiny random T5 and a word-level tokenizer built
from a config, on three tasks of the package's synthetic text stream, a few steps per task.
"""

import argparse
import json
from pathlib import Path

from avalanche.logging import TensorboardLogger
from avalanche.training.plugins import EvaluationPlugin

from moram_avalanche import AccuracyMatrix, TextMoRAM, lm_cl, load_language_model, seed_everything, synthetic_text
from moram_avalanche.benchmarks.text.synthetic import synthetic_text_tasks


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="google-t5/t5-large", help="a seq2seq or causal model: Hub name or folder")
    parser.add_argument("--data-root", default="CL_Benchmark", help="O-LoRA's CL_Benchmark folder")
    parser.add_argument("--order", type=int, default=1, help="the paper's task order (1-6)")
    parser.add_argument("--lr", type=float, default=1e-3, help="AdamW, constant (paper: 1e-3)")
    parser.add_argument("--batch-size", type=int, default=64, help="paper: 64")
    parser.add_argument("--iterations", type=int, default=None, help="minibatches per task (default: one epoch)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="runs/t5-moram", help="where the accuracy matrix is written")
    parser.add_argument("--tiny", action="store_true",
                        help="offline CPU smoke run: a tiny random T5, three synthetic tasks, 8 steps each")
    args = parser.parse_args(argv)
    if args.tiny:
        args.iterations, args.batch_size, args.lr, args.device = 8, 8, 5e-3, "cpu"  # the text demo's rate
    return args


TINY_TASKS = ("colour", "mood", "topic")


def main(argv=None):
    args = parse_args(argv)
    seed_everything(args.seed)
    if args.tiny:  # a tiny random T5 saved as a folder, loaded below as a Hub name is
        from tiny_t5 import save_tiny_t5

        args.model = save_tiny_t5(Path(args.out) / "tiny-t5", synthetic_text_tasks(TINY_TASKS))
        stream = synthetic_text(TINY_TASKS)
    else:
        stream = lm_cl(args.data_root, order=args.order)
    model, tokenizer = load_language_model(args.model)
    matrix = AccuracyMatrix(out_dir=args.out)  # results.json (OP, BWT), accuracy_matrix.csv
    strategy = TextMoRAM(model=model, tokenizer=tokenizer,  # the paper's LLM setting: r 8, k 4, tau 0.1, delta 0.2
                         lr=args.lr, train_mb_size=args.batch_size, iterations=args.iterations,
                         max_new_tokens=3 if args.tiny else 50, device=args.device, progress=not args.tiny,
                         evaluator=EvaluationPlugin(matrix, loggers=[TensorboardLogger(f"{args.out}/tb")]))
    for exp in stream.train_stream:
        strategy.train(exp)
        strategy.eval(stream.test_stream)
    report = matrix.report()
    print(json.dumps({key: report[key] for key in ("domains", "op", "bwt")}, indent=1))


if __name__ == "__main__":
    main()
