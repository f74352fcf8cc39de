"""Activation maps: the model after task t' rebuilt from the final banks, and the weights drawn
equal to the method computed directly (the naive reference) on the same tokens."""

import pytest
import torch

from moram_avalanche.clip.inject import inject_moram
from moram_avalanche.experiments.clip.analysis import bank_after, layer_activations, load_run
from moram_avalanche.experiments.clip.analysis.banks import install_banks
from moram_avalanche.experiments.clip.analysis.samples import task_images
from moram_avalanche.experiments.clip.analysis.source import moram_model
from moram_avalanche.layers.base import load_adapter_state_dict
from moram_avalanche.layers.moram.naive import naive_mixture
from tiny_runs import ATOMS, TOPK, fresh_model, tiny_run

LAYER = "visual.transformer.resblocks.1.attn.k_proj"


@pytest.fixture(scope="module")
def pruned():
    return tiny_run(prune_mass=0.9)


def test_the_bank_after_each_task_is_the_bank_the_run_had_then(pruned):
    log_dir, _, after = pruned
    record = load_run(log_dir)
    assert record.tasks == 3 and record.domains == ["alpha", "beta", "gamma"]
    dropped_somewhere = False
    for task, state in enumerate(after.states):
        for layer in record.banks:
            rebuilt = bank_after(record, layer, task)
            for key in ("atom_keys", "atom_values", "atom_task", "num_frozen"):
                assert torch.equal(rebuilt[key], state[f"{layer}.{key}"]), (task, layer, key)
            dropped_somewhere |= rebuilt["atom_task"].numel() < ATOMS * (task + 1)
    assert dropped_somewhere  # pruning ran, so "rows of tasks <= t" is not just a prefix count


def test_a_frozen_atom_changed_after_its_task_is_refused(pruned):
    record = load_run(pruned[0])
    record.banks[LAYER]["atom_keys"][0, 0] += 1e-3
    with pytest.raises(ValueError, match="frozen atoms changed after their task"):
        bank_after(record, LAYER, 0)


def naive_weights(state, images, after_task):
    """The mixture weights of LAYER's atoms, computed the obvious way on the layer's input in a
    model holding the bank recorded during the run after ``after_task``."""
    model = fresh_model()
    inject_moram(model, atoms_per_task=ATOMS, topk=TOPK)
    load_adapter_state_dict(model, state)
    model.eval()
    seen = []
    layer = model.get_submodule(LAYER)
    handle = layer.register_forward_hook(lambda module, args, out: seen.append(args[0]))
    with torch.no_grad():
        model.encode_image(images)
    handle.remove()
    tokens = seen[0]  # [images, tokens, width]: open_clip's towers run batch-first
    proj = tokens @ layer.keys.t()
    return naive_mixture(proj, topk=TOPK, temperature=0.01, threshold=0.2, training=False)


@pytest.mark.parametrize("data, after_task", [(0, 0), (0, 2), (1, 1)])
def test_a_map_column_is_the_mixture_of_that_token(pruned, data, after_task):
    log_dir, benchmark, after = pruned
    record = load_run(log_dir)
    model = moram_model(fresh_model(), record)
    install_banks(model, record, after_task)
    images = task_images(benchmark, data, 3)
    acts = layer_activations(model, LAYER, images)
    expected = naive_weights(after.states[after_task], images, after_task)  # [3, 17, R]
    assert acts.weights.shape == (3, expected.shape[-1], 17)  # images x atoms x (CLS + 4 x 4 patches)
    torch.testing.assert_close(acts.weights, expected.transpose(1, 2), atol=1e-6, rtol=1e-5)
    assert torch.equal(acts.atom_task, after.states[after_task][f"{LAYER}.atom_task"])
    assert len(set(acts.weights.argmax(1).flatten().tolist())) > 1  # several atoms win tokens
    if after_task:  # the comparison tells banks apart: task 1's bank gives another map
        other = naive_weights(after.states[0], images, 0).transpose(1, 2)
        assert not torch.allclose(acts.weights[:, : other.shape[1]], other, atol=1e-3)


def test_the_map_of_the_text_tower_covers_the_prompt_tokens(pruned):
    from tiny_runs import tokenizer

    record = load_run(pruned[0])
    model = moram_model(fresh_model(), record)
    tokens = tokenizer()(["a cat from alpha.", "a dog from alpha."])
    acts = layer_activations(model, "transformer.resblocks.0.mlp.c_fc", tokens, encoder="text")
    assert acts.weights.shape[0] == 2 and acts.weights.shape[2] == 16  # context length
    sums = acts.weights.sum(1)
    assert bool((sums <= 1 + 1e-6).all()) and bool((sums > 0).any())  # a token's weights sum to <= 1
