"""The CodeAlpaca table's parameter columns against the adapters actually injected into a tiny LLaMA."""

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from moram_avalanche.layers.base import find_layers
from moram_avalanche.layers.moram import MoRAMLinear
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
