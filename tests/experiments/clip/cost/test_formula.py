"""Trainable parameters per weight matrix: the formula read off the layer, and its count."""

from torch import nn

from moram_avalanche.experiments.clip.cost.formula import representative, trainable_formula
from moram_avalanche.layers.lora import LoRALinear
from moram_avalanche.layers.moe_lora import MoELoRALinear
from moram_avalanche.layers.moram.layer import MoRAMLinear


def test_moram_trains_r_keys_and_r_values_per_task():
    layer = MoRAMLinear(nn.Linear(8, 12), atoms_per_task=3, topk=2)
    assert trainable_formula(layer) is None  # no atoms yet
    layer.expand()
    formula = trainable_formula(layer)
    assert (formula.text, formula.count, formula.unit) == ("r·d_in + r·d_out", 3 * (8 + 12), "weight matrix")
    assert formula.values == {"r": 3, "d_in": 8, "d_out": 12}
    layer.expand()  # the second task trains only its own atoms
    assert trainable_formula(layer).count == 3 * (8 + 12)


def test_lora_rows_as_they_train():
    square = LoRALinear(nn.Linear(8, 8), rank=2)
    assert (trainable_formula(square).text, trainable_formula(square).count) == ("2·r·d", 32)
    square.down.requires_grad_(False)  # InfLoRA: the designed down-projection is frozen
    assert (trainable_formula(square).text, trainable_formula(square).count) == ("r·d", 16)
    moe = MoELoRALinear(nn.Linear(8, 12), rank=2)
    moe.expand()
    formula = trainable_formula(moe)
    assert (formula.text, formula.count) == ("r·d_in + r·d_out + d_in", 2 * 8 + 2 * 12 + 8)


def test_the_shown_layer_tells_d_in_from_d_out():
    square, wide = MoRAMLinear(nn.Linear(8, 8), atoms_per_task=2), MoRAMLinear(nn.Linear(8, 32), atoms_per_task=2)
    square.expand(), wide.expand()
    formulas = {"q": trainable_formula(square), "fc": trainable_formula(wide)}
    assert representative(formulas)[0] == "fc"
    assert representative({"q": formulas["q"]})[0] == "q"
    assert (formulas["q"].text, formulas["q"].count) == ("2·r·d", 2 * 16)  # d_in = d_out = d
