"""Tiny runs of the language-model strategies on the synthetic text stream: mechanics, not
learning (a handful of iterations per task, so each run takes seconds)."""

import numpy as np
from avalanche.training.plugins import EvaluationPlugin, SupervisedPlugin

from tiny_stream import FAMILIES, TASKS, stream_tokenizer

SIZES = dict(train_per_label=2, test_per_label=1)
FAST = dict(train_mb_size=4, iterations=2, lr=1e-2, max_new_tokens=2)


def benchmark():
    from moram_avalanche.benchmarks import synthetic_text

    return synthetic_text(TASKS, **SIZES)


def killed_and_resumed(fresh, tmp_path, kill_after=1):
    """``fresh()`` (a new ``(strategy, accuracy matrix)``, as a new process builds it) run over
    :func:`benchmark` whole, then again killed after ``kill_after`` experiences and resumed by
    another ``fresh()``: the resumed run must end with the whole run's accuracy matrix (lean
    checkpoints: each strategy's own matrix) and its last checkpoint hold what the whole run's does,
    every tensor equal (:func:`assert_same_run_states`). Returns the whole, killed and resumed strategies."""
    from moram_avalanche.experiments.runner import run_stream

    whole, whole_matrix = fresh()
    run_stream(whole, benchmark(), tmp_path / "whole", progress=False)
    killed, _ = fresh()
    assert run_stream(killed, benchmark(), tmp_path / "killed", max_experiences=kill_after,
                      progress=False) == kill_after
    resumed, matrix = fresh()
    assert run_stream(resumed, benchmark(), tmp_path / "killed", progress=False) == len(TASKS)
    np.testing.assert_array_equal(matrix.result(), whole_matrix.result())
    assert_same_run_states(tmp_path / "whole", tmp_path / "killed")
    return whole, killed, resumed


def assert_same_run_states(folder, other):
    """The last checkpoints of two run folders hold the same entries, every tensor exactly equal
    (``torch.equal``): the trained state, each plugin's and metric's state, the clock and every
    random generator's state (a resumed run that drew one number more or less fails here)."""
    from moram_avalanche.experiments.checkpoint import read_run_state
    from moram_avalanche.experiments.runner import CHECKPOINT_NAME

    differences = _differences(read_run_state(folder / CHECKPOINT_NAME), read_run_state(other / CHECKPOINT_NAME))
    assert not differences, f"the run states differ at: {', '.join(differences[:8])}"


def _differences(a, b, where="state"):
    """The places (``state.model.prefix.weight``, ``state.rng.torch``, ...) where ``a`` and ``b`` differ."""
    import torch

    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        same = isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
        return [] if same else [where]
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return [f"{where} (keys {sorted(map(str, a.keys() ^ b.keys()))})"]
        return [place for key in a for place in _differences(a[key], b[key], f"{where}.{key}")]
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b):
        return [place for i, (x, y) in enumerate(zip(a, b)) for place in _differences(x, y, f"{where}[{i}]")]
    return [] if a == b else [where]


def build(name, family="t5", seed=0, plugins=None, **options):
    from avalanche.training.plugins import EvaluationPlugin

    from moram_avalanche.experiments.metrics import AccuracyMatrix
    from moram_avalanche.strategies.registry import get_strategy

    tokenizer = stream_tokenizer()
    model = FAMILIES[family](tokenizer, seed=seed)
    matrix = AccuracyMatrix()
    strategy = get_strategy(name, family="text")(model=model, tokenizer=tokenizer, plugins=plugins,
                                                 evaluator=EvaluationPlugin(matrix, loggers=[]),
                                                 **{**FAST, **options})
    return strategy, matrix


def run(strategy, bench, tasks=None):
    for experience in list(bench.train_stream)[:tasks]:
        strategy.train(experience)
        strategy.eval(bench.test_stream)


class Batches(SupervisedPlugin):
    """The prompts of every training batch and the loss before / after the plugins' terms, per task."""

    def __init__(self):
        super().__init__()
        self.prompts, self.token_loss, self.total_loss = [], [], []

    def before_training_exp(self, strategy, **kwargs):
        self.prompts.append([])
        self.token_loss.append([])
        self.total_loss.append([])

    def before_backward(self, strategy, **kwargs):  # runs first: the user's plugins precede the strategy's
        self.prompts[-1].append(list(strategy.mb_x))
        self.token_loss[-1].append(float(strategy.loss.detach()))

    def after_backward(self, strategy, **kwargs):
        self.total_loss[-1].append(float(strategy.loss.detach()))


def build_with_batches(name, family="llama", plugins=(), **options):
    from moram_avalanche.experiments.metrics import AccuracyMatrix
    from moram_avalanche.strategies.registry import get_strategy

    tokenizer = stream_tokenizer()
    model = FAMILIES[family](tokenizer, seed=0)
    matrix, batches = AccuracyMatrix(), Batches()
    strategy = get_strategy(name, family="text")(model=model, tokenizer=tokenizer, plugins=[batches, *plugins],
                                                 evaluator=EvaluationPlugin(matrix, loggers=[]),
                                                 **{**FAST, **options})
    return strategy, matrix, batches


def plugin_of(strategy, kind):
    return next(p for p in strategy.plugins if isinstance(p, kind))
