"""Tiny CLIP runs for the run-path tests: a strategy on the tiny CLIP and a three-domain stream of
random tensors (``make_stream``, a fixture of tests/conftest.py)."""

import open_clip
import torch
from avalanche.training.plugins import EvaluationPlugin

from moram_avalanche.experiments.clip.demo import TINY_CONFIG as DEMO_TINY_CONFIG
from moram_avalanche.experiments.metrics import AccuracyMatrix
from moram_avalanche.strategies import MoRAM
from tiny_clip import TINY_CONFIG


def fresh_run(strategy_class, make_stream, tokenizer, **kwargs):
    torch.manual_seed(0)
    model = open_clip.CLIP(**TINY_CONFIG)
    metric = AccuracyMatrix()
    if strategy_class.needs.trains:
        kwargs = dict(kwargs, iterations=3)
    strategy = strategy_class(model=model, tokenizer=tokenizer, train_mb_size=4,
                              evaluator=EvaluationPlugin(metric, loggers=[]), progress=False, **kwargs)
    return strategy, make_stream("all", train_sizes=(8, 6, 6)), metric


def fresh_moram(make_stream, tokenizer, out_dir, plugins=(), **kwargs):
    torch.manual_seed(0)
    model = open_clip.CLIP(**DEMO_TINY_CONFIG)
    options = dict(atoms_per_task=2, topk=2, lr=1e-2, iterations=2)
    options.update(kwargs)
    metric = AccuracyMatrix(out_dir=out_dir)
    strategy = MoRAM(model=model, tokenizer=tokenizer, train_mb_size=4, progress=False, plugins=list(plugins),
                     evaluator=EvaluationPlugin(metric, loggers=[]), **options)
    return strategy, make_stream("all", train_sizes=(4, 4, 4)), metric
