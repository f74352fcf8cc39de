"""SplitAttention computes what the nn.MultiheadAttention it replaces computes."""

import itertools

import pytest
import torch
from torch import nn

from moram_avalanche.clip.attention import SplitAttention

E, H, B, L, S = 16, 4, 3, 5, 7


def inputs(batch_first, batched=True, cross=False, kdim=E, vdim=E):
    src = S if cross else L
    if not batched:
        return torch.randn(L, E), torch.randn(src, kdim), torch.randn(src, vdim)
    shape = (lambda n, d: (B, n, d)) if batch_first else (lambda n, d: (n, B, d))
    q = torch.randn(*shape(L, E))
    if not cross:
        return q, q, q
    return q, torch.randn(*shape(src, kdim)), torch.randn(*shape(src, vdim))


def pair(**kwargs):
    torch.manual_seed(0)
    mha = nn.MultiheadAttention(E, H, **kwargs)
    with torch.no_grad():  # non-zero biases, so their split is checked too
        for name, p in mha.named_parameters():
            if "bias" in name:
                p.normal_()
    return mha, SplitAttention.from_mha(mha)


def causal(n):
    return torch.full((n, n), float("-inf")).triu(1)


@pytest.mark.parametrize("batch_first,bias,need_weights,average",
                         list(itertools.product([True, False], [True, False], [True, False], [True, False])))
def test_self_attention_with_causal_text_mask(batch_first, bias, need_weights, average):
    mha, split = pair(batch_first=batch_first, bias=bias)
    q, k, v = inputs(batch_first)
    kwargs = dict(need_weights=need_weights, attn_mask=causal(L), average_attn_weights=average)
    out_ref, w_ref = mha(q, k, v, **kwargs)
    out, w = split(q, k, v, **kwargs)
    torch.testing.assert_close(out, out_ref, rtol=1e-5, atol=1e-5)
    if need_weights:
        torch.testing.assert_close(w, w_ref, rtol=1e-5, atol=1e-6)
    else:
        assert w is None and w_ref is None


@pytest.mark.parametrize("mask_kind", ["bool2d", "float3d", "padding", "both"])
def test_masks_and_cross_attention_with_other_key_dims(mask_kind):
    mha, split = pair(batch_first=True, kdim=6, vdim=9)
    q, k, v = inputs(True, cross=True, kdim=6, vdim=9)
    attn_mask = padding = None
    if mask_kind in ("bool2d", "both"):
        attn_mask = torch.rand(L, S) > 0.7
        attn_mask[:, 0] = False  # no fully masked row
    if mask_kind == "float3d":
        attn_mask = torch.randn(B * H, L, S)
    if mask_kind in ("padding", "both"):
        padding = torch.zeros(B, S, dtype=torch.bool)
        padding[:, -2:] = True
    for need_weights in (True, False):
        ref = mha(q, k, v, key_padding_mask=padding, attn_mask=attn_mask, need_weights=need_weights)
        ours = split(q, k, v, key_padding_mask=padding, attn_mask=attn_mask, need_weights=need_weights)
        torch.testing.assert_close(ours[0], ref[0], rtol=1e-5, atol=1e-5)
        if need_weights:
            torch.testing.assert_close(ours[1], ref[1], rtol=1e-5, atol=1e-6)


def test_unbatched_input():
    mha, split = pair(batch_first=False)
    q, k, v = inputs(False, batched=False)
    torch.testing.assert_close(split(q, k, v)[0], mha(q, k, v)[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(split(q, k, v)[1], mha(q, k, v)[1], rtol=1e-5, atol=1e-6)


def test_gradients_match():
    mha, split = pair(batch_first=True)
    mha.train(), split.train()
    x_ref = torch.randn(B, L, E, requires_grad=True)
    x = x_ref.detach().clone().requires_grad_()
    mha(x_ref, x_ref, x_ref, attn_mask=causal(L), need_weights=False)[0].square().sum().backward()
    split(x, x, x, attn_mask=causal(L), need_weights=False)[0].square().sum().backward()
    torch.testing.assert_close(x.grad, x_ref.grad, rtol=1e-4, atol=1e-5)
    q_grad_ref = mha.in_proj_weight.grad[:E]
    torch.testing.assert_close(split.q_proj.weight.grad, q_grad_ref, rtol=1e-4, atol=1e-5)


def test_from_mha_copies_weights_and_keeps_frozen_state():
    mha, _ = pair(batch_first=True)
    mha.requires_grad_(False).eval()
    split = SplitAttention.from_mha(mha)
    assert not any(p.requires_grad for p in split.parameters()) and not split.training
    torch.testing.assert_close(
        torch.cat([split.q_proj.weight, split.k_proj.weight, split.v_proj.weight]), mha.in_proj_weight
    )
    assert all(type(m) is nn.Linear for m in (split.q_proj, split.k_proj, split.v_proj, split.out_proj))


def test_unsupported_options_and_causal_hint_without_mask_are_errors():
    with pytest.raises(ValueError, match="add_bias_kv"):
        SplitAttention.from_mha(nn.MultiheadAttention(E, H, add_bias_kv=True))
    with pytest.raises(TypeError):
        SplitAttention.from_mha(nn.Linear(E, E))
    _, split = pair(batch_first=True)
    q, k, v = inputs(True)
    with pytest.raises(RuntimeError, match="is_causal"):
        split(q, k, v, is_causal=True)


# ---------------------------------------------------------------- the split chosen by module type
def test_the_split_is_chosen_by_the_attention_type_along_its_mro(tiny_clip, monkeypatch):
    from moram_avalanche.clip import attention as module
    from moram_avalanche.clip.attention import ATTENTION_SPLITTERS, split_attention, splitter_for

    class Packed(nn.MultiheadAttention):  # a subclass dispatches through its base type
        pass

    assert splitter_for(nn.MultiheadAttention(8, 2)) == SplitAttention.from_mha
    assert splitter_for(Packed(8, 2)) == SplitAttention.from_mha
    assert splitter_for(nn.Linear(2, 2)) is None

    class OtherAttention(nn.Module):  # e.g. open_clip's upcoming Attention
        def __init__(self, mha):
            super().__init__()
            self.mha = mha

    blocks = list(tiny_clip.visual.transformer.resblocks)
    blocks[1].attn = OtherAttention(blocks[1].attn)
    with pytest.raises(TypeError, match="uses OtherAttention, which.*ATTENTION_SPLITTERS"):
        split_attention(tiny_clip, ("visual",))
    assert isinstance(blocks[0].attn, nn.MultiheadAttention)  # checked first: nothing was split
    monkeypatch.setitem(ATTENTION_SPLITTERS, OtherAttention, lambda attn: SplitAttention.from_mha(attn.mha))
    assert split_attention(tiny_clip, ("visual",)) == len(blocks)  # one more entry is all it takes
    assert all(isinstance(block.attn, SplitAttention) for block in blocks)
    assert split_attention(tiny_clip, ("visual",)) == 0  # idempotent
    assert module.ATTENTION_SPLITTERS is ATTENTION_SPLITTERS


@pytest.mark.parametrize("batch_first", [True, False])
def test_moram_on_q_k_v_is_read_by_one_gemm_where_no_backward_follows(batch_first):
    """With MoRAM on q, k and v and the bases' copies kept, a self-attention reads its input with one
    GEMM (``layers.moram.together``), as the packed in_proj does; the output is the same."""
    from torch.utils._python_dispatch import TorchDispatchMode

    from moram_avalanche.layers.moram.layer import MoRAMLinear, keep_base_casts
    from moram_avalanche.layers.moram.paths import use_path

    class InputReads(TorchDispatchMode):
        def __init__(self, width):
            super().__init__()
            self.width, self.outputs = width, []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if func._schema.name in ("aten::mm", "aten::addmm"):
                first = args[0] if func._schema.name == "aten::mm" else args[1]
                if first.shape[-1] == self.width and first.shape[0] == B * L:
                    self.outputs.append(out.shape[-1])
            return out

    _, split = pair(batch_first=batch_first)
    for name in ("q_proj", "k_proj", "v_proj"):
        layer = MoRAMLinear(getattr(split, name), atoms_per_task=5, topk=3, temperature=0.1, threshold=0.1)
        for _ in range(2):
            layer.expand()
            with torch.no_grad():
                layer.new_values.normal_()
        layer.freeze()  # (a task trained: only a frozen bank is stacked)
        setattr(split, name, layer)
    split.eval()
    q, k, v = inputs(batch_first)
    with use_path("dense"), torch.no_grad():
        expected, _ = split(q, k, v, need_weights=False)
        keep_base_casts(split)
        split(q, k, v, need_weights=False)  # the first call keeps the three layers' one copy
        with InputReads(E) as reads:
            out, _ = split(q, k, v, need_weights=False)
        cross, _ = split(q, k.clone(), v.clone(), need_weights=False)  # not a self-attention: each layer alone
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(cross, expected, rtol=1e-5, atol=1e-5)
    assert reads.outputs == [3 * (E + 10), E]  # [W_q; A_q; W_k; A_k; W_v; A_v]: the input read once; out_proj
