"""Several named MoRAM adapters in one peft model: add, switch, combine, grow, delete, save and load."""

import pytest
import torch

from tiny_layers import TwoLinears
from tiny_peft import config, reference
from tiny_text import batch, tiny_llama


def two_adapter_model():
    from peft import get_peft_model

    model = get_peft_model(TwoLinears(), config())
    torch.manual_seed(1)
    model.add_adapter("other", config(target_modules=["lin0"], atoms_per_task=3, topk=None))
    return model.eval()


def test_each_adapter_is_its_own_bank_and_set_adapter_switches_between_them():
    model = two_adapter_model()
    layer = model.base_model.model.lin0
    assert set(layer.moram_bank) == {"default", "other"} and layer.active_adapters == ["default"]
    assert layer.moram_bank["other"].num_atoms == 3 and layer.moram_bank["default"].num_atoms == 4
    x = torch.randn(5, 10, dtype=torch.float64)
    with torch.no_grad():
        assert torch.equal(layer(x), reference(layer, "default")(x))
        model.set_adapter("other")
        assert torch.equal(layer(x), reference(layer, "other")(x))
        hidden = torch.randn(5, 12, dtype=torch.float64)  # lin1 holds no atoms of "other"
        assert torch.equal(model.base_model.model.lin1(hidden), model.base_model.model.lin1.base_layer(hidden))
        model.set_adapter("default")
        assert torch.equal(layer(x), reference(layer, "default")(x))


def test_several_active_adapters_add_their_terms():
    model = two_adapter_model()
    layer = model.base_model.model.lin0
    model.base_model.set_adapter(["default", "other"])
    x = torch.randn(5, 10, dtype=torch.float64)
    with torch.no_grad():
        base = layer.base_layer(x)
        expected = base + (reference(layer, "default")(x) - base) + (reference(layer, "other")(x) - base)
        torch.testing.assert_close(layer(x), expected, rtol=0, atol=1e-12)
        with model.disable_adapter():
            assert torch.equal(layer(x), base)


def test_only_the_active_adapter_trains():
    model = two_adapter_model()
    model.set_adapter("other")
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable == {"base_model.model.lin0.moram_bank.other.new_keys",
                         "base_model.model.lin0.moram_bank.other.new_values"}
    default = {n: t.clone() for n, t in model.state_dict().items() if ".default." in n}
    model.train()
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.5)
    for _ in range(3):
        model(torch.randn(6, 10, dtype=torch.float64)).square().sum().backward()
        optimizer.step()
        optimizer.zero_grad()
    assert all(torch.equal(model.state_dict()[n], t) for n, t in default.items())
    other = model.base_model.model.lin0.moram_bank["other"]
    assert not torch.equal(other.new_values, torch.zeros_like(other.new_values))


def test_tasks_grow_one_named_adapter():
    model = two_adapter_model()
    assert model.add_task("other") == 6
    lin0 = model.base_model.model.lin0
    assert (lin0.moram_bank["other"].num_frozen, lin0.moram_bank["other"].num_atoms) == (3, 6)
    assert lin0.moram_bank["default"].num_atoms == 4  # untouched
    assert not lin0.moram_bank["other"].new_keys.requires_grad  # "other" is not the active adapter
    assert model.add_task() == 8  # the active adapter, "default"
    assert lin0.moram_bank["default"].new_keys.requires_grad
    assert model.freeze_task("default") == 8 and lin0.moram_bank["default"].num_trainable == 0
    model.base_model.set_adapter(["default", "other"])
    with pytest.raises(ValueError, match="2 adapters are active.*name the one"):
        model.add_task()
    with pytest.raises(ValueError, match="no adapter named 'third'"):
        model.add_task("third")


def test_delete_adapter_removes_its_banks_and_keeps_the_other():
    model = two_adapter_model()
    x = torch.randn(5, 10, dtype=torch.float64)
    model.set_adapter("other")
    with torch.no_grad():
        expected = model(x)
    model.set_adapter("default")
    with pytest.warns(UserWarning, match="Adapter default was active which is now deleted"):
        model.delete_adapter("default")
    assert model.active_adapters == ["other"]
    assert not any(".default." in name for name in model.state_dict())
    assert set(model.base_model.model.lin0.moram_bank) == {"other"}
    with torch.no_grad():
        assert torch.equal(model(x), expected)
    with torch.no_grad():  # unload drops every bank and gives the base model back
        assert torch.equal(model.unload()(x), TwoLinears()(x))


def test_a_grown_bank_saved_with_several_adapters_reloads_bit_exactly(tmp_path):
    from peft import PeftModel, get_peft_model

    from moram_avalanche.text import MoRAMConfig

    x, _ = batch()
    model = get_peft_model(tiny_llama(), MoRAMConfig(task_type="CAUSAL_LM", atoms_per_task=4))
    model.add_adapter("second", MoRAMConfig(task_type="CAUSAL_LM", atoms_per_task=2, topk=2,
                                             target_modules=["q_proj"], init_weights=False))
    for name, tasks in (("default", 2), ("second", 3)):
        model.set_adapter(name)
        optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=0.05)
        for task in range(tasks):
            if task:
                model.add_task()
                optimizer = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=0.05)
            model.train()
            model(input_ids=x, labels=x).loss.backward()
            optimizer.step()
            optimizer.zero_grad()
    model.eval()
    expected = {}
    for name in ("default", "second"):
        model.set_adapter(name)
        with torch.no_grad():
            expected[name] = model(input_ids=x).logits
    state = {k: v.clone() for k, v in model.state_dict().items() if ".moram_bank." in k}
    model.save_pretrained(tmp_path)  # every adapter: "default" at the top, "second" in its folder
    assert (tmp_path / "second" / "adapter_model.safetensors").is_file()

    loaded = PeftModel.from_pretrained(tiny_llama(), tmp_path)
    loaded.load_adapter(tmp_path / "second", adapter_name="second")
    loaded_state = loaded.state_dict()
    assert set(state) == {k for k in loaded_state if ".moram_bank." in k}
    for key, value in state.items():
        assert torch.equal(loaded_state[key], value), key
    q_proj = loaded.base_model.model.model.layers[0].self_attn.q_proj
    assert (q_proj.moram_bank["second"].num_frozen, q_proj.moram_bank["second"].num_atoms) == (4, 6)
    for name in ("default", "second"):
        loaded.set_adapter(name)
        with torch.no_grad():
            assert torch.equal(loaded(input_ids=x).logits, expected[name]), name


def test_load_adapter_under_a_new_name_and_refuse_merging_it(tmp_path):
    from peft import PeftModel, get_peft_model

    from moram_avalanche.text import MERGE_REFUSED

    model = get_peft_model(TwoLinears(), config())
    model.save_pretrained(tmp_path)
    loaded = PeftModel.from_pretrained(TwoLinears(), tmp_path)
    loaded.load_adapter(tmp_path, adapter_name="copy")
    lin0 = loaded.base_model.model.lin0
    assert torch.equal(lin0.moram_bank["copy"].keys, lin0.moram_bank["default"].keys)
    with pytest.raises(ValueError, match="routing weights"):
        loaded.merge_and_unload()
    with pytest.raises(ValueError, match="routing weights"):
        lin0.merge()
    assert "unload()" in MERGE_REFUSED
