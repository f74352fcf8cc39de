"""Hostile uses of MoRAM as a peft method (issue 46), each refused in one line naming the cause
and the fix where peft's LoRA raises a traceback or does something silently wrong: an
``adapter_config.json`` without or with another ``peft_type``, deleting the only adapter (allowed, as peft's own tests require),
``add_weighted_adapter``, an adapter file carrying a base weight, an unknown ``modules_to_save``."""

import json

import pytest
import torch

from tiny_layers import TwoLinears


def config(**kwargs):
    from moram_avalanche.text import MoRAMConfig

    options = dict(target_modules=["lin0"], atoms_per_task=4, topk=2, temperature=0.5, threshold=0.1, dropout=0.0,
                   init_weights=False)
    return MoRAMConfig(**{**options, **kwargs})


def one_line(error):
    assert "\n" not in str(error.value)
    return str(error.value)


def test_an_adapter_config_without_or_with_another_peft_type_is_refused_by_moram_config(tmp_path):
    from peft import LoraConfig, get_peft_model

    from moram_avalanche.text import MoRAMConfig

    get_peft_model(TwoLinears(), config()).save_pretrained(tmp_path / "moram")
    assert MoRAMConfig.from_pretrained(tmp_path / "moram").topk == 2  # as saved
    path = tmp_path / "moram" / "adapter_config.json"
    fields = json.loads(path.read_text())
    del fields["peft_type"]
    path.write_text(json.dumps(fields))
    with pytest.raises(ValueError, match='adapter_config.json has no "peft_type".*"peft_type": "MORAM".*add that '
                                         "field") as error:
        MoRAMConfig.from_pretrained(tmp_path / "moram")  # it was accepted, and PeftModel's a KeyError
    one_line(error)
    get_peft_model(TwoLinears(), LoraConfig(target_modules=["lin0"])).save_pretrained(tmp_path / "lora")
    with pytest.raises(ValueError, match=r"a LORA adapter's .*not MoRAM's") as error:
        MoRAMConfig.from_pretrained(tmp_path / "lora")  # it returned a LoraConfig
    one_line(error)


def test_deleting_the_only_adapter_follows_peft_and_leaves_no_atoms():
    """peft's own tuner tests delete a model's only adapter (``test_delete_adapter``,
    ``test_delete_inactive_adapter``): allowed as for LoRA, and nothing of its atoms stays behind."""
    from peft import get_peft_model

    model = get_peft_model(TwoLinears(), config())
    assert any(".default" in name for name, _ in model.named_parameters())
    model.delete_adapter("default")
    assert dict(model.peft_config) == {}
    assert not [name for name, _ in model.named_parameters() if ".default" in name]
    assert not [name for name, _ in model.named_buffers() if ".default" in name]


def test_add_weighted_adapter_is_refused_naming_why():
    from peft import get_peft_model

    model = get_peft_model(TwoLinears(), config())
    model.add_adapter("other", config())
    with pytest.raises(NotImplementedError, match="cannot combine MoRAM adapters.*routing") as error:
        model.add_weighted_adapter(["default", "other"], [0.5, 0.5], "mixed")
    one_line(error)
    assert set(model.peft_config) == {"default", "other"}


@pytest.mark.parametrize("key", ["base_model.model.lin1.weight", "base_model.model.lin0.base_layer.weight",
                                 "base_model.model.lin0.weight", "base_model.model.lin1.bias"])
def test_an_adapter_file_carrying_a_base_weight_is_refused_and_the_base_kept(key, tmp_path):
    from peft import PeftModel, get_peft_model
    from safetensors.torch import load_file, save_file

    get_peft_model(TwoLinears(), config()).save_pretrained(tmp_path)
    weights = load_file(tmp_path / "adapter_model.safetensors")
    shape = TwoLinears().state_dict()[key.removeprefix("base_model.model.").replace(".base_layer", "")].shape
    save_file({**weights, key: torch.full(shape, 7.0, dtype=torch.float64)}, tmp_path / "adapter_model.safetensors")
    base = TwoLinears()
    pristine = {name: value.clone() for name, value in base.state_dict().items()}
    with pytest.raises(ValueError, match=rf"the adapter file holds '{key}', a weight of the base model: loading it "
                                         "would overwrite") as error:
        PeftModel.from_pretrained(base, tmp_path)  # peft's LoRA loads it over the base without a word
    one_line(error)
    kept = {name.replace(".base_layer", ""): value for name, value in base.state_dict().items() if "moram" not in name}
    assert kept.keys() == pristine.keys() and all(torch.equal(kept[k], pristine[k]) for k in kept)
    loaded = get_peft_model(TwoLinears(), config())
    with pytest.raises(ValueError, match="a weight of the base model"):
        loaded.load_adapter(tmp_path, adapter_name="other")


def test_an_unknown_module_to_save_is_refused_before_anything_is_wrapped():
    from peft import get_peft_model

    with pytest.raises(ValueError, match=r"modules_to_save names \['head'\], which match no module") as error:
        get_peft_model(TwoLinears(), config(modules_to_save=["head"]))  # peft's LoRA accepts it, saves nothing
    one_line(error)
    model = get_peft_model(TwoLinears(), config(modules_to_save=["lin1"]))  # a module that exists
    with pytest.raises(ValueError, match=r"\['lin9'\]"):
        model.add_adapter("other", config(modules_to_save=["lin9"]))
    assert list(model.peft_config) == ["default"] and list(model.base_model.model.lin0.moram_bank) == ["default"]
