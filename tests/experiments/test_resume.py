"""A run interrupted between experiences resumes to the same result as an uninterrupted run."""

import warnings

import pytest
import torch

from clip_runs import fresh_run
from moram_avalanche.experiments.runner import run_stream
from moram_avalanche.layers.base import find_layers
from moram_avalanche.layers.moram.layer import MoRAMLinear
from moram_avalanche.strategies import ZSCL, CoDyRA, FineTune, ICaRL, LwFVR, MoRAM, RAILDual, RAILPrimal, WiSEFT

warnings.filterwarnings("ignore", message="No loggers specified")


ZSCL_REFERENCES = {
    "reference_images": torch.utils.data.TensorDataset(
        torch.randn(6, 3, 32, 32, generator=torch.Generator().manual_seed(1))),
    "reference_sentences": ["a cat.", "a red dog.", "two birds."],
}


@pytest.mark.parametrize("strategy_class,kwargs", [
    (MoRAM, dict(atoms_per_task=4, topk=2, lr=1e-2)),
    (FineTune, dict(lr=1e-3)),
    # their extra state (zero-shot teacher and WiSE anchor, LwF teacher = previous model, ZSCL's
    # anchor and average, the virtual sentences) is rebuilt from the model and the arguments
    (ZSCL, {"lr": 1e-3, "warmup": 1, "average_every": 2, **ZSCL_REFERENCES}),
    (LwFVR, {"lr": 1e-3, "warmup": 1, "sentences": 20}),
    (WiSEFT, {"lr": 1e-3, "warmup": 1, "anchor": "zeroshot"}),
    # training-free: the analytic head (ridge state, random expansion, kernel memory) is the state
    (RAILPrimal, {"hidden_dim": 24}),
    (RAILDual, {}),
    # gates thresholded after iterations 1 and 2 (kappa 0.1), merged and restarted after each task
    # the herded memory (indices) is the state; the zero-shot teacher is rebuilt from the model
    (ICaRL, {"lr": 1e-3, "warmup": 1, "memory_size": 5}),
    (CoDyRA, dict(rank=4, lr=1e-2, max_kappa=0.1, kappa_steps=3, dense_fraction=0.0)),
])
def test_resume_after_interruption_gives_the_identical_matrix(strategy_class, kwargs, make_stream,
                                                              tokenizer, tmp_path):
    strategy, benchmark, metric = fresh_run(strategy_class, make_stream, tokenizer, **kwargs)
    assert run_stream(strategy, benchmark, tmp_path / "whole", progress=False) == 3
    expected_matrix, expected_state = metric.result(), strategy.model.state_dict()
    expected_head = strategy.head.ridge.state_dict() if isinstance(strategy, (RAILPrimal, RAILDual)) else {}

    strategy, benchmark, metric = fresh_run(strategy_class, make_stream, tokenizer, **kwargs)
    assert run_stream(strategy, benchmark, tmp_path / "cut", max_experiences=1, progress=False) == 1
    # a new process: new objects, and the global RNG moved on
    torch.rand(1000)
    strategy, benchmark, metric = fresh_run(strategy_class, make_stream, tokenizer, **kwargs)
    assert run_stream(strategy, benchmark, tmp_path / "cut", progress=False) == 3
    assert metric.result().tolist() == expected_matrix.tolist()
    state = strategy.model.state_dict()
    assert all(torch.equal(state[k], v) for k, v in expected_state.items())
    if isinstance(strategy, (RAILPrimal, RAILDual)):
        assert all(torch.equal(a, b) for a, b in zip(expected_head.values(), strategy.head.ridge.state_dict().values()))


def test_moram_checkpoint_holds_atoms_not_clip(make_stream, tokenizer, tmp_path):
    strategy, benchmark, _ = fresh_run(MoRAM, make_stream, tokenizer, atoms_per_task=4, topk=2)
    run_stream(strategy, benchmark, tmp_path, max_experiences=1, progress=False)
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    names = set(state["model"])
    assert names and all(n.rpartition(".")[2] in ("atom_keys", "atom_values", "num_frozen", "atom_task")
                         for n in names)
    assert len(names) == 4 * len(find_layers(strategy.model, MoRAMLinear))
    assert state["experiences_done"] == 1 and state["seen_domains"][0]["name"] == "alpha"


def test_a_checkpoint_of_another_strategy_is_refused(make_stream, tokenizer, tmp_path):
    strategy, benchmark, _ = fresh_run(MoRAM, make_stream, tokenizer, atoms_per_task=4, topk=2)
    run_stream(strategy, benchmark, tmp_path, max_experiences=1, progress=False)
    other, benchmark, _ = fresh_run(FineTune, make_stream, tokenizer)
    with pytest.raises(ValueError, match='was made with other settings .*strategy: "MoRAM" there, "FineTune" now'):
        run_stream(other, benchmark, tmp_path, progress=False)
    (tmp_path / "run.json").unlink()  # a folder without its record: the checkpoint still says whose it is
    with pytest.raises(ValueError, match="written by a MoRAM run"):
        run_stream(other, benchmark, tmp_path, progress=False)


@pytest.mark.parametrize("name, kwargs", [("avalanche.naive", {}), ("avalanche.replay", {"mem_size": 5})])
def test_avalanche_strategies_resume_from_avalanches_checkpoint(name, kwargs, make_stream, tokenizer, tmp_path):
    from moram_avalanche.experiments.metrics import accuracy_matrix_of
    from moram_avalanche.strategies.registry import get_strategy

    def fresh():
        return fresh_run(get_strategy(name), make_stream, tokenizer, lr=1e-3, **kwargs)

    strategy, benchmark, metric = fresh()
    assert run_stream(strategy, benchmark, tmp_path / "whole", progress=False) == 3
    expected_matrix, expected_state = metric.result(), strategy.model.state_dict()

    strategy, benchmark, _ = fresh()
    assert run_stream(strategy, benchmark, tmp_path / "cut", max_experiences=1, progress=False) == 1
    torch.rand(1000)  # a new process: the global RNG moved on
    strategy, benchmark, _ = fresh()
    assert run_stream(strategy, benchmark, tmp_path / "cut", progress=False) == 3
    # Avalanche's resume replaces the strategy's state, the metric and the replay buffer included
    assert accuracy_matrix_of(strategy).result().tolist() == expected_matrix.tolist()
    state = strategy.model.state_dict()
    assert all(torch.equal(state[k], v) for k, v in expected_state.items())


def test_the_routing_kernel_is_built_before_the_first_experience_is_timed(make_stream, tokenizer, tmp_path,
                                                                            monkeypatch):
    from moram_avalanche.layers.moram.paths import cpu_kernel as routing_kernel

    events = []
    strategy, benchmark, _ = fresh_run(MoRAM, make_stream, tokenizer, atoms_per_task=4, topk=2)
    load, train = routing_kernel.load, strategy.train
    monkeypatch.setattr(routing_kernel, "load", lambda: events.append("build") or load())
    monkeypatch.setattr(strategy, "train", lambda *a, **k: events.append("train") or train(*a, **k))
    run_stream(strategy, benchmark, tmp_path, max_experiences=1, progress=False)
    assert events[:2] == ["build", "train"]
    events.clear()
    fine, benchmark, _ = fresh_run(FineTune, make_stream, tokenizer, lr=1e-3)  # no MoRAM layer: nothing built
    monkeypatch.setattr(fine, "train", lambda *a, **k: events.append("train") or None)
    run_stream(fine, benchmark, tmp_path / "fine", max_experiences=1, progress=False)
    assert events[0] == "train" and "build" not in events
