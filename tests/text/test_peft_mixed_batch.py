"""peft's mixed-adapter batches with MoRAM: ``model(..., adapter_names=[...])`` and
``model.generate(..., adapter_names=[...])``, one adapter name per row, ``"__base__"`` for the base
model alone (``MoRAMModel._enable_peft_forward_hooks``, ``MoRAMTunerLayer.mixed_batch_forward``).

Each row is held to the same row run with that adapter set active (``set_adapter``), or with the
adapters disabled for ``"__base__"``: an independent expectation, the model's ordinary forward.
Rows the base alone computes (``"__base__"``, an adapter the layer holds no atoms of) are the base's
call on the whole batch both ways: ``torch.equal`` in float64. An adapter's rows are compared within
float64's rounding (``atol=1e-12``, a few ulps): the mixed batch reads a bank on that adapter's rows
only, and a GEMM over fewer rows may round apart from one over the batch (BLAS picks its blocking
by the shape); against the fused read-out (the base's product and the atoms' term summed in one
read) the sums are rounded in another order too. Generated tokens are compared by ``torch.equal``.
Before this feature peft dropped ``adapter_names`` for MoRAM (the tuner had no
``_enable_peft_forward_hooks``) and every row used the active adapter.
"""

import pytest
import torch

from tiny_layers import TwoLinears
from tiny_peft import config
from tiny_text import tiny_llama, tiny_t5

NAMES = ["other", "__base__", "default", "other", "default"]


def two_adapter_model(**other):
    """TwoLinears with adapter "default" on lin0 and lin1 and adapter "other" on lin0 only (other atoms)."""
    from peft import get_peft_model

    model = get_peft_model(TwoLinears(), config(**other.pop("default", {})))
    torch.manual_seed(1)
    model.add_adapter("other", config(target_modules=["lin0"], atoms_per_task=3, topk=2, **other))
    return model.eval()


def tuner_layers(model):
    from moram_avalanche.text.peft_layer import MoRAMTunerLayer

    return [module for module in model.modules() if isinstance(module, MoRAMTunerLayer)]


def by_adapter(model, x, names, run=lambda model, x: model(x)):
    """``run`` on all of ``x`` with each of ``names`` set active (adapters disabled for ``"__base__"``), by name."""
    outs = {}
    for name in dict.fromkeys(names):
        if name == "__base__":
            with model.disable_adapter():
                outs[name] = run(model, x)
        else:
            model.set_adapter(name)
            outs[name] = run(model, x)
    model.set_adapter("default")
    return outs


def row_by_row(model, x, names, run=lambda model, x: model(x)):
    """Row ``i`` of ``run`` with adapter ``names[i]`` set active (adapters disabled for ``"__base__"``)."""
    outs = by_adapter(model, x, names, run)
    return torch.stack([outs[name][i] for i, name in enumerate(names)])


def assert_rows(mixed, expected, names, base_rows=("__base__",)):
    """``torch.equal`` on the rows of ``base_rows``, within float64's rounding elsewhere (module docstring)."""
    assert len(mixed) == len(expected) == len(names)
    for row, name in enumerate(names):
        if name in base_rows:
            assert torch.equal(mixed[row], expected[row]), (row, name)
        else:
            torch.testing.assert_close(mixed[row], expected[row], rtol=0, atol=1e-12, msg=f"row {row} ({name})")


@pytest.mark.parametrize("fused", [False, True])
def test_each_row_is_its_adapter_s_row(fused):
    model = two_adapter_model()
    for layer in tuner_layers(model):
        layer.fuse_base = fused
    x = torch.randn(5, 3, 10, dtype=torch.float64)
    with torch.no_grad():
        mixed = model(x, adapter_names=NAMES)
        expected = row_by_row(model, x, NAMES)
        one_adapter = model(x)
    assert_rows(mixed, expected, NAMES)
    assert not torch.allclose(mixed[[0, 1, 3]], one_adapter[[0, 1, 3]])  # (the rows not "default"'s differ)


@pytest.mark.parametrize("kind", ["bf16 model", "fp32 model under bf16 autocast"])
def test_rows_come_in_the_base_output_s_dtype(kind):
    """The atoms' term is added in the base output's dtype; each row within bf16's rounding of its
    adapter's row (the term rounded to bf16 apart from the base's product, where the ordinary call
    fuses them into one read-out: the tolerance of ``test_peft_repeat.py``'s bf16 rows)."""
    model = two_adapter_model()
    x = torch.randn(5, 3, 10)
    if kind == "bf16 model":
        model, x, autocast = model.to(torch.bfloat16), x.to(torch.bfloat16), torch.autocast("cpu", enabled=False)
    else:
        model, autocast = model.float(), torch.autocast("cpu", dtype=torch.bfloat16)
    with torch.no_grad(), autocast:
        mixed = model(x, adapter_names=NAMES)
        expected = row_by_row(model, x, NAMES)
        one_adapter = model(x)
    assert mixed.dtype == expected.dtype == torch.bfloat16
    torch.testing.assert_close(mixed, expected, rtol=2e-2, atol=2e-2)
    assert not torch.allclose(mixed[[0, 3]], one_adapter[[0, 3]], rtol=2e-2, atol=2e-2)


def test_rows_of_modules_to_save_follow_their_adapter():
    """peft's ``modules_to_save`` copies (lin1 here, one per adapter) route their rows too. peft's
    wrapper calls each copy on its rows only, and a GEMM of 2 rows rounds apart from one of 5 (an
    ulp or two: ``atol=1e-12`` in float64)."""
    model = two_adapter_model(default={"target_modules": ["lin0"], "modules_to_save": ["lin1"]},
                              modules_to_save=["lin1"])
    with torch.no_grad():
        model.base_model.model.lin1.modules_to_save["other"].weight.mul_(-2)
    x = torch.randn(5, 10, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(model(x, adapter_names=NAMES), row_by_row(model, x, NAMES), rtol=0, atol=1e-12)
        assert not torch.allclose(model(x, adapter_names=NAMES), model(x))


def test_the_layer_alone_and_with_adapters_disabled():
    """The layer called with adapter_names: the rows of an adapter it holds no atoms of ("other" on
    lin1) and "__base__" rows are the base's; disabled adapters give the base's output for all rows."""
    model = two_adapter_model()
    lin0, lin1 = model.base_model.model.lin0, model.base_model.model.lin1
    x = torch.randn(5, 10, dtype=torch.float64)
    hidden = torch.randn(5, 12, dtype=torch.float64)
    with torch.no_grad():
        assert_rows(lin0(x, adapter_names=NAMES), row_by_row(model, x, NAMES, lambda m, x: lin0(x)), NAMES)
        out1 = lin1(hidden, adapter_names=NAMES)
        assert_rows(out1, row_by_row(model, hidden, NAMES, lambda m, x: lin1(x)), NAMES, ("__base__", "other"))
        base1 = lin1.base_layer(hidden)
        assert torch.equal(out1[[0, 1, 3]], base1[[0, 1, 3]]) and not torch.allclose(out1[[2, 4]], base1[[2, 4]])
        with model.disable_adapter():
            assert torch.equal(lin0(x, adapter_names=NAMES), lin0.base_layer(x))
            assert torch.equal(model(x, adapter_names=NAMES), model.base_model.model.lin1(
                torch.relu(lin0.base_layer(x))))


def test_the_repeat_is_neither_taken_nor_changed(monkeypatch):
    """A mixed call after repeated plain calls: never ``repeat_read``, and the plain calls' repeat stays."""
    from moram_avalanche.layers.moram.paths import use_path
    from moram_avalanche.text.peft_layer import MoRAMTunerLayer

    model = two_adapter_model()
    for bank in model.base_model.model.lin0.moram_bank.values():
        bank.freeze()  # (a frozen bank's eval call is planned: what the repeat serves)
    lin0 = model.base_model.model.lin0
    x = torch.randn(5, 10, dtype=torch.float64)
    with use_path("dense"), torch.no_grad():
        plain = [lin0(x), lin0(x)][1]
        kept = lin0._repeat
        assert kept is not None
        calls = []
        repeat_read = MoRAMTunerLayer.repeat_read
        monkeypatch.setattr(MoRAMTunerLayer, "repeat_read", lambda *a: (calls.append(1), repeat_read(*a))[1])
        mixed = lin0(x, adapter_names=["default"] * 5)
        assert calls == [] and lin0._repeat is kept
        torch.testing.assert_close(mixed, plain, rtol=0, atol=1e-12)
        assert torch.equal(lin0(x), plain) and calls == [1]


def test_hooks_are_removed_after_the_call_and_after_an_error():
    model = two_adapter_model()
    lin0 = model.base_model.model.lin0
    x = torch.randn(5, 10, dtype=torch.float64)
    during = []
    lin0.base_layer.register_forward_hook(lambda *a: during.append(len(lin0._forward_pre_hooks)))
    with torch.no_grad():
        mixed = model(x, adapter_names=NAMES)
        assert during == [1]
        assert all(not layer._forward_pre_hooks for layer in tuner_layers(model))
        default = model(x)  # no names now: every row the active adapter's
        assert not torch.equal(default, mixed)
        with pytest.raises(ValueError, match="one per row"):  # (raised by lin0, which the hook gave the names:
            model(x=x, adapter_names=NAMES[:2])  # the batch as a keyword the model's check does not read)
        assert all(not layer._forward_pre_hooks for layer in tuner_layers(model))
        assert torch.equal(model(x), default) and during == [1, 0, 0]


def test_refusals_name_the_problem():
    model = two_adapter_model()
    x = torch.randn(5, 10, dtype=torch.float64)
    with torch.no_grad():
        with pytest.raises(ValueError, match=r"no MoRAM layer of the model holds: \['typo'\]"):
            model(x, adapter_names=["default", "typo", "__base__", "other", "default"])
        with pytest.raises(ValueError, match="adapter_names names 4 adapters.*has 5 rows"):
            model(x, adapter_names=NAMES[:4])
        with pytest.raises(TypeError, match="must be a list of adapter names"):
            model(x, adapter_names="default")
        model.train()
        with pytest.raises(ValueError, match="training mode"):
            model(x, adapter_names=NAMES)
    assert all(not layer._forward_pre_hooks for layer in tuner_layers(model))


def llama_with_two_adapters():
    """A tiny LLaMA with adapters "default" and "other" on q_proj and v_proj, values drawn large
    enough that each adapter changes the greedy tokens."""
    from peft import get_peft_model

    options = dict(target_modules=["q_proj", "v_proj"], init_weights=False)
    model = get_peft_model(tiny_llama(), config(**options))
    torch.manual_seed(2)
    model.add_adapter("other", config(**options))
    with torch.no_grad():
        for layer in tuner_layers(model):
            for bank in layer.moram_bank.values():
                bank.new_values.normal_(std=2.0)
    return model.eval()


@pytest.mark.parametrize("num_beams", [1, 2])
def test_generate_gives_each_row_its_adapter_s_tokens(num_beams):
    model = llama_with_two_adapters()
    ids = torch.randint(3, 99, (3, 5), generator=torch.Generator().manual_seed(0))
    names = ["other", "default", "__base__"]

    def generate(model, ids, **kwargs):
        return model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=6,
                              do_sample=False, num_beams=num_beams, pad_token_id=0, **kwargs)

    with torch.no_grad():
        mixed = generate(model, ids, adapter_names=names)
        expected = row_by_row(model, ids, names, generate)
        default = generate(model, ids)  # every row through the active adapter, "default"
    assert torch.equal(mixed, expected) and not torch.equal(expected, default)  # (the adapters' tokens differ)


def test_beam_search_of_an_encoder_decoder_keeps_the_encoder_s_rows():
    """T5 with num_beams=2: the encoder reads the batch's rows (one name each), the decoder each
    row's beams (the name repeated), as transformers expands the encoder's output."""
    from peft import get_peft_model

    options = dict(target_modules=["q", "v", "o", "wi", "wo"], init_weights=False)
    model = get_peft_model(tiny_t5(), config(**options))
    torch.manual_seed(2)
    model.add_adapter("other", config(**options))
    with torch.no_grad():
        for layer in tuner_layers(model):
            for bank in layer.moram_bank.values():
                bank.new_values.normal_(std=5.0)  # (the tiny T5's greedy tokens change with each adapter)
    model.eval()
    ids = torch.randint(3, 99, (3, 6), generator=torch.Generator().manual_seed(0))
    names = ["__base__", "other", "default"]

    def generate(model, ids, **kwargs):
        return model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=5,
                              do_sample=False, num_beams=2, **kwargs)

    with torch.no_grad():
        mixed = generate(model, ids, adapter_names=names)
        expected = row_by_row(model, ids, names, generate)
        default = generate(model, ids)
    assert torch.equal(mixed, expected) and not torch.equal(expected, default)


def test_rows_repeated_in_place_stand_for_their_name():
    """A batch of ``m`` rows a name, each row repeated in place (``generate``'s expansions that the
    model's hook cannot see): each name stands for its ``m`` rows."""
    model = two_adapter_model()
    x = torch.randn(5, 10, dtype=torch.float64).repeat_interleave(3, dim=0)
    names = [name for name in NAMES for _ in range(3)]
    with torch.no_grad():
        mixed = model(x=x, adapter_names=NAMES)  # (a keyword the model's check does not read: the layers see 15 rows)
        expected = row_by_row(model, x, names)
    assert_rows(mixed, expected, names)


def test_generate_with_beams_in_a_generation_config_gives_each_row_its_adapter_s_sequences():
    """``num_beams`` and ``num_return_sequences`` in a ``GenerationConfig``, not as keywords: the
    layers see each row's beams and pick each row's name for them."""
    from transformers import GenerationConfig

    model = llama_with_two_adapters()
    ids = torch.randint(3, 99, (3, 5), generator=torch.Generator().manual_seed(0))
    names = ["other", "default", "__base__"]
    settings = GenerationConfig(max_new_tokens=6, do_sample=False, num_beams=2, num_return_sequences=2,
                                pad_token_id=0)

    def generate(model, ids, **kwargs):
        return model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), generation_config=settings,
                              **kwargs)

    with torch.no_grad():
        mixed = generate(model, ids, adapter_names=names)
        by_name = by_adapter(model, ids, names, generate)
    expected = torch.cat([by_name[name][2 * row:2 * row + 2] for row, name in enumerate(names)])
    assert mixed.shape == expected.shape and torch.equal(mixed, expected)
    assert not torch.equal(by_name["other"], by_name["default"])  # (the adapters' sequences differ)
