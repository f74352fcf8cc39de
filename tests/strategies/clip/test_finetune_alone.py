"""FineTuneAlone: every experience fine-tunes the pre-trained weights on its domain alone."""

import warnings

import open_clip
import torch
from avalanche.core import SupervisedPlugin
from avalanche.training.plugins import EvaluationPlugin

from moram_avalanche.experiments.metrics import AccuracyMatrix
from moram_avalanche.experiments.runner import run_stream
from moram_avalanche.strategies import FineTuneAlone, ZSCLFineTune
from tiny_clip import TINY_CONFIG

warnings.filterwarnings("ignore", message="No loggers specified")


class StartWeights(SupervisedPlugin):
    """The model's weights when each experience starts training (after every plugin's
    before_training_exp ran: this plugin comes last)."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def before_training_epoch(self, strategy, **kwargs):
        self.seen.append({k: v.detach().clone() for k, v in strategy.model.state_dict().items()})


def run(strategy_class, make_stream, tokenizer, tmp_path):
    torch.manual_seed(0)
    model = open_clip.CLIP(**TINY_CONFIG)
    initial = {k: v.clone() for k, v in model.state_dict().items()}
    starts, matrix = StartWeights(), AccuracyMatrix()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # warm-up >= iterations at this budget
        strategy = strategy_class(model=model, tokenizer=tokenizer, iterations=3, lr=1e-3, train_mb_size=4,
                                  progress=False, plugins=[starts],
                                  evaluator=EvaluationPlugin(matrix, loggers=[]))
    run_stream(strategy, make_stream("all"), tmp_path, progress=False)
    return initial, starts.seen, matrix.result()


def test_every_experience_starts_from_the_pretrained_weights(make_stream, tokenizer, tmp_path):
    initial, starts, matrix = run(FineTuneAlone, make_stream, tokenizer, tmp_path / "alone")
    assert len(starts) == 3
    for start in starts:
        assert all(torch.equal(start[k], v) for k, v in initial.items())
    # sequential fine-tuning starts the second experience from the first one's result
    initial, sequential, _ = run(ZSCLFineTune, make_stream, tokenizer, tmp_path / "sequential")
    assert not all(torch.equal(sequential[1][k], v) for k, v in initial.items())
    assert matrix.shape == (3, 3)
