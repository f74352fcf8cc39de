"""MoRAM's peft checkpoints: peft's names, meta-device loading, missing keys, 0.5.0 folders, FSDP, heads."""

import json
import shutil
from pathlib import Path

import pytest
import torch

from tiny_text import LLAMA_KWARGS, batch, tiny_llama

#: written by moram-avalanche 0.5.0 (commit 17ad236): tiny_llama(seed 0), MoRAMConfig(atoms_per_task=4,
#: task_type="CAUSAL_LM"), two steps, add_task(), two steps, save_pretrained; with its logits on batch()
FOLDER_0_5_0 = Path(__file__).parent / "data" / "moram_adapter_0_5_0"


def trained(seed=0, dtype=torch.float32, **options):
    """A tiny LLaMA with a MoRAM adapter grown over two tasks of 4 atoms, each trained a step."""
    from peft import get_peft_model

    from moram_avalanche.text import MoRAMConfig

    x, _ = batch()
    model = get_peft_model(tiny_llama(seed).to(dtype), MoRAMConfig(task_type="CAUSAL_LM", atoms_per_task=4, **options))
    for task in range(2):
        if task:
            model.add_task()
        optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=0.1)
        model.train()
        model(input_ids=x, labels=x).loss.backward()
        optimizer.step()
    return model.eval()


def logits(model, x):
    with torch.no_grad():
        return model(input_ids=x).logits


def test_the_base_is_base_layer_and_peft_returns_the_base_weights():
    from peft import get_peft_model
    from peft.utils.save_and_load import get_base_model_state_dict

    from moram_avalanche.text import MoRAMConfig

    expected = {k: v.clone() for k, v in tiny_llama().state_dict().items()}
    model = get_peft_model(tiny_llama(), MoRAMConfig(task_type="CAUSAL_LM"))
    names = set(model.state_dict())
    assert "base_model.model.model.layers.0.self_attn.q_proj.base_layer.weight" in names
    assert "base_model.model.model.layers.0.self_attn.q_proj.weight" not in names
    base = get_base_model_state_dict(model)
    assert set(base) == set(expected)
    assert all(torch.equal(base[k], v) for k, v in expected.items())


@pytest.mark.parametrize("how", ["from_pretrained", "load_adapter"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("low_cpu_mem_usage", [True, False])
def test_loading_is_bit_exact_also_from_the_meta_device(tmp_path, how, dtype, low_cpu_mem_usage):
    from peft import PeftModel

    x, _ = batch()
    model = trained(dtype=dtype)  # a bf16 base: float32 atoms (peft's autocast_adapter_dtype)
    expected = logits(model, x)
    model.save_pretrained(tmp_path)
    if how == "from_pretrained":
        loaded = PeftModel.from_pretrained(tiny_llama().to(dtype), tmp_path, low_cpu_mem_usage=low_cpu_mem_usage)
    else:
        loaded = PeftModel.from_pretrained(tiny_llama().to(dtype), tmp_path)
        loaded.load_adapter(tmp_path, adapter_name="again", low_cpu_mem_usage=low_cpu_mem_usage)
        loaded.set_adapter("again")
    state = loaded.state_dict()
    assert not any(t.is_meta for t in state.values())
    saved = {k.replace(".default.", f".{loaded.active_adapter}."): v for k, v in model.state_dict().items()
             if ".moram_bank." in k}
    assert {v.dtype for v in saved.values()} == {torch.float32, torch.long}
    for key, value in saved.items():  # bit for bit: never rounded to the base's dtype on the way
        assert state[key].dtype == value.dtype and torch.equal(state[key], value), key
    assert torch.equal(logits(loaded, x), expected)


def test_a_checkpoint_missing_a_layers_atoms_warns_with_peft(tmp_path):
    from peft import PeftModel
    from safetensors.torch import load_file, save_file

    model = trained()
    model.save_pretrained(tmp_path)
    path = tmp_path / "adapter_model.safetensors"
    state = load_file(path)
    layer = "base_model.model.model.layers.1.self_attn.k_proj"
    save_file({k: v for k, v in state.items() if not k.startswith(layer + ".")}, path)
    with pytest.warns(UserWarning, match=r"Found missing adapter keys.*layers\.1\.self_attn\.k_proj\.moram_bank\.default"):
        PeftModel.from_pretrained(tiny_llama(), tmp_path)
    loaded = PeftModel.from_pretrained(tiny_llama(), FOLDER_0_5_0)
    result = loaded.load_adapter(tmp_path, adapter_name="partial")
    assert sorted(k.rpartition(".")[2] for k in result.missing_keys) == [
        "atom_task", "frozen_keys", "frozen_values", "new_keys", "new_values"]
    assert all(k.startswith(layer + ".moram_bank.partial.") for k in result.missing_keys)


def test_a_bank_whose_trainable_rows_are_missing_is_reported():
    from moram_avalanche.layers.moram.layer import MoRAMAtoms

    bank = MoRAMAtoms(6, 5, torch.empty(0), atoms_per_task=3)
    bank.expand()
    bank.expand()
    state = bank.state_dict()
    assert set(state) == {"frozen_keys", "frozen_values", "new_keys", "new_values", "atom_task"}
    del state["new_values"]  # atom_task still counts 6 atoms, the frozen rows hold 3
    fresh = MoRAMAtoms(6, 5, torch.empty(0), atoms_per_task=3)
    result = fresh.load_state_dict(state, strict=False)
    assert result.missing_keys == ["new_values"]


def test_a_0_5_0_adapter_folder_loads_unchanged():
    from peft import PeftModel
    from safetensors.torch import load_file

    from moram_avalanche.layers.moram.paths import use_path

    written = load_file(FOLDER_0_5_0 / "expected_0_5_0.safetensors")
    assert json.loads((FOLDER_0_5_0 / "adapter_config.json").read_text())["peft_type"] == "MORAM"
    assert any(k.endswith(".atom_keys") for k in load_file(FOLDER_0_5_0 / "adapter_model.safetensors"))
    saved = load_file(FOLDER_0_5_0 / "adapter_model.safetensors")
    for low_cpu_mem_usage in (False, True):
        loaded = PeftModel.from_pretrained(tiny_llama(), FOLDER_0_5_0, low_cpu_mem_usage=low_cpu_mem_usage)
        banks = {name: module.moram_bank["default"] for name, module in loaded.named_modules()
                 if hasattr(module, "moram_bank")}
        rows_saved = {key: rows for key, rows in saved.items() if key.endswith((".atom_keys", ".atom_values"))}
        assert len(rows_saved) == 2 * len(banks) == 8  # q and k of two layers
        for key, rows in rows_saved.items():  # every atom as 0.5.0 wrote it, bit for bit
            layer, _, field = key.rpartition(".")
            assert torch.equal(banks[layer].keys if field == "atom_keys" else banks[layer].values, rows), key
        with use_path("reference"):  # the path 0.5.0 computed its logits on (no compiled kernel)
            # (written on another CPU, whose BLAS may round a product one unit in the last place apart:
            # 1.2e-7 at 0.44 on an AMD EPYC; an atom lost or misplaced moves them by orders more)
            torch.testing.assert_close(logits(loaded, written["input_ids"]), written["logits"], rtol=0, atol=1e-6)
    bank = loaded.base_model.model.model.layers[0].self_attn.q_proj.moram_bank["default"]
    assert (bank.num_frozen, bank.num_atoms) == (4, 8) and bank.atom_task.tolist() == [0] * 4 + [1] * 4


def test_a_0_5_0_adapter_continues_training_and_saves_in_the_new_form(tmp_path):
    from peft import PeftModel
    from safetensors.torch import load_file

    x, _ = batch()
    model = PeftModel.from_pretrained(tiny_llama(), FOLDER_0_5_0, is_trainable=True)
    assert model.add_task() == 12
    model.save_pretrained(tmp_path)
    saved = load_file(tmp_path / "adapter_model.safetensors")
    assert not any(k.endswith(".atom_keys") for k in saved)
    assert all(saved[k].shape[0] == 8 for k in saved if k.endswith("frozen_keys"))
    again = PeftModel.from_pretrained(tiny_llama(), tmp_path)
    assert torch.equal(logits(again, x), logits(model.eval(), x))


@pytest.fixture
def one_process_group():
    import torch.distributed as dist

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def test_fsdp1_state_dicts_hold_the_atoms(one_process_group):
    from peft import get_peft_model_state_dict, set_peft_model_state_dict
    from torch.distributed.fsdp import FullyShardedDataParallel

    x, _ = batch()
    model = trained()
    expected = logits(model, x)
    wrapped = FullyShardedDataParallel(model, use_orig_params=True, device_id=torch.device("cpu"))
    assert torch.equal(logits(wrapped, x), expected)
    full = wrapped.state_dict()
    assert "base_model.model.model.layers.0.self_attn.q_proj.moram_bank.default.new_keys" in full
    state = get_peft_model_state_dict(wrapped)
    assert {k.rpartition(".")[2] for k in state} == {"frozen_keys", "frozen_values", "new_keys", "new_values",
                                                     "atom_task"}
    fresh = trained(seed=3)  # other atoms, other base weights
    fresh.load_state_dict({k: v for k, v in full.items() if ".moram_bank." not in k}, strict=False)
    assert not torch.equal(logits(fresh, x), expected)
    set_peft_model_state_dict(fresh, state)
    assert torch.equal(logits(fresh, x), expected)


def test_seq_cls_trains_saves_and_loads_the_classification_head(tmp_path):
    from peft import PeftModel, get_peft_model
    from transformers import LlamaConfig, LlamaForSequenceClassification

    from moram_avalanche.text import MoRAMConfig

    def classifier():
        torch.manual_seed(0)
        return LlamaForSequenceClassification(LlamaConfig(**LLAMA_KWARGS, num_labels=3, pad_token_id=0)).eval()

    x, _ = batch()
    labels = torch.tensor([0, 2])
    head = classifier().score.weight.clone()
    model = get_peft_model(classifier(), MoRAMConfig(task_type="SEQ_CLS"))
    assert "score" in model.peft_config["default"].modules_to_save
    assert any(p.requires_grad for n, p in model.named_parameters() if ".score." in n)
    optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=0.1)
    model.train()
    for _ in range(2):
        model(input_ids=x, labels=labels).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.eval()
    trained_head = model.base_model.model.score.modules_to_save["default"].weight
    assert not torch.equal(trained_head, head)
    model.save_pretrained(tmp_path)
    loaded = PeftModel.from_pretrained(classifier(), tmp_path)
    assert torch.equal(loaded.base_model.model.score.modules_to_save["default"].weight, trained_head)
    assert torch.equal(logits(loaded, x), logits(model, x))
    shutil.rmtree(tmp_path)
