"""Avalanche's A-GEM on text runs past its first checkpoint (issue 35, class 6).

Avalanche's ``AGEMPlugin`` keeps the running iterator of its memory loader, a generator, which
no pickle can hold: the whole-strategy checkpoint the run path writes after each experience
failed with ``cannot pickle 'generator' object``. The text counterpart draws its memory samples
from plain state; these tests run A-GEM through checkpoints and resume it.
"""

import pickle
import random
import warnings

import torch

from text_runs import benchmark, plugin_of
from text_runs import build_with_batches as build

warnings.filterwarnings("ignore", category=DeprecationWarning)
AGEM = dict(patterns_per_exp=4, sample_size=4)


def seed(value=0):
    random.seed(value)  # A-GEM picks its buffer with Python's random, as Avalanche's does
    torch.manual_seed(value)


def test_agem_on_text_writes_its_checkpoints_and_resumes_as_the_uninterrupted_run(tmp_path, one_thread):
    from avalanche.training.plugins import AGEMPlugin

    from moram_avalanche.experiments.runner import run_stream

    bench = benchmark()
    whole, _, _ = build("avalanche.agem", "llama", **AGEM)
    seed()
    assert run_stream(whole, bench, tmp_path / "whole", progress=False) == 3
    assert (tmp_path / "whole" / "checkpoint.pt").is_file()

    first, _, _ = build("avalanche.agem", "llama", **AGEM)
    seed()
    assert run_stream(first, bench, tmp_path / "cut", max_experiences=1, progress=False) == 1
    resumed, _, _ = build("avalanche.agem", "llama", **AGEM)
    assert run_stream(resumed, bench, tmp_path / "cut", progress=False) == 3
    plugin = plugin_of(resumed, AGEMPlugin)
    assert [len(buffer) for buffer in plugin.buffers] == [4, 4, 4]
    torch.testing.assert_close(resumed.model.state_dict(), whole.model.state_dict(), rtol=0, atol=0)
    torch.testing.assert_close(plugin.reference_gradients, plugin_of(whole, AGEMPlugin).reference_gradients)


def test_the_memory_sample_is_group_balanced_and_the_plugin_pickles_mid_stream(one_thread):
    from avalanche.training.plugins import AGEMPlugin

    bench = benchmark()
    strategy, _, _ = build("avalanche.agem", "llama", **AGEM)
    for experience in list(bench.train_stream)[:2]:
        strategy.train(experience)
    plugin = plugin_of(strategy, AGEMPlugin)
    copy = pickle.loads(pickle.dumps(plugin))
    prompts, answers, tasks = plugin.sample_from_memory()
    assert sorted(tasks.tolist()) == [0, 0, 1, 1]  # sample_size 4 over two buffers: two of each
    again = copy.sample_from_memory()  # the copy draws what the original drew
    assert again[0] == prompts and again[1] == answers and torch.equal(again[2], tasks)
    seen = {plugin.sample_from_memory()[0][0] for _ in range(4)}  # the buffer of 4 is read in a random order
    assert len(seen) >= 2
