"""The CodeAlpaca table's parameter columns against the adapters actually injected into a tiny LLaMA."""

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from moram_avalanche.layers.base import find_layers
from moram_avalanche.layers.moram.layer import MoRAMLinear
from moram_avalanche.text.adapter_params import LLAMA_PROJECTIONS, linear_shapes, lora_parameters, moram_parameters
from moram_avalanche.text.inject import add_task, inject_moram
from moram_avalanche.text.tiny import TINY_LLAMA


def tiny():
    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(**TINY_LLAMA, vocab_size=50))


def test_the_shapes_are_the_models_linears():
    model = tiny()
    shapes = linear_shapes(model.config)
    linears = {name: module for name, module in model.named_modules()
               if isinstance(module, torch.nn.Linear) and name.endswith(LLAMA_PROJECTIONS)}
    assert len(shapes) == len(linears) == 2 * 7
    got = sorted((m.in_features, m.out_features) for m in linears.values())
    assert sorted((d_in, d_out) for _, d_in, d_out in shapes) == got


def test_lora_counts_are_the_parameters_a_rank_r_lora_adds():
    model = tiny()
    shapes = linear_shapes(model.config)
    for rank in (4, 32):
        naive = sum(rank * d_in + d_out * rank for _, d_in, d_out in shapes)  # A: r x d_in, B: d_out x r
        assert lora_parameters(shapes, rank) == {"added": naive, "activated": naive}


def test_moram_added_is_every_atom_of_the_injected_bank_and_activated_k_of_them():
    model = tiny()
    inject_moram(model, list(LLAMA_PROJECTIONS), atoms_per_task=16, topk=4, temperature=0.5, threshold=0.2)
    add_task(model)
    bank = 0
    for layer in find_layers(model, MoRAMLinear).values():
        bank += sum(p.numel() for p in layer.parameters() if p.requires_grad)
    counts = moram_parameters(linear_shapes(model.config), atoms=16, topk=4)
    assert counts["added"] == bank
    assert counts["activated"] * 4 == counts["added"]  # k = 4 of 16 atoms per token
    with pytest.raises(ValueError, match="top-k"):
        moram_parameters(linear_shapes(model.config), atoms=4, topk=8)


def test_lori_counts_are_the_trained_entries_of_b_on_the_injected_layers():
    """LoRI-D: every entry of B (the trainable parameters once A is frozen, as LoRI counts them);
    LoRI-S: the entries its model-wide mask keeps (int((1 - 0.9) * total), ties aside)."""
    from moram_avalanche.layers.lori import LoRILinear, magnitude_masks
    from moram_avalanche.layers.replace import replace_linears
    from moram_avalanche.text.adapter_params import lori_parameters

    model = tiny()
    names = [name for name, module in model.named_modules() if name.endswith(LLAMA_PROJECTIONS)]
    model.requires_grad_(False)
    replace_linears(model, names, lambda linear: LoRILinear(linear, 32, scale=2.0))
    shapes = linear_shapes(model.config)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert lori_parameters(shapes, 32) == {"added": trainable, "activated": trainable}
    layers = find_layers(model, LoRILinear)
    for layer in layers.values():
        torch.nn.init.normal_(layer.up)  # distinct magnitudes: no ties at the threshold
    masks = magnitude_masks({n: layer.up for n, layer in layers.items()}, 0.9)
    kept = sum(int(mask.sum()) for mask in masks.values())
    assert lori_parameters(shapes, 32, 0.9) == {"added": kept, "activated": kept}
    assert kept == int((1 - 0.9) * trainable)
    with pytest.raises(ValueError, match=r"sparsity must be in \[0, 1\)"):
        lori_parameters(shapes, 32, 1.0)
