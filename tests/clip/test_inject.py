"""inject_moram on a tiny random-init open_clip model."""

import copy

import pytest
import torch
from torch import nn

from moram_avalanche.clip.attention import SplitAttention, split_attention
from moram_avalanche.clip.inject import inject_moram, replace_linears, target_linear_names
from moram_avalanche.layers.moram.layer import MoRAMLinear


def features(model, seed=1):
    gen = torch.Generator().manual_seed(seed)
    images = torch.randn(2, 3, 32, 32, generator=gen)
    texts = torch.randint(1, 49407, (3, 16), generator=gen)
    with torch.no_grad():
        return model.encode_image(images), model.encode_text(texts)


def test_injects_every_target_of_every_block(tiny_clip):
    layers = inject_moram(tiny_clip, atoms_per_task=4, topk=3, temperature=0.05, threshold=0.1)
    # 2 encoders x 2 blocks x 6 targets
    assert len(layers) == 24
    assert all(isinstance(m, MoRAMLinear) for m in layers.values())
    assert "visual.transformer.resblocks.0.attn.q_proj" in layers
    assert "transformer.resblocks.1.mlp.c_proj" in layers
    for name, layer in layers.items():
        assert tiny_clip.get_submodule(name) is layer
        assert (layer.atoms_per_task, layer.topk, layer.temperature, layer.threshold) == (4, 3, 0.05, 0.1)
    blocks = [m for m in tiny_clip.modules() if isinstance(m, SplitAttention)]
    assert len(blocks) == 4
    assert not any(isinstance(m, nn.MultiheadAttention) for m in tiny_clip.modules())


def test_injected_model_with_zero_valued_atoms_gives_the_same_features(tiny_clip):
    image_ref, text_ref = features(tiny_clip)
    layers = inject_moram(tiny_clip)
    for layer in layers.values():
        layer.expand()  # zero values: the atoms contribute nothing yet
    image, text = features(tiny_clip)
    torch.testing.assert_close(image, image_ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(text, text_ref, rtol=1e-5, atol=1e-5)


def test_one_training_step_changes_only_atom_parameters(tiny_clip):
    layers = inject_moram(tiny_clip, atoms_per_task=4)
    for layer in layers.values():
        layer.expand()
    before = {k: v.clone() for k, v in tiny_clip.state_dict().items()}
    trainable = [p for p in tiny_clip.parameters() if p.requires_grad]
    assert len(trainable) == 2 * len(layers)
    optimizer = torch.optim.AdamW(trainable, lr=1e-2, weight_decay=0.0)
    tiny_clip.train()
    images = torch.randn(4, 3, 32, 32)
    texts = torch.randint(1, 49407, (4, 16))
    img = nn.functional.normalize(tiny_clip.encode_image(images), dim=-1)
    txt = nn.functional.normalize(tiny_clip.encode_text(texts), dim=-1)
    logits = tiny_clip.logit_scale.exp() * img @ txt.t()
    nn.functional.cross_entropy(logits, torch.arange(4)).backward()
    optimizer.step()
    after = tiny_clip.state_dict()
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    # values are zero-initialised, so the first step moves values (keys get zero gradient)
    assert changed == {f"{name}.atom_values" for name in layers}


def test_encoders_and_targets_select_a_subset(tiny_clip):
    layers = inject_moram(tiny_clip, encoders=("visual",), targets=("v", "fc"))
    assert sorted(layers) == [
        "visual.transformer.resblocks.0.attn.v_proj", "visual.transformer.resblocks.0.mlp.c_fc",
        "visual.transformer.resblocks.1.attn.v_proj", "visual.transformer.resblocks.1.mlp.c_fc",
    ]
    assert isinstance(tiny_clip.transformer.resblocks[0].attn, nn.MultiheadAttention)


def test_mlp_only_targets_leave_attention_packed(tiny_clip):
    inject_moram(tiny_clip, targets=("fc", "proj"))
    assert not any(isinstance(m, SplitAttention) for m in tiny_clip.modules())


def test_bad_requests_are_clear_errors(tiny_clip):
    with pytest.raises(ValueError, match="unknown target"):
        inject_moram(tiny_clip, targets=("qkv",))
    with pytest.raises(ValueError, match="unknown encoder"):
        inject_moram(tiny_clip, encoders=("audio",))
    inject_moram(tiny_clip)
    with pytest.raises(ValueError, match="already holds MoRAMLinear"):
        inject_moram(tiny_clip)


def test_replace_linears_is_generic_and_checks_all_names_first(tiny_clip):
    names = target_linear_names(tiny_clip, encoders=("text",), targets=("fc",))
    assert names == ["transformer.resblocks.0.mlp.c_fc", "transformer.resblocks.1.mlp.c_fc"]
    original = tiny_clip.transformer.resblocks[0].mlp.c_fc
    with pytest.raises(TypeError, match="not an nn.Linear"):
        replace_linears(tiny_clip, names + ["transformer.resblocks.0.ln_1"], nn.Identity)
    assert tiny_clip.transformer.resblocks[0].mlp.c_fc is original  # nothing replaced
    replaced = replace_linears(tiny_clip, names, lambda linear: nn.Sequential(linear))
    assert replaced[names[0]][0] is original


@pytest.mark.parametrize("inject,kwargs", [
    ("inject_moram", {}), ("inject_lora", {"rank": 2}), ("inject_moe_lora", {"rank": 2})])
def test_every_adapter_injects_once_and_leaves_a_bad_target_list_harmless(inject, kwargs, tiny_clip):
    import moram_avalanche.clip.inject as injection

    before = [name for name, _ in tiny_clip.named_modules()]
    with pytest.raises(ValueError, match="unknown target"):
        getattr(injection, inject)(tiny_clip, targets=("k", "gate"), **kwargs)
    assert [name for name, _ in tiny_clip.named_modules()] == before
    assert all(p.requires_grad for p in tiny_clip.parameters())  # nothing frozen either
    layers = getattr(injection, inject)(tiny_clip, targets=("v", "fc"), **kwargs)
    assert len(layers) == 2 * 4 and all(n.endswith(("attn.v_proj", "mlp.c_fc")) for n in layers)
    with pytest.raises(ValueError, match="already holds"):
        getattr(injection, inject)(tiny_clip, **kwargs)


def test_wrapping_the_linears_draws_no_random_numbers(tiny_clip):
    # the layers start empty: beyond the attention split (SplitAttention builds its linears before
    # copying the packed weights), injecting must not shift the random stream that draws the atoms
    other = copy.deepcopy(tiny_clip)
    torch.manual_seed(0)
    split_attention(other)
    expected = torch.rand(3)
    for options in ({}, {"router": True}):
        model = copy.deepcopy(tiny_clip)
        torch.manual_seed(0)
        inject_moram(model, atoms_per_task=4, **options)
        assert torch.equal(torch.rand(3), expected), options


def test_bad_layer_options_leave_the_model_untouched(tiny_clip):
    before = {k: v.clone() for k, v in tiny_clip.state_dict().items()}
    trainable = [p.requires_grad for p in tiny_clip.parameters()]
    for bad in ({"topk": 0}, {"temperature": -1.0}, {"load_balance": "sometimes"}, {"atom_count": 3}):
        with pytest.raises((ValueError, TypeError)):
            inject_moram(tiny_clip, **bad)
    assert tiny_clip.state_dict().keys() == before.keys()  # attention not split, nothing wrapped
    assert [p.requires_grad for p in tiny_clip.parameters()] == trainable  # not even frozen
