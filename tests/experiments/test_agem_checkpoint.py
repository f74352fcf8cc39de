"""Avalanche's A-GEM on CLIP runs past its first checkpoint (issue 35 part B, class 6 on CLIP).

Avalanche's ``AGEMPlugin`` keeps the running iterator of its memory loader, a generator: the
whole-strategy checkpoint that ``run`` writes after each experience of ``avalanche.agem`` failed
with ``cannot pickle 'generator' object`` (a traceback, nothing resumable). The registry's entry
re-classes the plugin as one that samples from plain state
(:class:`~moram_avalanche.strategies.plugins.agem.CheckpointableAGEMPlugin`, shared with the
text loop's); a resumed run ends as the uninterrupted one.
"""

import pickle
import random
import warnings

import torch

from clip_runs import fresh_run
from moram_avalanche.experiments.runner import run_stream

warnings.filterwarnings("ignore", message="No loggers specified")
AGEM = dict(patterns_per_exp=4, sample_size=4, lr=1e-3)


def agem(make_stream, tokenizer):
    from moram_avalanche.strategies.registry import get_strategy

    random.seed(0)  # A-GEM picks its buffer with Python's random, as Avalanche's does
    return fresh_run(get_strategy("avalanche.agem"), make_stream, tokenizer, **AGEM)


def plugin_of(strategy):
    from avalanche.training.plugins import AGEMPlugin

    return next(p for p in strategy.plugins if isinstance(p, AGEMPlugin))


def test_agem_on_clip_writes_its_checkpoints_and_resumes_as_the_uninterrupted_run(make_stream, tokenizer, tmp_path):
    from moram_avalanche.experiments.metrics import accuracy_matrix_of

    whole, benchmark, metric = agem(make_stream, tokenizer)
    assert run_stream(whole, benchmark, tmp_path / "whole", progress=False) == 3
    assert (tmp_path / "whole" / "checkpoint.pt").is_file()
    expected = metric.result().tolist()

    first, benchmark, _ = agem(make_stream, tokenizer)
    assert run_stream(first, benchmark, tmp_path / "cut", max_experiences=1, progress=False) == 1
    torch.rand(1000)  # a new process: the global RNG moved on
    resumed, benchmark, _ = agem(make_stream, tokenizer)
    assert run_stream(resumed, benchmark, tmp_path / "cut", progress=False) == 3
    assert accuracy_matrix_of(resumed).result().tolist() == expected
    assert [len(buffer) for buffer in plugin_of(resumed).buffers] == [4, 4, 4]
    state = resumed.model.state_dict()
    assert all(torch.equal(state[k], v) for k, v in whole.model.state_dict().items())


def test_the_clip_memory_sample_is_group_balanced_and_pickles_mid_stream(make_stream, tokenizer):
    from moram_avalanche.strategies.plugins.agem import CheckpointableAGEMPlugin

    strategy, benchmark, _ = agem(make_stream, tokenizer)
    for experience in list(benchmark.train_stream)[:2]:
        strategy.train(experience)
    plugin = plugin_of(strategy)
    assert type(plugin) is CheckpointableAGEMPlugin
    copy = pickle.loads(pickle.dumps(plugin))
    images, labels, tasks = plugin.sample_from_memory()
    assert images.shape[0] == 4 and sorted(tasks.tolist()) == [0, 0, 1, 1]  # two of each buffer
    again = copy.sample_from_memory()  # the copy draws what the original drew
    assert torch.equal(again[0], images) and torch.equal(again[1], labels)
