"""The peft layer's last call again (``MoRAMTunerLayer.repeat_read``; issue "GPU path II", item 7).

A bf16 language model's decode step calls every adapted layer in the same state, host-bound. The
layer keeps what its last call went to (one adapter's bank, whose eval call its plan served:
``layers.moram.plan``) and repeats it after checking what it decided besides the bank's plan. Each
test holds the repeat to an independent expectation (the library's ``MoRAMLinear`` holding the same
atoms, the base alone, or the same call with the repeat dropped) and counts what the repeat served,
so that a change it missed (a stale output) and a repeat never taken both fail.
"""

import copy
import pickle

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from moram_avalanche.layers.moram.layer import keep_base_casts
from moram_avalanche.layers.moram.paths import triton as moram_triton
from moram_avalanche.layers.moram.paths import use_path
from tiny_layers import TwoLinears
from tiny_peft import config, reference

PATHS = ["dense", pytest.param("triton", marks=pytest.mark.skipif(
    not moram_triton.usable(torch.empty(0)), reason="Triton's interpreter is off (TRITON_INTERPRET=1 not set early)"))]


KINDS = ["kept", "apart"]


def model_of(kind="kept", **kwargs):
    """Two adapters on lin0, two tasks each, frozen; the base's copies kept (the stacked, planned call)
    or not (``kind="apart"``, the default: the call that reads the base apart, planned too)."""
    from peft import get_peft_model

    model = get_peft_model(TwoLinears(), config(**kwargs))
    torch.manual_seed(1)
    model.add_adapter("other", config(target_modules=["lin0"], atoms_per_task=3, topk=2))
    for bank in model.base_model.model.lin0.moram_bank.values():
        bank.expand()
        with torch.no_grad():
            bank.new_values.normal_(std=0.5)
        bank.freeze()
    keep_base_casts(model, kind == "kept")
    return model.eval()


def lin0_of(kind="kept", **kwargs):
    """``(model, its lin0, an input of 4 rows)``: :func:`model_of`'s first layer, which holds both adapters."""
    model = model_of(kind, **kwargs)
    return model, model.base_model.model.lin0, torch.randn(4, 10, dtype=torch.float64)


@pytest.fixture
def repeats(monkeypatch):
    """What each ``repeat_read`` gave: True where it served the call, False where it left it."""
    from moram_avalanche.text.peft_layer import MoRAMTunerLayer

    served = []
    repeat_read = MoRAMTunerLayer.repeat_read

    def counted(layer, x, repeat):
        out = repeat_read(layer, x, repeat)
        served.append(out is not None)
        return out

    monkeypatch.setattr(MoRAMTunerLayer, "repeat_read", counted)
    return served


def long_way(layer, x):
    """The same call with the repeat and the banks' plans dropped (both made again)."""
    layer._repeat = None
    for bank in layer.moram_bank.values():
        bank._plan = None
    return layer(x)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_a_repeated_call_is_the_bank_s_planned_call_again(repeats, kind, path, dtype):
    """float64 (exact against the library's own layer) and a bf16 model (a bf16 decode step's call)."""
    model = model_of(kind).to(dtype)
    layer = model.base_model.model.lin0
    x = torch.randn(2, 3, 10, dtype=torch.float64).to(dtype)
    with use_path(path), torch.no_grad():
        first = layer(x)
        again = [layer(x) for _ in range(3)]
        assert repeats == [True, True, True] and layer._repeat[1] == "default" and first.dtype == dtype
        assert all(torch.equal(out, first) for out in again) and torch.equal(long_way(layer, x), first)
        expected = reference(layer, "default")(x)
    exact = dtype == torch.float64
    torch.testing.assert_close(first, expected, rtol=0 if exact else 2e-2, atol=1e-12 if exact else 2e-2)


def _disable(model, layer):
    model.base_model.disable_adapter_layers()
    return layer.base_layer


def _other(model, layer):
    model.set_adapter("other")
    return reference(layer, "other")


def _both(model, layer):
    model.base_model.set_adapter(["default", "other"])
    one, other, base = reference(layer, "default"), reference(layer, "other"), layer.base_layer
    return lambda x: base(x) + (one(x) - base(x)) + (other(x) - base(x))


def _new_weight(model, layer):
    layer.base_layer.weight = nn.Parameter(layer.base_layer.weight * -1, requires_grad=False)
    return reference(layer, "default")


def _weight_in_place(model, layer):
    with torch.no_grad():
        layer.base_layer.weight.add_(1.0)
    return reference(layer, "default")


def _bank_swapped(model, layer):
    bank = copy.deepcopy(layer.moram_bank["default"])
    with torch.no_grad():
        bank.frozen_values.mul_(-1)
    layer.moram_bank["default"] = bank
    return reference(layer, "default")


def _grown(model, layer):  # a new task: trainable rows, read apart (no plan)
    bank = layer.moram_bank["default"]
    bank.expand()
    with torch.no_grad():
        bank.new_values.normal_(std=0.5)
    return reference(layer, "default")


def _base_swapped(model, layer):
    torch.manual_seed(4)
    layer.base_layer = nn.Linear(10, 12).double()
    return reference(layer, "default")


CHANGES = {
    "adapters disabled": _disable,
    "another adapter set": _other,
    "two adapters active": _both,
    "the base's weight replaced": _new_weight,
    "the base's weight edited in place": _weight_in_place,
    "the bank replaced in its container": _bank_swapped,
    "a new task": _grown,
    "the base replaced": _base_swapped,
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", list(CHANGES))
def test_a_change_of_what_the_layer_decides_takes_the_long_way(repeats, kind, name):
    """Each change takes the long way once, but an edit in place of a base read apart: the repeat
    reads that base at each call (nothing kept of it) and serves the edited call."""
    model, layer, x = lin0_of(kind)
    with use_path("dense"), torch.no_grad():
        layer(x), layer(x)
        assert repeats == [True]
        expected = CHANGES[name](model, layer)
        out = layer(x)
        assert repeats == [True, kind == "apart" and name == "the base's weight edited in place"]
        torch.testing.assert_close(out, expected(x), rtol=0, atol=1e-12)
        assert not torch.equal(out, reference(model_of().base_model.model.lin0, "default")(x))  # it changed
        assert torch.equal(layer(x), out)  # repeated again where the new state allows it, or the long way


def test_a_dropout_in_training_mode_is_never_repeated(repeats):
    model, layer, x = lin0_of(dropout=0.5)
    with use_path("dense"), torch.no_grad():
        layer(x), layer(x)
        evaluated = layer(x)
        assert repeats == [True, True]
        model.train()
        for bank in layer.moram_bank.values():
            bank.eval()  # (the bank's own plan would still apply: the layer's dropout must stop the repeat)
        torch.manual_seed(0)
        dropped = layer(x)
        assert repeats == [True, True, False] and layer._repeat is None
        torch.manual_seed(0)
        assert torch.equal(long_way(layer, x), dropped) and not torch.equal(dropped, evaluated)


def test_copies_and_pickles_hold_no_repeat(repeats):
    model, layer, x = lin0_of()
    with use_path("dense"), torch.no_grad():
        first = [layer(x), layer(x)][1]
        twin, loaded = copy.deepcopy(layer), pickle.loads(pickle.dumps(layer))
        assert layer._repeat is not None and twin._repeat is None and loaded._repeat is None
        assert torch.equal(twin(x), first) and torch.equal(loaded(x), first)
        state = layer.__dict__.copy()
        del state["_repeat"]  # a layer pickled before the repeat existed
        older = object.__new__(type(layer))
        older.__setstate__(state)
        assert older._repeat is None and torch.equal(older(x), first)


def test_a_deleted_adapter_s_bank_is_let_go(repeats):
    model, layer, x = lin0_of()
    with use_path("dense"), torch.no_grad():
        model.set_adapter("other")
        layer(x), layer(x)
        assert layer._repeat[1] == "other"
        model.set_adapter("default")
        model.delete_adapter("other")
        assert layer._repeat is None
        torch.testing.assert_close(layer(x), reference(layer, "default")(x), rtol=0, atol=1e-12)


def test_torch_compile_neither_reads_nor_writes_the_repeat(repeats):
    model, layer, x = lin0_of()
    with use_path("dense"), torch.no_grad():
        eager = [layer(x), layer(x)][1]
        kept = layer._repeat
        compiled = torch.compile(layer, backend="eager", fullgraph=True)
        assert torch.equal(compiled(x), eager)
        assert layer._repeat is kept and repeats == [True]


def test_a_dropout_put_in_its_container_is_seen(repeats):
    """No dropout (``nn.Identity``): repeated in training mode too; a dropout set in its place is read."""
    model, layer, x = lin0_of()
    model.train()
    for bank in layer.moram_bank.values():
        bank.eval()  # (the banks' plans apply: only the layer's own checks can stop the repeat)
    with use_path("dense"), torch.no_grad():
        layer(x), layer(x)
        assert repeats == [True]
        layer.moram_dropout["default"] = nn.Dropout(0.5)
        torch.manual_seed(0)
        dropped = layer(x)
        assert repeats == [True, False]
        torch.manual_seed(0)
        assert torch.equal(long_way(layer, x), dropped)
        assert not torch.equal(dropped, reference(layer, "default")(x))


def test_extra_arguments_are_never_repeated_past(repeats):
    """The long way hands them to the base (an ``nn.Linear`` takes none: its error, not a stale repeat)."""
    model, layer, x = lin0_of()
    with use_path("dense"), torch.no_grad():
        layer(x), layer(x)
        with pytest.raises(TypeError):
            layer(x, scale=2.0)
        assert repeats == [True] and layer._repeat is None


def test_the_disable_context_and_enabling_again(repeats):
    model, layer, x = lin0_of()
    with use_path("dense"), torch.no_grad():
        first = [layer(x), layer(x)][1]
        with model.disable_adapter():
            assert torch.equal(layer(x), layer.base_layer(x))
        model.base_model.disable_adapter_layers()
        assert torch.equal(layer(x), layer.base_layer(x))
        model.base_model.enable_adapter_layers()
        assert torch.equal(layer(x), first) and torch.equal(layer(x), first)
    assert repeats == [True, False, True]  # (a call it left drops the repeat: the next disabled one tries none)


def test_a_bias_given_to_a_bias_less_base_is_read(repeats):
    """``base.bias`` set as a plain tensor after ``del`` is outside the parameter table: the long way."""
    model, layer, x = lin0_of()
    layer.base_layer = nn.Linear(10, 12, bias=False).double()
    with use_path("dense"), torch.no_grad():
        layer(x), layer(x)
        assert repeats == [True]
        del layer.base_layer.bias
        layer.base_layer.bias = torch.full((12,), 100.0, dtype=torch.float64)
        out = layer(x)
        assert repeats == [True, False]
        torch.testing.assert_close(out, reference(layer, "default")(x), rtol=0, atol=1e-12)


@pytest.mark.parametrize("kind", KINDS)
def test_a_float64_input_under_autocast_is_read_the_long_way_or_cast_apart(repeats, kind):
    """A bf16 base under bf16 autocast, a float64 input: the long way casts it (autocast never does),
    so a stacked call is not repeated; a repeat of the call apart casts it too."""
    model = model_of(kind).to(torch.bfloat16)
    layer = model.base_model.model.lin0
    x = torch.randn(4, 10, dtype=torch.float64)
    with use_path("dense"), torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        first = layer(x)
        assert torch.equal(layer(x), first) and first.dtype == torch.bfloat16
    assert (layer._repeat is None) is (kind == "kept") and repeats == ([] if kind == "kept" else [True])


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("hooked", ["base", "bank"])
def test_a_hook_added_to_the_base_or_the_bank_ends_the_repeat_and_runs(repeats, kind, hooked):
    """A hook on the base or on the bank added after repeated calls: the next calls run it (the base
    called, the bank called), and their output is what the hook makes of the library's own layer's."""
    model, layer, x = lin0_of(kind)
    with use_path("dense"), torch.no_grad():
        [layer(x) for _ in range(3)]
        assert repeats == [True, True]
        base = F.linear(x, layer.base_layer.weight, layer.base_layer.bias)
        atoms = reference(layer, "default")(x) - base
        seen = []
        module = layer.base_layer if hooked == "base" else layer.moram_bank["default"]
        module.register_forward_hook(lambda module, args, out: (seen.append(1), out * 2)[1])
        outs = [layer(x) for _ in range(2)]
    expected = 2 * base + atoms if hooked == "base" else base + 2 * atoms
    assert len(seen) == 2 and not any(repeats[2:])
    for out in outs:
        torch.testing.assert_close(out, expected, rtol=0, atol=1e-12)


def test_an_offloaded_model_loads_its_base_and_bank_through_their_hooks(repeats):
    """accelerate's ``cpu_offload`` (what ``device_map="auto"`` does to layers that do not fit): the
    base's and the bank's tensors wait on ``meta`` and each module's hook loads them in its call. The
    output is the model's without offload (float64: within rounding, the base's output then added)."""
    from accelerate import cpu_offload

    model = model_of("apart")
    x = torch.randn(4, 10, dtype=torch.float64)
    with torch.no_grad():
        want = model(x)
        cpu_offload(model, execution_device=torch.device("cpu"))
        lin0 = model.base_model.model.lin0
        assert lin0.base_layer.weight.is_meta and "forward" in lin0.base_layer.__dict__
        outs = [model(x) for _ in range(2)]
    for out in outs:
        torch.testing.assert_close(out, want, rtol=0, atol=1e-12)


def test_a_data_parallel_replica_holds_no_repeat(repeats):
    model, layer, x = lin0_of()
    with use_path("dense"), torch.no_grad():
        layer(x), layer(x)
    assert layer._repeat is not None
    replica = layer._replicate_for_data_parallel()
    assert replica._repeat is None and layer._repeat is not None
