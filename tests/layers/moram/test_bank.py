"""A bank without a base (AtomBank, MoRAMAtoms): the same steps as MoRAMLinear, its own state dict,
the layer's keys read as well, and loading onto the meta device (assign)."""

import pickle

import pytest
import torch
from torch import nn

from moram_avalanche.layers.moram.layer import MoRAMAtoms, MoRAMLinear
from moram_avalanche.layers.moram.naive import naive_moram
from moram_avalanche.layers.moram.paths import triton as moram_triton
from moram_avalanche.layers.moram.paths import use_path

OPTIONS = dict(atoms_per_task=3, topk=2, temperature=0.1, threshold=0.1)


def grown(d_in=6, d_out=5, expansions=2, seed=0):
    """A MoRAMLinear grown ``expansions`` times with non-zero values, and a MoRAMAtoms holding its bank."""
    torch.manual_seed(seed)
    layer = MoRAMLinear(nn.Linear(d_in, d_out).double(), **OPTIONS)
    for _ in range(expansions):
        layer.expand()
        with torch.no_grad():
            layer.new_values.normal_()
    bank = MoRAMAtoms(d_in, d_out, torch.empty(0, dtype=torch.float64), **OPTIONS)
    bank.load_atoms(layer.keys, layer.values, layer.num_frozen, layer.atom_task)
    return layer, bank


@pytest.mark.parametrize("path", ["reference", "dense", "triton"])
@pytest.mark.parametrize("training", [True, False])
def test_a_bank_without_a_base_runs_the_layers_steps(path, training):
    if path == "triton" and not moram_triton.usable(torch.empty(0)):
        pytest.skip("Triton's interpreter is off")
    layer, bank = grown()
    layer.train(training)
    bank.train(training)
    x = torch.randn(2, 4, 6, dtype=torch.float64)
    base = layer.base
    with use_path(path):
        assert torch.equal(bank.read(x, base.weight, base.bias), layer(x))  # the same call, base fused
        expected = naive_moram(x.reshape(-1, 6), torch.zeros(5, 6, dtype=torch.float64), None, [layer.keys],
                               [layer.values], training=training, **{k: OPTIONS[k] for k in ("topk", "temperature",
                                                                                             "threshold")})
        torch.testing.assert_close(bank(x), expected.reshape(2, 4, 5), rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(base(x) + bank(x), layer(x), rtol=1e-12, atol=1e-12)
        (bank(x).square().sum()).backward()
    assert bank.new_keys.grad is not None and bank.new_values.grad is not None


def test_its_state_dict_names_every_tensor_and_loads_into_a_bank_of_any_size():
    layer, bank = grown(expansions=3)
    state = bank.state_dict()
    assert set(state) == {"frozen_keys", "frozen_values", "new_keys", "new_values", "atom_task"}
    assert state["frozen_keys"].shape == (6, 6) and state["new_values"].shape == (3, 5)  # rows: one per atom
    assert set(dict(bank.named_parameters())) == {"new_keys", "new_values"}
    fresh = MoRAMAtoms(6, 5, torch.empty(0, dtype=torch.float64), **OPTIONS)
    fresh.expand()  # one task: another size
    fresh.load_state_dict(state)
    assert (fresh.num_frozen, fresh.num_atoms) == (6, 9)
    assert torch.equal(fresh.keys, layer.keys) and torch.equal(fresh.values, layer.values)
    assert torch.equal(fresh.atom_task, layer.atom_task)
    layer.freeze()  # a frozen bank saves no trainable rows, and loads as one
    frozen = MoRAMAtoms(6, 5, torch.empty(0, dtype=torch.float64), **OPTIONS)
    frozen.load_atoms(layer.keys, layer.values, layer.num_frozen, layer.atom_task)
    state = frozen.state_dict()
    assert set(state) == {"frozen_keys", "frozen_values", "atom_task"}
    fresh.load_state_dict(state)
    assert fresh.num_trainable == 0 and torch.equal(fresh.keys, layer.keys)


def test_it_reads_the_layers_state_dict_keys():
    layer, _ = grown()
    state = {k: v for k, v in layer.state_dict().items() if not k.startswith("base.")}
    assert set(state) == {"atom_keys", "atom_values", "num_frozen", "atom_task"}
    bank = MoRAMAtoms(6, 5, torch.empty(0, dtype=torch.float64), **OPTIONS)
    bank.load_state_dict(state)
    assert torch.equal(bank.keys, layer.keys) and torch.equal(bank.values, layer.values)
    assert (bank.num_frozen, bank.num_trainable) == (layer.num_frozen, layer.num_trainable)


def test_bad_or_partial_states_are_reported():
    _, bank = grown()
    state = bank.state_dict()
    fresh = MoRAMAtoms(6, 5, torch.empty(0, dtype=torch.float64), **OPTIONS)
    result = fresh.load_state_dict({}, strict=False)  # nothing of the bank: every key it holds is missing
    assert result.missing_keys == ["frozen_keys", "frozen_values", "atom_task"]
    with pytest.raises(RuntimeError, match=r"new_keys must be \[rows, in_features=6\], got \(3, 7\)"):
        fresh.load_state_dict({**state, "new_keys": torch.zeros(3, 7, dtype=torch.float64)})
    with pytest.raises(RuntimeError, match="Unexpected key.*router"):
        fresh.load_state_dict({**state, "router": torch.zeros(1)})


@pytest.mark.parametrize("kind", ["bank", "layer"])
def test_loading_with_assign_fills_a_bank_made_on_the_meta_device(kind):
    layer, bank = grown()
    source = bank if kind == "bank" else layer
    state = source.state_dict()
    x = torch.randn(4, 6, dtype=torch.float64)
    with torch.device("meta"):
        empty = (MoRAMAtoms(6, 5, torch.empty(0, dtype=torch.float64), **OPTIONS) if kind == "bank"
                 else MoRAMLinear(nn.Linear(6, 5).double(), **OPTIONS))
        empty.expand()
        empty.expand()  # the same split as the state: without assign this would copy into meta tensors
    empty.new_keys.requires_grad_(False)
    empty.load_state_dict(state, assign=True)
    assert not any(t.is_meta for t in empty.state_dict().values())
    assert torch.equal(empty.keys, source.keys) and torch.equal(empty.values, source.values)
    assert not empty.new_keys.requires_grad  # as torch's assign: requires_grad of what it replaces
    assert torch.equal(empty.eval()(x), source.eval()(x))


def test_values_drawn_like_the_keys_and_pickling():
    bank = MoRAMAtoms(6, 5, torch.empty(0), **OPTIONS)
    bank.expand()
    assert bank.new_values.abs().sum() == 0  # the paper: a new task starts from the same outputs
    bank.values_init = "kaiming"  # peft's init_weights=False
    bank.expand()
    assert bank.new_values.abs().sum() > 0 and bank.num_frozen == 3
    twin = pickle.loads(pickle.dumps(bank))
    x = torch.randn(3, 6)
    assert torch.equal(twin(x), bank(x)) and twin.values_init == "kaiming"
    assert "atoms=3/6" in repr(bank)


def test_the_bank_s_size_is_read_where_nn_module_finds_its_rows():
    """``num_atoms`` reads the rows from the module's dictionaries (no ``__getattr__``), in ``nn.Module``'s
    order: the instance's own dictionary first (FSDP's unsharded views), a class's own property
    (a parametrization) before both."""
    layer, _ = grown(expansions=3)  # 6 frozen, 3 trainable
    assert (layer.num_frozen, layer.num_trainable, layer.num_atoms) == (6, 3, 9)
    new_keys = layer._parameters.pop("new_keys")  # as FSDP deregisters a parameter and sets a plain tensor
    layer.__dict__["new_keys"] = new_keys.detach()[:2]
    assert (layer.num_trainable, layer.num_atoms) == (2, 8) and layer.new_keys.shape[0] == 2

    shaded = MoRAMAtoms(6, 5, torch.empty(0), **OPTIONS)
    shaded.expand()  # 0 frozen, 3 trainable
    # a class of its own with a property of a row's name, as torch.nn.utils.parametrize swaps it in
    shaded.__class__ = type("Parametrized", (MoRAMAtoms,), {"frozen_keys": property(lambda self: torch.zeros(4, 6))})
    assert (shaded.num_frozen, shaded.num_atoms) == (4, 7)
