"""Avalanche's own whole-strategy checkpoint, with the torch 2.15 fix scoped to the write."""

import pytest
import torch
from avalanche.checkpointing import maybe_load_checkpoint
from avalanche.training.plugins import EvaluationPlugin

from moram_avalanche.experiments.checkpoint import OPTIMIZER_MODULES, optimizer_names_for_dill, save_checkpoint
from moram_avalanche.layers.base import adapter_state_dict
from moram_avalanche.strategies import MoRAM

pytestmark = pytest.mark.usefixtures("one_thread")


def test_the_fix_exists_only_while_a_checkpoint_is_written():
    missing = [name for name in OPTIMIZER_MODULES if not hasattr(torch.optim, name)]
    with optimizer_names_for_dill():
        assert all(hasattr(torch.optim, name) for name in OPTIMIZER_MODULES)
    assert [name for name in OPTIMIZER_MODULES if not hasattr(torch.optim, name)] == missing


def test_avalanche_checkpoint_of_a_moram_run_round_trips(tiny_clip, tokenizer, make_stream, tmp_path):
    def strategy_for(model):
        return MoRAM(model=model, tokenizer=tokenizer, atoms_per_task=2, topk=2, iterations=2,
                     train_mb_size=4, progress=False, evaluator=EvaluationPlugin(loggers=[]))

    strategy = strategy_for(tiny_clip)
    strategy.train(make_stream("domain").train_stream[0])
    before = set(vars(torch.optim))
    path = save_checkpoint(strategy, tmp_path / "avalanche.pkl")
    assert set(vars(torch.optim)) == before  # nothing left patched
    assert [p.name for p in tmp_path.iterdir()] == ["avalanche.pkl"]  # written atomically, no temp left

    import open_clip

    from tiny_clip import TINY_CONFIG

    fresh = strategy_for(open_clip.CLIP(**TINY_CONFIG))
    loaded, start = maybe_load_checkpoint(fresh, str(path))
    assert start == 1
    saved, restored = adapter_state_dict(strategy.model), adapter_state_dict(loaded.model)
    assert saved.keys() == restored.keys() and all(torch.equal(saved[k], restored[k]) for k in saved)
