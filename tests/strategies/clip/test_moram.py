"""MoRAM on the shared loop: growth per experience, only the newest atoms train."""

import warnings

import pytest
import torch
from avalanche.training.plugins import EvaluationPlugin

from moram_avalanche.layers.base import find_layers
from moram_avalanche.layers.moram.layer import MoRAMLinear
from moram_avalanche.strategies import MoRAM
from moram_avalanche.strategies.plugins.moram import MoRAMPlugin

warnings.filterwarnings("ignore", message="No loggers specified")


def make(tiny_clip, tokenizer, **kwargs):
    options = dict(atoms_per_task=4, topk=2, iterations=3, train_mb_size=4, lr=1e-2,
                   evaluator=EvaluationPlugin(loggers=[]), progress=False)
    options.update(kwargs)
    return MoRAM(model=tiny_clip, tokenizer=tokenizer, **options)


def test_defaults_are_the_paper_settings(tiny_clip, tokenizer):
    strategy = MoRAM(model=tiny_clip, tokenizer=tokenizer, evaluator=EvaluationPlugin(loggers=[]))
    layer = next(iter(find_layers(tiny_clip, MoRAMLinear).values()))
    assert (layer.atoms_per_task, layer.topk, layer.temperature, layer.threshold) == (16, 16, 0.01, 0.2)
    assert (strategy.lr, strategy.iterations, strategy.train_mb_size) == (5e-4, 500, 64)
    assert strategy.betas == (0.9, 0.9999) and strategy.weight_decay == 0.0
    assert len(find_layers(tiny_clip, MoRAMLinear)) == 24  # both encoders, 6 targets, 2 blocks each


def test_only_the_newest_atoms_change_during_an_experience(tiny_clip, tokenizer, make_stream):
    benchmark = make_stream("all")
    strategy = make(tiny_clip, tokenizer)
    strategy.train(benchmark.train_stream[0])
    before = {k: v.clone() for k, v in tiny_clip.state_dict().items()}
    strategy.train(benchmark.train_stream[1])
    after = tiny_clip.state_dict()
    layers = find_layers(tiny_clip, MoRAMLinear)
    for name, layer in layers.items():
        assert (layer.num_atoms, layer.num_frozen) == (8, 8)
        old_keys, old_values = before[f"{name}.atom_keys"], before[f"{name}.atom_values"]
        assert torch.equal(after[f"{name}.atom_keys"][:4], old_keys)  # frozen atoms bit-identical
        assert torch.equal(after[f"{name}.atom_values"][:, :4], old_values)
    changed_values = [n for n in layers if after[f"{n}.atom_values"][:, 4:].abs().sum() > 0]
    assert len(changed_values) == len(layers)  # the new atoms trained (values start at zero)
    clip_keys = [k for k in before if k.rpartition(".")[2] not in
                 ("atom_keys", "atom_values", "num_frozen", "atom_task")]
    assert clip_keys and all(torch.equal(before[k], after[k]) for k in clip_keys)


def test_the_plugin_records_activation_statistics_and_can_prune(tiny_clip, tokenizer, make_stream):
    benchmark = make_stream("all")
    strategy = make(tiny_clip, tokenizer, prune_mass=0.9)
    strategy.train(benchmark.train_stream[0])
    entry = strategy.moram_plugin.history[0]
    assert entry["domain"] == "alpha" and len(entry["layers"]) == 24
    stats = next(iter(entry["layers"].values()))
    assert stats["mass"].shape == (4,) and stats["mass"].sum() > 0 and stats["hits"].sum() > 0
    pruned = strategy.moram_plugin.pruned[0]
    layers = find_layers(tiny_clip, MoRAMLinear)
    assert all(layers[n].num_atoms == 4 - pruned[n] for n in layers)
    # what the analysis reads back: which atoms went, the bank kept, how the layers were built
    for name, layer in layers.items():
        recorded = entry["layers"][name]
        assert recorded["dropped"].numel() == pruned[name] and recorded["bank_size"] == layer.num_atoms
        assert recorded["bank_checksum"] == pytest.approx(float(layer.keys.double().sum()
                                                                + layer.values.double().sum()))
    assert strategy.moram_plugin.layer_options[name] == layer.options
    state = strategy.moram_plugin.state_dict()
    assert state["prune_mass"] == 0.9 and set(state) == {"history", "pruned", "layer_options", "prune_mass"}
    older = MoRAMPlugin()
    older.load_state_dict({"history": state["history"], "pruned": state["pruned"]})  # an older checkpoint
    assert older.layer_options == {} and len(older.history) == 1


def test_text_only_atoms_leave_the_image_encoder_untouched(tiny_clip, tokenizer, make_stream):
    benchmark = make_stream("all")
    strategy = make(tiny_clip, tokenizer, encoders=("text",))
    strategy.train(benchmark.train_stream[0])
    assert not strategy._vision_trains and strategy._text_trains
    assert all(name.startswith("transformer.") for name in find_layers(tiny_clip, MoRAMLinear))


def test_unknown_names_are_reported():
    from moram_avalanche.benchmarks import get_benchmark
    from moram_avalanche.strategies import get_strategy

    with pytest.raises(ValueError) as error:
        get_strategy("lora")
    assert str(error.value).startswith("unknown strategy 'lora'; available: avalanche.agem, avalanche.cumulative, ")
    assert ", avalanche.replay, codyra, finetune, finetune-alone, icarl, inflora, lwf, lwf-vr, " in str(error.value)
    assert str(error.value).endswith(", wiseft, zeroshot, zscl")
    with pytest.raises(ValueError, match="available: codealpaca, lm-cl, mtil, mtil-5shot, superni, synthetic, synthetic-text, trace, xtail"):
        get_benchmark("imagenet")
