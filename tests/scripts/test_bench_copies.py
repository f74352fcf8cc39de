"""scripts/bench_copies.py: a sharing copy holds the base's own tensors; a frozen copy freezes only itself."""

import importlib

import torch
from torch import nn


def test_a_frozen_copy_shares_the_weights_and_computes_the_same(scripts):
    from moram_avalanche.layers.moram.layer import MoRAMLinear

    copies = importlib.import_module("bench_copies")
    torch.manual_seed(0)
    model = nn.Sequential(MoRAMLinear(nn.Linear(6, 5), atoms_per_task=3, topk=2, temperature=0.1, threshold=0.0),
                          nn.ReLU(), nn.Linear(5, 4))
    for _ in range(2):
        model[0].expand()
        with torch.no_grad():
            model[0].new_values.normal_()
    shared = copies.sharing_copy(model)
    assert shared[0].base.weight is model[0].base.weight and shared[2].weight is model[2].weight
    assert shared[0].new_keys is model[0].new_keys  # parameters too: nothing is copied

    frozen = copies.frozen_copy(model)
    assert (frozen[0].num_frozen, frozen[0].num_trainable) == (6, 0)
    assert (model[0].num_frozen, model[0].num_trainable) == (3, 3)  # the original still trains its task
    assert frozen[0].base.weight is model[0].base.weight
    x = torch.randn(7, 6)
    with torch.no_grad():
        torch.testing.assert_close(frozen.eval()(x), model.eval()(x))
