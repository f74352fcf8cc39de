"""The release's atom scaling, an option: new atoms trained at lora_alpha / r = 2 and read at 1
once frozen, and r fresh atoms in every evaluation's routing (TRACE/model/Regular/MoRAM.py calls
increment_task() before each round is evaluated). Checked against the release's forward written
out by hand (utils/my_peft/tuners/moram.py) and on the loop."""

import math

import pytest
import torch
from torch import nn
from torch.nn import functional as F


def release_forward(x, base, keys, values, scales, k, tau, delta, training):
    """The release's MoRAMLinear.forward by hand: p = A x over every atom, L2-normalised scores,
    top-max(k, 2), softmax(s / tau) over the kept, at eval a gate s >= delta; delta_y = B (w * p)
    with each atom's value scaled by its ``scales`` entry (new: lora_alpha / r, frozen: 1)."""
    projection = x @ keys.t()
    normed = F.normalize(projection, p=2, dim=-1, eps=1e-8)
    kept = torch.topk(normed, min(max(k, 2), keys.shape[0]), dim=-1)
    logits = torch.full_like(normed, -math.inf).scatter(-1, kept.indices, kept.values)
    weights = torch.softmax(logits / tau, dim=-1)
    if not training:
        weights = weights * (normed >= delta).to(weights.dtype)
    return base(x) + (projection * weights) @ (values * scales[:, None])


def layer_with_bank(scale):
    from moram_avalanche.text.layer import DropoutMoRAMLinear

    torch.manual_seed(0)
    layer = DropoutMoRAMLinear(nn.Linear(6, 5), atoms_per_task=3, topk=4, temperature=0.5, threshold=0.1, dropout=0.0)
    layer.new_value_scale = scale
    layer.expand()
    with torch.no_grad():
        layer.new_values.normal_()  # a trained first task
    return layer


def test_training_scales_the_new_atoms_values_and_frozen_atoms_read_unscaled():
    layer = layer_with_bank(2.0)
    x = torch.randn(4, 6)
    keys, values = layer.keys.clone(), layer.values.t().clone()
    layer.train()
    expected = release_forward(x, layer.base, keys, values, torch.full((3,), 2.0), 4, 0.5, 0.1, True)
    torch.testing.assert_close(layer(x), expected, rtol=1e-5, atol=1e-6)
    layer.expand()  # increment_task(): the trained atoms freeze, 3 fresh ones (Kaiming keys, zero values) join
    layer.eval()
    keys, values = layer.keys.clone(), layer.values.t().clone()
    assert torch.equal(values[3:], torch.zeros(3, 5)) and layer.num_atoms == 6
    # the release's evaluation: frozen atoms at scale 1 (half their training scale), the fresh keys in the
    # norm, the top-k and the softmax
    expected = release_forward(x, layer.base, keys, values, torch.tensor([1.0] * 3 + [2.0] * 3), 4, 0.5, 0.1, False)
    torch.testing.assert_close(layer(x), expected, rtol=1e-5, atol=1e-6)
    without_fresh = release_forward(x, layer.base, keys[:3], values[:3], torch.ones(3), 4, 0.5, 0.1, False)
    assert not torch.allclose(expected, without_fresh)  # the fresh atoms change the old atoms' weights


def test_the_default_is_one_scaling():
    layer = layer_with_bank(1.0)
    x = torch.randn(4, 6)
    layer.train()
    expected = release_forward(x, layer.base, layer.keys, layer.values.t(), torch.ones(3), 4, 0.5, 0.1, True)
    torch.testing.assert_close(layer(x), expected, rtol=1e-5, atol=1e-6)


def strategy(**options):
    from avalanche.training.plugins import EvaluationPlugin

    from moram_avalanche.strategies.registry import get_strategy
    from tiny_stream import FAMILIES, stream_tokenizer

    tokenizer = stream_tokenizer()
    return get_strategy("moram", family="text")(
        model=FAMILIES["llama"](tokenizer), tokenizer=tokenizer, train_mb_size=4, iterations=2, lr=1e-2,
        max_new_tokens=2, atoms_per_task=2, evaluator=EvaluationPlugin(loggers=[]), **options)


def test_the_loop_evaluates_with_the_next_tasks_atoms_and_then_trains_them():
    from avalanche.core import SupervisedPlugin

    from moram_avalanche.benchmarks import synthetic_text
    from moram_avalanche.layers.base import find_layers
    from moram_avalanche.layers.moram.layer import MoRAMLinear
    from tiny_stream import TASKS

    bench = synthetic_text(TASKS, train_per_label=2, test_per_label=1)
    release = strategy(new_value_scale=2.0, fresh_atoms_at_eval=True)
    layers = find_layers(release.model, MoRAMLinear)
    assert {layer.new_value_scale for layer in layers.values()} == {2.0}
    seen = {}

    class Watch(SupervisedPlugin):
        def before_eval_exp(self, strategy, **kwargs):
            seen.setdefault("eval_atoms", set()).update(layer.num_atoms for layer in layers.values())

        def before_training_iteration(self, strategy, **kwargs):
            seen.setdefault("trained_keys", [layer.new_keys.detach().clone() for layer in layers.values()])

    release.plugins.append(Watch())
    release.train(bench.train_stream[0])
    fresh = [layer.new_keys.detach().clone() for layer in layers.values()]
    assert all(layer.num_frozen == 2 and layer.num_trainable == 2 for layer in layers.values())
    assert all(torch.equal(layer.new_values, torch.zeros_like(layer.new_values)) for layer in layers.values())
    release.eval(bench.test_stream)
    assert seen["eval_atoms"] == {4}  # task 1's two atoms and the two fresh ones in the routing
    seen.pop("trained_keys")
    release.train(bench.train_stream[1])
    # task 2 trained exactly the atoms that took part in the evaluation after task 1 (no others added)
    assert all(torch.equal(a, b) for a, b in zip(seen["trained_keys"], fresh))
    assert all(layer.num_frozen == 4 and layer.num_trainable == 2 for layer in layers.values())
    paper = strategy()
    paper.train(bench.train_stream[0])
    assert all(layer.num_atoms == 2 and layer.num_trainable == 0 and layer.new_value_scale == 1.0
               for layer in find_layers(paper.model, MoRAMLinear).values())


def test_bad_release_options_are_refused():
    from moram_avalanche.text import MoRAMConfig

    with pytest.raises(ValueError, match="new_value_scale.*lora_alpha / r: 2"):
        strategy(new_value_scale=0.0)
    with pytest.raises(TypeError, match="fresh_atoms_at_eval"):
        strategy(fresh_atoms_at_eval="yes")
    from peft import get_peft_model

    from moram_avalanche.layers.base import find_layers
    from moram_avalanche.layers.moram.layer import MoRAMAtoms
    from tiny_text import tiny_llama

    peft_model = get_peft_model(tiny_llama(), MoRAMConfig(new_value_scale=2.0))  # the peft method takes it too
    banks = find_layers(peft_model, MoRAMAtoms)  # one bank per adapter in every wrapped layer
    assert banks and {bank.new_value_scale for bank in banks.values()} == {2.0}
    for bank in banks.values():  # trained-looking values, then the scale is what reaches the forward
        with torch.no_grad():
            bank.new_values.normal_()
    ids = torch.randint(3, 99, (2, 6), generator=torch.Generator().manual_seed(0))
    peft_model.eval()
    scaled = peft_model(input_ids=ids).logits
    for bank in banks.values():
        bank.new_value_scale = 1.0
        with torch.no_grad():
            bank.new_values.mul_(2.0)
    torch.testing.assert_close(peft_model(input_ids=ids).logits, scaled)
    with pytest.raises(ValueError, match="new_value_scale"):
        MoRAMConfig(new_value_scale=-1.0)
