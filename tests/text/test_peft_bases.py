"""What MoRAM's peft layer wraps: fp16 / bf16 bases (float32 atoms), GPT-2's Conv1D, bitsandbytes bases."""

import pytest
import torch
from torch import nn

from moram_avalanche.layers.moram.naive import naive_moram
from tiny_text import LLAMA_KWARGS, batch, tiny_llama


def atoms_term(bank, x, training=False):
    """The atoms' term of ``bank`` for tokens ``x`` ``[N, d_in]`` by the naive reference (no base)."""
    zero = torch.zeros(bank.out_features, bank.in_features, dtype=x.dtype)
    return naive_moram(x, zero, None, [bank.keys.to(x.dtype)], [bank.values.to(x.dtype)], topk=bank.topk,
                       temperature=bank.temperature, threshold=bank.threshold, training=training)


@pytest.mark.parametrize("autocast_adapter_dtype", [True, False])
def test_an_fp16_base_trains_with_a_grad_scaler_only_with_float32_atoms(autocast_adapter_dtype):
    from peft import get_peft_model

    from moram_avalanche.text import MoRAMConfig

    x, _ = batch()
    model = get_peft_model(tiny_llama().half(), MoRAMConfig(task_type="CAUSAL_LM"),
                           autocast_adapter_dtype=autocast_adapter_dtype)
    trainable = [p for p in model.parameters() if p.requires_grad]
    assert {p.dtype for p in trainable} == {torch.float32 if autocast_adapter_dtype else torch.float16}
    optimizer = torch.optim.AdamW(trainable, lr=1e-3)
    scaler = torch.amp.GradScaler("cpu")  # what Trainer(fp16=True) runs on a GPU
    model.train()
    with torch.autocast("cpu", dtype=torch.float16):
        loss = model(input_ids=x, labels=x).loss
    scaler.scale(loss).backward()
    if not autocast_adapter_dtype:
        with pytest.raises(ValueError, match="Attempting to unscale FP16 gradients"):
            scaler.unscale_(optimizer)
        return
    before = [p.detach().clone() for p in trainable]
    scaler.step(optimizer)
    scaler.update()
    assert any(not torch.equal(p, b) for p, b in zip(trainable, before))


def test_float32_atoms_of_a_bfloat16_base_compute_in_bfloat16_in_one_read_out():
    import copy

    from peft import get_peft_model

    from moram_avalanche.layers.moram.layer import MoRAMLinear
    from moram_avalanche.text import MoRAMConfig

    model = get_peft_model(tiny_llama().to(torch.bfloat16), MoRAMConfig(init_weights=False)).eval()
    layer = model.base_model.model.model.layers[0].self_attn.q_proj
    bank = layer.moram_bank["default"]
    assert bank.dtype == torch.float32 and layer.base_layer.weight.dtype == torch.bfloat16
    # the library's layer over the same bf16 base, holding the atoms rounded to bf16
    reference = MoRAMLinear(copy.deepcopy(layer.base_layer), **bank.options).eval()
    reference.load_atoms(bank.keys.bfloat16(), bank.values.bfloat16(), bank.num_frozen, bank.atom_task)
    hidden = torch.randn(3, 5, 32, dtype=torch.bfloat16)
    with torch.no_grad():
        out = layer(hidden)
        assert out.dtype == torch.bfloat16 and torch.equal(out, reference(hidden))


@pytest.mark.parametrize("training", [False, True])
def test_a_float32_base_under_bf16_autocast_is_fused_into_the_read_out(monkeypatch, training):
    """An fp32 model under bf16 autocast (``Trainer(bf16=True)``): ``F.linear`` would cast the base to
    bf16, so the layer hands it to the bank, one read-out as MoRAMLinear computes it (bit for bit,
    the base's own forward never called), in eval and in training (no dropout); a float64 input,
    which autocast does not cast, still goes to the base's forward, which refuses it."""
    import copy

    from peft import get_peft_model

    from moram_avalanche.layers.moram.layer import MoRAMLinear
    from moram_avalanche.text import MoRAMConfig

    model = get_peft_model(tiny_llama(), MoRAMConfig(init_weights=False, dropout=0.0)).train(training)
    layer = model.base_model.model.model.layers[0].self_attn.q_proj
    bank = layer.moram_bank["default"]
    reference = MoRAMLinear(copy.deepcopy(layer.base_layer), **bank.options).train(training)
    reference.load_atoms(bank.keys.detach(), bank.values.detach(), bank.num_frozen, bank.atom_task)
    hidden = torch.randn(3, 5, 32)
    base_calls = []
    forward = nn.Linear.forward  # (counted on the class: a forward set on the instance is one the layer calls)
    monkeypatch.setattr(nn.Linear, "forward", lambda module, x: base_calls.append(x.dtype) or forward(module, x))
    with torch.set_grad_enabled(training), torch.autocast("cpu", dtype=torch.bfloat16):
        out = layer(hidden)
        assert out.dtype == torch.bfloat16 and torch.equal(out, reference(hidden)) and base_calls == []
        if not training:
            assert torch.equal(layer(hidden), out)  # (repeated: the bank's plan)
        with pytest.raises(RuntimeError, match="same dtype"):  # (as the base refuses it: autocast left x)
            layer(hidden.double())
    assert base_calls == [torch.float64]
    if training:
        out.float().square().sum().backward()
        assert bank.new_values.grad is not None and bank.new_values.grad.abs().sum() > 0


def tiny_gpt2(seed=0):
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    return GPT2LMHeadModel(GPT2Config(vocab_size=99, n_positions=32, n_embd=32, n_layer=2, n_head=4)).eval()


def test_gpt2_conv1d_projections_are_targets(tmp_path):
    from peft import PeftModel, get_peft_model
    from transformers.pytorch_utils import Conv1D

    from moram_avalanche.text import MoRAMConfig

    x, _ = batch()
    model = get_peft_model(tiny_gpt2(), MoRAMConfig(task_type="CAUSAL_LM", target_modules=["c_attn"],
                                                    init_weights=False, atoms_per_task=4))
    model.eval()
    layer = model.base_model.model.transformer.h[0].attn.c_attn
    assert isinstance(layer.base_layer, Conv1D) and (layer.in_features, layer.out_features) == (32, 96)
    bank = layer.moram_bank["default"]
    hidden = torch.randn(5, 32)
    with torch.no_grad():  # GPT-2's Conv1D computes x W + b with W [in, out]
        expected = hidden @ layer.base_layer.weight + layer.base_layer.bias + atoms_term(bank, hidden)
        torch.testing.assert_close(layer(hidden), expected, rtol=1e-5, atol=1e-5)
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=0.05)
    model.train()
    model(input_ids=x, labels=x).loss.backward()
    optimizer.step()
    model.eval()
    model.save_pretrained(tmp_path)
    loaded = PeftModel.from_pretrained(tiny_gpt2(), tmp_path)
    with torch.no_grad():
        assert torch.equal(loaded(input_ids=x).logits, model(input_ids=x).logits)
        generated = loaded.generate(input_ids=x, max_new_tokens=3, do_sample=False, pad_token_id=0)
    assert generated.shape == (2, 10)


@pytest.mark.parametrize("bits", [4, 8])
def test_a_bitsandbytes_base_keeps_its_quantised_forward_and_float_atoms(tmp_path, bits):
    pytest.importorskip("bitsandbytes")
    from peft import PeftModel, get_peft_model
    from transformers import BitsAndBytesConfig, LlamaConfig, LlamaForCausalLM

    from moram_avalanche.text import MoRAMConfig

    torch.manual_seed(0)  # bitsandbytes' CPU 4-bit kernels pack 32-row blocks: widths of 64 (k_proj: 32)
    LlamaForCausalLM(LlamaConfig(**{**LLAMA_KWARGS, "hidden_size": 64, "intermediate_size": 64})).save_pretrained(
        tmp_path / "base")
    quantisation = (BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_compute_dtype=torch.float32) if bits == 4
                    else BitsAndBytesConfig(load_in_8bit=True))

    def quantised():
        return LlamaForCausalLM.from_pretrained(tmp_path / "base", quantization_config=quantisation,
                                                device_map="cpu").eval()

    # bitsandbytes 0.50's CPU backend repacks 4-bit weights at the first eval-mode forward whose input
    # needs no grad, and the packed kernel has no backward: every forward before training runs in
    # train mode (dropout 0, so it is deterministic). Its 4-bit kernels also differ with the input
    # (shape, requires_grad: peft makes the embeddings' output require grad) and with the packing by
    # up to 1e-3 in these logits: the quantised base is compared with itself inside the peft model
    # (disable_adapter), the atoms bit for bit, a reloaded model's logits within 1e-4.
    x, _ = batch()
    base = quantised()
    kind = type(base.model.layers[0].self_attn.q_proj)
    model = get_peft_model(base, MoRAMConfig(task_type="CAUSAL_LM", atoms_per_task=4, dropout=0.0)).train()
    layer = model.base_model.model.model.layers[0].self_attn.q_proj
    assert type(layer.base_layer) is kind and kind.__module__.startswith("bitsandbytes")
    quantised_weight = layer.base_layer.weight.detach().clone()
    assert not quantised_weight.dtype.is_floating_point  # still quantised
    bank = layer.moram_bank["default"]
    assert bank.new_keys.dtype == bank.frozen_keys.dtype == torch.float32
    with model.disable_adapter():
        base_logits = model(input_ids=x).logits.detach()
    assert torch.equal(model(input_ids=x).logits.detach(), base_logits)  # values zero: the base's output
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=0.05)
    for _ in range(2):
        model(input_ids=x, labels=x).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    assert bank.new_values.abs().sum() > 0  # the atoms trained through the quantised layers
    assert torch.equal(layer.base_layer.weight.detach(), quantised_weight)  # the base did not
    with model.disable_adapter():
        assert torch.equal(model(input_ids=x).logits.detach(), base_logits)
    trained = model(input_ids=x).logits.detach()
    assert (trained - base_logits).abs().max() > 1e-2
    model.eval()
    hidden = torch.randn(4, 64)
    with torch.no_grad():  # the quantised base's own forward, plus the atoms' term (eval: gated)
        torch.testing.assert_close(layer(hidden) - layer.base_layer(hidden), atoms_term(bank, hidden),
                                   rtol=1e-5, atol=1e-5)
    model.save_pretrained(tmp_path / "adapter")
    loaded = PeftModel.from_pretrained(quantised(), tmp_path / "adapter").train()
    model.train()
    trained = model(input_ids=x).logits.detach()  # the same kernels as the fresh model's (train mode)
    saved = {k: v for k, v in model.state_dict().items() if ".moram_bank." in k}
    assert saved and all(torch.equal(loaded.state_dict()[k], v) for k, v in saved.items())
    torch.testing.assert_close(loaded(input_ids=x).logits.detach(), trained, rtol=0, atol=1e-4)
