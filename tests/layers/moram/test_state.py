"""MoRAMLinear state: activation statistics, pruning, load_atoms, state dicts and copies."""

import copy
import io
import pickle

import pytest
import torch
from torch import nn

from moram_avalanche.layers.moram.bank import live_rows
from moram_avalanche.layers.moram.layer import MoRAMLinear
from moram_avalanche.layers.moram.naive import naive_mixture, naive_moram


def grown_layer(d_in=6, d_out=5, per_task=4, expansions=2, topk=3, seed=0):
    torch.manual_seed(seed)
    layer = MoRAMLinear(nn.Linear(d_in, d_out).double(), atoms_per_task=per_task, topk=topk,
                        temperature=0.1, threshold=0.1)
    for _ in range(expansions):
        layer.expand()
        with torch.no_grad():
            layer.new_values.normal_()
    return layer


@pytest.mark.parametrize("training", [True, False])
def test_recorded_mass_and_hits_equal_the_reference_mixture(training):
    layer = grown_layer().train(training)
    batches = [torch.randn(7, 6, dtype=torch.float64) for _ in range(3)]
    layer(batches[0])  # not recorded
    layer.start_recording()
    for x in batches:
        layer(x)
    layer.stop_recording()
    layer(batches[0])  # not recorded
    mix = torch.cat([
        naive_mixture(x @ layer.keys.t(), topk=layer.topk, temperature=layer.temperature,
                      threshold=layer.threshold, training=training)
        for x in batches
    ])
    torch.testing.assert_close(layer.atom_mass.double(), mix.sum(0), rtol=1e-5, atol=1e-6)
    assert layer.atom_hits.tolist() == (mix > 0).sum(0).tolist()
    layer.reset_stats()
    assert layer.atom_mass.sum() == 0 and layer.atom_hits.sum() == 0


def test_recording_is_off_by_default():
    layer = grown_layer()
    layer(torch.randn(4, 6, dtype=torch.float64))
    assert not layer.recording and layer.atom_mass.sum() == 0


def frozen_layer_with_mass(mass):
    """A frozen bank of two tasks (4 atoms each) whose newest task has the given mass."""
    layer = grown_layer(per_task=4, expansions=2)
    layer.freeze()
    layer.atom_mass = torch.tensor([9.0, 9.0, 9.0, 9.0] + mass)
    return layer


def test_prune_keeps_the_smallest_set_covering_the_mass():
    layer = frozen_layer_with_mass([5.0, 1.0, 3.0, 1.0])
    keys, values = layer.keys.clone(), layer.values.clone()
    # total 10; sorted 5, 3 (cumulative 8 >= 0.8 * 10): keep atoms 4 and 6, drop 5 and 7
    dropped = layer.prune(keep_mass=0.8)
    assert dropped.tolist() == [5, 7]
    assert layer.num_atoms == 6 and layer.num_frozen == 6
    kept = [0, 1, 2, 3, 4, 6]
    assert torch.equal(layer.keys, keys[kept])
    assert torch.equal(layer.values, values[:, kept])
    assert layer.atom_task.tolist() == [0, 0, 0, 0, 1, 1]
    assert layer.atom_mass.tolist() == [9.0, 9.0, 9.0, 9.0, 5.0, 3.0]


def test_prune_with_full_mass_drops_only_unused_atoms():
    layer = frozen_layer_with_mass([2.0, 0.0, 3.0, 1.0])
    assert layer.prune(keep_mass=1.0).tolist() == [5]


def test_prune_over_the_whole_bank():
    layer = frozen_layer_with_mass([1.0, 1.0, 1.0, 1.0])
    layer.atom_mass = torch.tensor([10.0, 0.0, 0.0, 0.0, 10.0, 0.0, 0.0, 0.0])
    assert layer.prune(keep_mass=0.99, newest_only=False).tolist() == [1, 2, 3, 5, 6, 7]
    assert layer.atom_task.tolist() == [0, 1]


def test_prune_refuses_trainable_atoms_and_missing_statistics():
    layer = grown_layer()
    with pytest.raises(RuntimeError, match="freeze"):
        layer.prune()
    layer.freeze()
    with pytest.raises(RuntimeError, match="start_recording"):
        layer.prune()
    with pytest.raises(ValueError, match="keep_mass"):
        layer.prune(keep_mass=0.0)


def test_prune_after_recording_removes_atoms_that_never_fire():
    layer = grown_layer(d_in=4, per_task=4, expansions=1, topk=2)
    with torch.no_grad():  # atom 3's key opposes every input used below: never in the top-2
        layer.new_keys.copy_(torch.tensor([[1.0, 0, 0, 0], [0, 1.0, 0, 0], [1.0, 1.0, 0, 0],
                                           [-1.0, -1.0, 0, 0]], dtype=torch.float64))
    layer.freeze()
    layer.start_recording()
    layer(torch.rand(50, 4, dtype=torch.float64) + 0.1)
    assert layer.atom_hits[3] == 0
    assert 3 in layer.prune(keep_mass=1.0).tolist()


def test_load_atoms_round_trip_and_state_dict_into_a_fresh_layer():
    layer = grown_layer(expansions=3)
    x = torch.randn(5, 6, dtype=torch.float64)
    expected = layer.eval()(x)
    state = layer.state_dict()
    assert set(state) == {"base.weight", "base.bias", "atom_keys", "atom_values", "num_frozen",
                          "atom_task"}
    fresh = MoRAMLinear(nn.Linear(6, 5).double(), atoms_per_task=4, topk=3, temperature=0.1,
                        threshold=0.1)
    fresh.load_state_dict(state)
    assert (fresh.num_atoms, fresh.num_frozen) == (12, 8)
    assert fresh.atom_task.tolist() == layer.atom_task.tolist()
    assert torch.equal(fresh.eval()(x), expected)
    assert {n for n, p in fresh.named_parameters() if p.requires_grad} == {"new_keys", "new_values"}

    other = MoRAMLinear(nn.Linear(6, 5).double(), atoms_per_task=4)
    other.load_atoms(layer.keys, layer.values, num_frozen=layer.num_frozen)
    assert torch.equal(other.keys, layer.keys) and torch.equal(other.values, layer.values)


def test_load_atoms_with_the_same_shape_updates_parameters_in_place():
    layer = grown_layer()
    new_keys = layer.new_keys
    keys = torch.randn_like(layer.keys)
    layer.load_atoms(keys, layer.values, num_frozen=layer.num_frozen)
    assert layer.new_keys is new_keys  # an optimizer holding it stays valid
    assert torch.equal(layer.new_keys.detach(), keys[layer.num_frozen:])
    assert torch.equal(layer.keys, keys)


def test_load_state_dict_reports_missing_and_bad_atoms():
    layer = grown_layer()
    state = layer.state_dict()
    del state["atom_keys"]
    result = layer.load_state_dict(state, strict=False)
    assert "atom_keys" in result.missing_keys
    bad = grown_layer().state_dict()
    bad["atom_values"] = bad["atom_values"][:, :3]
    with pytest.raises(RuntimeError, match="values must be"):
        grown_layer().load_state_dict(bad)
    extra = grown_layer().state_dict()
    extra["surprise"] = torch.zeros(1)
    with pytest.raises(RuntimeError, match="surprise"):
        grown_layer().load_state_dict(extra)


def test_load_atoms_validates_shapes():
    layer = grown_layer()
    with pytest.raises(ValueError, match="keys must be"):
        layer.load_atoms(torch.zeros(3, 7), torch.zeros(5, 3), 0)
    with pytest.raises(ValueError, match="num_frozen"):
        layer.load_atoms(torch.zeros(3, 6), torch.zeros(5, 3), 4)
    with pytest.raises(ValueError, match="atom_task"):
        layer.load_atoms(torch.zeros(3, 6), torch.zeros(5, 3), 0, atom_task=torch.tensor([1, 0, 0]))


# ---------------------------------------------------------------- checkpoints of 0.2.0
def state_0_2_0(keys, values, num_frozen, atom_task, base):
    """A MoRAMLinear state dict as 0.2.0 wrote it: the bank in two tensors, values transposed."""
    return {"base.weight": base.weight.detach().clone(), "base.bias": base.bias.detach().clone(),
            "atom_keys": keys, "atom_values": values.t().contiguous(),  # [d_out, R]
            "num_frozen": torch.tensor(num_frozen), "atom_task": atom_task}


def test_a_0_2_0_checkpoint_loads_into_the_plain_bank():
    torch.manual_seed(0)
    base = nn.Linear(6, 5).double()
    keys = torch.randn(10, 6, dtype=torch.float64)  # [R, d_in]
    values = torch.randn(10, 5, dtype=torch.float64)  # one row per atom: B_i
    atom_task = torch.tensor([0, 0, 0, 0, 1, 1, 1, 2, 2, 2])
    state = state_0_2_0(keys, values, 7, atom_task, base)
    layer = MoRAMLinear(nn.Linear(6, 5).double(), atoms_per_task=3, topk=3, temperature=0.1, threshold=0.1)
    layer.load_state_dict(state)
    assert (layer.num_atoms, layer.num_frozen, layer.num_trainable) == (10, 7, 3)
    assert torch.equal(layer.frozen_keys, keys[:7]) and torch.equal(layer.new_keys.detach(), keys[7:])
    assert torch.equal(layer.frozen_values, values[:7]) and torch.equal(layer.new_values.detach(), values[7:])
    assert torch.equal(layer.keys, keys) and torch.equal(layer.values, values.t())
    assert layer.atom_task.tolist() == atom_task.tolist()
    assert isinstance(layer.new_keys, nn.Parameter) and layer.new_keys.requires_grad
    # it computes what the naive reference computes on that bank, and saves what it loaded
    x = torch.randn(4, 6, dtype=torch.float64)
    for training in (True, False):
        expected = naive_moram(x, base.weight, base.bias, [keys], [values.t()], topk=3, temperature=0.1,
                               threshold=0.1, training=training)
        torch.testing.assert_close(layer.train(training)(x), expected, rtol=1e-12, atol=1e-12)
    saved = layer.state_dict()
    assert set(saved) == set(state)
    for key, value in state.items():
        assert torch.equal(saved[key], value), key
    assert saved["atom_values"].shape == (5, 10) and saved["num_frozen"].dtype == torch.long


def test_a_0_2_0_router_checkpoint_loads_into_the_ablation_layer():
    from moram_avalanche.layers.moram.variants import MoRAMAblationLinear

    torch.manual_seed(1)
    base = nn.Linear(4, 3)
    keys, values, router = torch.randn(6, 4), torch.randn(6, 3), torch.randn(6, 4)
    state = state_0_2_0(keys, values, 6, torch.tensor([0, 0, 1, 1, 2, 2]), base)
    state["router_weight"] = router  # [R, d_in]
    layer = MoRAMAblationLinear(nn.Linear(4, 3), atoms_per_task=2, router=True)
    layer.load_state_dict(state)
    assert layer.num_frozen == 6 and layer.new_router is None
    assert torch.equal(layer.router_weight, router) and torch.equal(layer.frozen_router, router)
    assert torch.equal(layer.state_dict()["router_weight"], router)


def trained_layer_and_its_ema(steps=3, decay=0.75):
    """A layer trained ``steps`` SGD steps and an EMA copy of it (deep-copied before training)
    updated after each step through ``state_dict().values()`` as timm's ``ModelEmaV2`` does, with
    the EMA of its rows computed by hand from clones beside it."""
    layer = grown_layer()
    ema = copy.deepcopy(layer)
    expected_keys, expected_values = layer.keys.clone(), layer.values.clone()
    optimizer = torch.optim.SGD([layer.new_keys, layer.new_values], lr=0.05)
    for _ in range(steps):
        layer(torch.randn(7, 6, dtype=torch.float64)).square().mean().backward()
        optimizer.step()
        optimizer.zero_grad()
        with torch.no_grad():
            for ema_value, value in zip(ema.state_dict().values(), layer.state_dict().values()):
                if ema_value.is_floating_point():
                    ema_value.mul_(decay).add_(value, alpha=1 - decay)
        expected_keys = decay * expected_keys + (1 - decay) * layer.keys.clone()
        expected_values = decay * expected_values + (1 - decay) * layer.values.clone()
    return layer, ema, expected_keys, expected_values


def test_an_ema_through_state_dict_values_averages_the_trainable_atoms():
    """``state_dict()`` shares the rows' storage, as torch's shares each parameter's, so an EMA model
    updated by copying into its state dict's tensors moves its trainable atoms (they were joined copies,
    and the EMA's atoms stayed as the copy found them)."""
    layer, ema, expected_keys, expected_values = trained_layer_and_its_ema()
    num_frozen = layer.num_frozen
    assert not torch.equal(layer.keys[num_frozen:], expected_keys[num_frozen:])  # (training moved them)
    torch.testing.assert_close(ema.keys, expected_keys, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(ema.values, expected_values, rtol=1e-12, atol=1e-12)
    x = torch.randn(5, 6, dtype=torch.float64)
    reference = naive_moram(x, ema.base.weight, ema.base.bias, [expected_keys], [expected_values], topk=3,
                            temperature=0.1, threshold=0.1, training=False)
    torch.testing.assert_close(ema.eval()(x), reference, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("trainable", [True, False])
def test_a_saved_state_dict_writes_each_row_once(trainable):
    """The state dict's rows are all of their storage: ``torch.save`` writes no row twice."""
    layer = grown_layer()
    if not trainable:
        layer.freeze()
    buffer = io.BytesIO()
    torch.save(layer.state_dict(), buffer)
    buffer.seek(0)
    state = torch.load(buffer)
    for name in ("atom_keys", "atom_values"):
        assert state[name].untyped_storage().nbytes() == state[name].numel() * state[name].element_size()
    assert torch.equal(state["atom_keys"], layer.keys) and torch.equal(state["atom_values"], layer.values)


@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
def test_a_copied_training_bank_keeps_its_rows_in_one_buffer(how):
    """A copy keeps each view's storage but not that it is a view: ``__setstate__`` shares the rows
    again, so the copy's forward reads them without joining and sees its optimizer's step."""
    layer = grown_layer()
    twin = copy.deepcopy(layer) if how == "deepcopy" else pickle.loads(pickle.dumps(layer))
    assert live_rows(twin.frozen_keys, twin.new_keys) is not None
    assert live_rows(twin.frozen_values, twin.new_values) is not None
    x = torch.randn(5, 6, dtype=torch.float64)
    assert torch.equal(twin.eval()(x), layer.eval()(x))
    with torch.no_grad():
        twin.new_values.add_(1.0)
    assert torch.equal(twin.values[:, layer.num_frozen:], layer.values[:, layer.num_frozen:] + 1)
    assert torch.equal(twin.state_dict()["atom_values"], twin.values)
    assert torch.equal(layer.values, grown_layer().values)  # (the original is its own)
