"""scripts/bench_text.py on tiny models: finite ratios, and MoRAM grown to tasks * r atoms, r trainable."""

import importlib
import math
from pathlib import Path

import pytest
import torch

from tiny_text import LLAMA_KWARGS, T5_KWARGS

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
#: tiny widths over the script's configs (its LLaMA row sets head_dim and Llama-3's token ids)
TINY = {"t5-base": dict(T5_KWARGS), "llama-1b": dict(LLAMA_KWARGS, head_dim=8, bos_token_id=1, eos_token_id=2)}


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(SCRIPTS))  # the scripts import bench_timing from their folder
    return importlib.import_module("bench_text")


@pytest.mark.parametrize("name", sorted(TINY))
def test_measure_grows_moram_and_returns_finite_ratios(bench, one_thread, name):
    from moram_avalanche.layers.base import find_layers
    from moram_avalanche.layers.lora import LoRALinear
    from moram_avalanche.layers.moram.layer import MoRAMLinear

    models = bench.build_models(name, 2, "cpu", torch.float32, **TINY[name])
    base, lora, moram = models["base"], models["lora"], models["moram"]
    # one copy of the weights: both adapted models hold the base's own tensors
    shared = {id(p) for p in base.parameters()}
    assert shared <= {id(p) for p in moram.parameters()} and shared <= {id(p) for p in lora.parameters()}
    assert not any(p.requires_grad for p in base.parameters())
    inputs = bench.make_inputs(base.config, batch=2, source_len=5, target_len=3, device="cpu")
    layers = find_layers(moram, MoRAMLinear)
    assert set(layers) == set(find_layers(lora, LoRALinear)) and layers

    for tasks in (2, 3):  # grows in place, as from 4 to 15 tasks
        row = bench.measure(models, inputs, tasks, new_tokens=2, batch=2, repeats=1, warmup=0)
        for key in ("train_moram_over_lora", "generate_moram_over_base", "generate_lora_over_base"):
            assert math.isfinite(row[key]) and row[key] > 0, (key, row[key])
        assert row["atoms_per_layer"] == tasks * 8 and 0 <= row["gate_pass"] <= 1
        for layer in layers.values():  # the invariant: tasks * r atoms, the last r trainable
            assert (layer.num_atoms, layer.num_frozen, layer.num_trainable) == (tasks * 8, tasks * 8 - 8, 8)
            assert bool((layer.frozen_values != 0).any(dim=1).all())  # every frozen atom's B is non-zero
        assert row["trainable_moram"] == row["trainable_lora"]  # same rank, same linears
        assert {id(p) for p in moram.parameters() if p.requires_grad} == {
            id(p) for layer in layers.values() for p in (layer.new_keys, layer.new_values)}
    with pytest.raises(ValueError, match="cannot shrink"):
        bench.grow(moram, 2)
    assert "OVER" in bench.table(name, [dict(row, train_goal_met=False)])


def test_task_counts_are_parsed_and_checked(bench):
    import argparse

    assert bench.parse_tasks("15,4") == [4, 15]
    with pytest.raises(argparse.ArgumentTypeError, match="4,15"):
        bench.parse_tasks("0,4")


@pytest.mark.parametrize("name", sorted(TINY))
def test_lora_has_moram_s_dropout_and_generation_meets_a_frozen_bank(bench, monkeypatch, one_thread, name):
    """The training step's baseline drops its input as MoRAM drops the atoms' (the same dropout);
    generation runs MoRAM's bank frozen, as after the task, and leaves the trained model's atoms trainable."""
    from moram_avalanche.layers.base import find_layers
    from moram_avalanche.layers.lora import LoRALinear
    from moram_avalanche.layers.moram.layer import MoRAMLinear
    from moram_avalanche.text.lora_layers import DropoutLoRALinear

    models = bench.build_models(name, 2, "cpu", torch.float32, dropout=0.25, **TINY[name])
    loras, morams = find_layers(models["lora"], LoRALinear), find_layers(models["moram"], MoRAMLinear)
    assert all(isinstance(layer, DropoutLoRALinear) and layer.lora_dropout.p == 0.25 for layer in loras.values())
    assert {layer.dropout for layer in morams.values()} == {0.25} and len(loras) == len(morams)
    assert all(type(layer) is LoRALinear for layer in find_layers(bench.with_lora(models["base"]), LoRALinear).values())

    generated = []
    generate_call = bench.generate_call

    def spy(model, *args, **kwargs):
        generated.append(sorted({layer.num_trainable for layer in find_layers(model, MoRAMLinear).values()}))
        return generate_call(model, *args, **kwargs)

    monkeypatch.setattr(bench, "generate_call", spy)
    inputs = bench.make_inputs(models["base"].config, batch=2, source_len=5, target_len=3, device="cpu")
    bench.measure(models, inputs, 2, new_tokens=2, batch=2, repeats=1, warmup=0)
    assert generated == [[], [], [0]]  # base, LoRA (no MoRAM layer), MoRAM with nothing trainable
    assert {layer.num_trainable for layer in morams.values()} == {8}


def test_the_quick_run(bench, capsys, one_thread):
    rows = bench.main(["--quick", "--model", "llama-1b"])
    out = capsys.readouterr().out
    assert [row["tasks"] for row in rows] == [1, 2] and "tiny widths (--quick)" in out
    assert "LoRA rank 8, dropout 0.1 (the same)" in out and "train<=1.1" in out and "gen<=1.15" in out
