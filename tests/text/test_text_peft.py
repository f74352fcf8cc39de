"""MoRAM as a peft method: config checks, injection, tasks, save/load, merge refusal."""

import pytest
import torch

from tiny_text import batch, tiny_llama, tiny_t5


def banks(model, adapter="default"):
    """The MoRAM banks of ``adapter`` in a peft model, by layer name."""
    from moram_avalanche.text import MoRAMTunerLayer

    return {name: module.moram_bank[adapter] for name, module in model.named_modules()
            if isinstance(module, MoRAMTunerLayer) and adapter in module.moram_bank}


def train_steps(model, x, y, steps=2, lr=0.1):
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=lr)
    model.train()
    for _ in range(steps):
        model(input_ids=x, labels=y).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.eval()


@pytest.mark.parametrize("field, value, message", [
    ("atoms_per_task", 0, "atoms_per_task must be a positive int"),
    ("topk", 2.5, "topk must be a positive int"),
    ("temperature", 0.0, r"temperature must be a finite number > 0"),
    ("threshold", 1.5, r"threshold must be a finite number in \[0, 1\]"),
    ("dropout", 1.0, r"dropout must be a finite number in \[0, 1\).*paper: 0.1"),
    ("target_modules", [], "target_modules must be a non-empty list"),
    ("exclude_modules", ["q", 3], "exclude_modules must be a non-empty list"),
    ("modules_to_save", "classifier", "modules_to_save must be a list of module names"),
    ("init_weights", "zero", "init_weights must be True"),
])
def test_config_rejects_bad_values(field, value, message):
    from moram_avalanche.text import MoRAMConfig

    with pytest.raises(ValueError, match=message):
        MoRAMConfig(**{field: value})


def test_config_defaults_are_the_papers_llm_setting():
    from moram_avalanche.text import PAPER_LLM_OPTIONS, MoRAMConfig

    config = MoRAMConfig(target_modules=["q", "k"])
    assert config.layer_options() == PAPER_LLM_OPTIONS == {
        "atoms_per_task": 8, "topk": 4, "temperature": 0.1, "threshold": 0.2, "dropout": 0.1}
    assert config.peft_type == "MORAM" and config.target_modules == {"q", "k"}


def test_get_peft_model_wraps_the_architectures_targets_and_starts_unchanged():
    from peft import get_peft_model

    from moram_avalanche.text import MoRAMConfig, MoRAMTunerLayer

    base, (x, y) = tiny_t5(), batch()
    base.requires_grad_(False)  # same autograd state as the wrapped model (sdpa picks its kernel by it)
    with torch.no_grad():
        reference = base(input_ids=x, labels=y).logits
    model = get_peft_model(base, MoRAMConfig())  # targets from the table: q, k
    layers = {n: m for n, m in model.named_modules() if isinstance(m, MoRAMTunerLayer)}
    assert len(layers) == 12 and all(n.rpartition(".")[2] in ("q", "k") for n in layers)
    assert all(bank.num_atoms == 8 and bank.num_trainable == 8 for bank in banks(model).values())
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    # peft's naming: the tuner's prefix and the adapter's name in every adapter parameter
    assert trainable and all(".moram_bank.default." in n and n.rpartition(".")[2] in ("new_keys", "new_values")
                             for n in trainable)
    with torch.no_grad():
        torch.testing.assert_close(model(input_ids=x, labels=y).logits, reference, rtol=0, atol=1e-5)
        with model.disable_adapter():
            assert torch.equal(model(input_ids=x, labels=y).logits, reference)


def test_old_atoms_stay_bit_identical_while_the_next_task_trains():
    from peft import get_peft_model

    from moram_avalanche.text import MoRAMConfig

    model, (x, y) = get_peft_model(tiny_t5(), MoRAMConfig(atoms_per_task=4, topk=2)), batch()
    train_steps(model, x, y)
    assert model.add_task() == 8
    layers = list(banks(model).values())
    old = [(layer.keys[:4].clone(), layer.values[:, :4].clone()) for layer in layers]
    assert any(bool(v.abs().sum() > 0) for _, v in old)  # task 1 learned something
    train_steps(model, x, y, steps=3)
    for layer, (keys, values) in zip(layers, old):
        assert torch.equal(layer.keys[:4], keys) and torch.equal(layer.values[:, :4], values)
    assert any(bool(layer.values[:, 4:].abs().sum() > 0) for layer in layers)  # task 2 trained
    model.freeze_task()
    assert not any(p.requires_grad for p in model.parameters())


@pytest.mark.parametrize("build, task_type", [(tiny_t5, "SEQ_2_SEQ_LM"), (tiny_llama, "CAUSAL_LM")])
def test_save_and_load_round_trip_a_grown_bank(tmp_path, build, task_type):
    from peft import PeftModel, get_peft_model
    from safetensors.torch import load_file

    from moram_avalanche.text import MoRAMConfig

    x, y = batch()
    y = x if task_type == "CAUSAL_LM" else y
    model = get_peft_model(build(), MoRAMConfig(atoms_per_task=4, task_type=task_type))
    train_steps(model, x, y)
    model.add_task()
    train_steps(model, x, y)
    with torch.no_grad():
        expected = model(input_ids=x, labels=y).logits
    model.save_pretrained(tmp_path)
    saved = load_file(tmp_path / "adapter_model.safetensors")
    # peft's names: the bank's own tensors, without the adapter's name
    assert {key.rpartition(".")[2] for key in saved} == {"frozen_keys", "frozen_values", "new_keys",
                                                         "new_values", "atom_task"}
    assert all(".moram_bank." in key and ".default." not in key for key in saved)
    assert all(saved[k].shape[0] == 4 for k in saved if k.endswith(("frozen_keys", "new_keys")))  # two tasks of 4
    assert all(saved[k].shape == (8,) for k in saved if k.endswith("atom_task"))
    loaded = PeftModel.from_pretrained(build(), tmp_path)  # same seed: the same base weights
    with torch.no_grad():
        assert torch.equal(loaded(input_ids=x, labels=y).logits, expected)
    assert not any(p.requires_grad for p in loaded.parameters())  # inference mode
    trainable = PeftModel.from_pretrained(build(), tmp_path, is_trainable=True)
    assert any(p.requires_grad for p in trainable.parameters())


def test_merge_refuses_and_unload_gives_the_base_back():
    from peft import get_peft_model
    from torch import nn

    from moram_avalanche.text import MERGE_REFUSED, MoRAMConfig

    model = get_peft_model(tiny_llama(), MoRAMConfig())
    for call in (model.merge_and_unload, model.merge_adapter):
        with pytest.raises(ValueError, match="depends on the input through the routing weights"):
            call()
    assert "unload()" in MERGE_REFUSED
    base = model.unload()
    assert type(base.model.layers[0].self_attn.q_proj) is nn.Linear


def test_non_linear_targets_are_refused():
    from peft import get_peft_model

    from moram_avalanche.text import MoRAMConfig

    with pytest.raises(TypeError, match="MoRAM wraps torch.nn.Linear layers.*Conv1D.*LlamaRMSNorm"):
        get_peft_model(tiny_llama(), MoRAMConfig(target_modules=["input_layernorm"]))


@pytest.mark.parametrize("autocast, atoms_dtype", [(True, torch.float32), (False, torch.bfloat16)])
def test_a_bfloat16_base_trains_float32_atoms_unless_autocast_adapter_dtype_is_off(autocast, atoms_dtype):
    from peft import get_peft_model

    from moram_avalanche.text import MoRAMConfig

    x, _ = batch()
    model = get_peft_model(tiny_llama().to(torch.bfloat16), MoRAMConfig(task_type="CAUSAL_LM"),
                           autocast_adapter_dtype=autocast)
    for bank in banks(model).values():  # frozen rows follow the trainable ones
        assert bank.new_keys.dtype == bank.frozen_keys.dtype == bank.new_values.dtype == atoms_dtype
    model.train()
    loss = model(input_ids=x, labels=x).loss
    assert loss.dtype == torch.float32 and model.base_model.model.lm_head.weight.dtype == torch.bfloat16
    loss.backward()
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert grads and all(g is not None and g.dtype == atoms_dtype for g in grads)


def test_self_attention_only_targets_through_peft():
    from peft import get_peft_model

    from moram_avalanche.text import MoRAMConfig, MoRAMTunerLayer, target_modules

    model = get_peft_model(tiny_t5(), MoRAMConfig(target_modules=target_modules("t5", self_attention_only=True)))
    names = [n for n, m in model.named_modules() if isinstance(m, MoRAMTunerLayer)]
    assert len(names) == 8 and all(".SelfAttention." in n for n in names)


@pytest.mark.parametrize("build, task_type", [(tiny_t5, "SEQ_2_SEQ_LM"), (tiny_llama, "CAUSAL_LM")])
def test_generation_and_activation_checkpointing(build, task_type):
    from peft import get_peft_model

    from moram_avalanche.text import MoRAMConfig
    from moram_avalanche.text.load import enable_gradient_checkpointing

    x, y = batch()
    base = build()
    enable_gradient_checkpointing(base)  # by the installed transformers' name, inputs requiring grad
    model = get_peft_model(base, MoRAMConfig(task_type=task_type))
    train_steps(model, x, x if task_type == "CAUSAL_LM" else y)  # recomputes the atoms' forward
    assert any(bool(p.abs().sum() > 0) for n, p in model.named_parameters() if n.endswith("default.new_values"))
    with torch.no_grad():
        out = model.generate(input_ids=x, attention_mask=torch.ones_like(x), max_new_tokens=3, do_sample=False)
    assert out.shape[0] == 2 and out.shape[1] >= 3


def test_the_librarys_task_functions_grow_a_peft_model_too():
    from peft import get_peft_model

    from moram_avalanche.text import MoRAMConfig, add_task, freeze_task

    model = get_peft_model(tiny_llama(), MoRAMConfig(atoms_per_task=4))
    assert add_task(model) == 8 and all(bank.num_frozen == 4 for bank in banks(model).values())
    assert freeze_task(model) == 8 and all(bank.num_trainable == 0 for bank in banks(model).values())
    with pytest.raises(ValueError, match="holds no MoRAM layers of inject_moram"):
        add_task(tiny_llama())


def test_kept_base_casts_stack_each_layer_with_its_one_adapter_and_change_no_logit():
    """Generation-style calls (no grad) on the GPU paths read ``[W; A]`` in one GEMM per layer
    (``layers.moram.stacked``); the logits are those of the layer that reads them apart."""
    from peft import get_peft_model

    from moram_avalanche.layers.moram.layer import keep_base_casts
    from moram_avalanche.layers.moram.paths import use_path
    from moram_avalanche.text import MoRAMConfig

    model = get_peft_model(tiny_llama(), MoRAMConfig(init_weights=False))  # values drawn: terms not zero
    model.eval()
    x, _ = batch()
    layers = keep_base_casts(model)
    with use_path("dense"), torch.no_grad():
        trainable = model(input_ids=x).logits  # a task still trainable: its rows read where they live
        assert not any(bank._stacked for bank in banks(model).values())
        model.freeze_task()  # the task ends: a frozen bank is stacked
        stacked = model(input_ids=x).logits
        keep_base_casts(model, False)
        apart = model(input_ids=x).logits
        keep_base_casts(model)
        planned = [model(input_ids=x).logits for _ in range(2)][1]  # (the first makes the copies and plans)
    kept = [bank for bank in banks(model).values() if bank._stacked and bank._plan is not None]
    assert layers == len(banks(model)) == len(kept) > 0
    assert torch.equal(trainable, apart) and torch.equal(planned, stacked)
    assert not torch.equal(apart, get_peft_model(tiny_llama(), MoRAMConfig()).eval()(input_ids=x).logits)
    torch.testing.assert_close(stacked, apart, rtol=1e-5, atol=1e-5)
