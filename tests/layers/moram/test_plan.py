"""A layer's eval call, decided once and repeated (``layers.moram.plan``; issue "GPU path II", item 7).

Two kinds of call are planned: one over the stacked base and keys (the base's copy kept: "kept") and
one that reads the base apart, cast at each call (the default: "apart"); most tests run on both.

The plan is only a shortcut past the checks: every test here holds a planned call to the long way
(the same call with the plan dropped) by ``torch.equal``, and to the float64 naive layer; and it
counts the planned calls, so that a change the plan missed (a stale output) and a plan that is
never used both fail. Each change of the layer or of the call that the long way would decide
differently on must take the long way once, then plan again where the new state allows it.
"""

import copy
import gc
import pickle
import weakref

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from moram_avalanche.layers.moram.layer import MoRAMAtoms, MoRAMLinear, keep_base_casts
from moram_avalanche.layers.moram.paths import triton as moram_triton
from moram_avalanche.layers.moram.paths import use_path
from moram_avalanche.layers.moram.plan import EvalPlan
from moram_avalanche.layers.moram.variants import MoRAMAblationLinear
from tiny_layers import grown, naive_of

GPU_PATHS = ["dense", pytest.param("triton", marks=pytest.mark.skipif(
    not moram_triton.usable(torch.empty(0)), reason="Triton's interpreter is off (TRITON_INTERPRET=1 not set early)"))]
KINDS = ["kept", "apart"]
#: (kind, path) pairs a plan is made on: a stacked call on the GPU paths (a CPU path has no stacked form)
KIND_PATHS = [("kept", "dense"), ("apart", "reference"), ("apart", "dense"),
              *[pytest.param(kind, "triton", marks=GPU_PATHS[1].marks) for kind in KINDS]]


@pytest.fixture
def planned(monkeypatch):
    """How many calls the plan served (a list, one entry a call)."""
    served = []
    read = EvalPlan.read

    def counted(plan, x):
        served.append(1)
        return read(plan, x)

    monkeypatch.setattr(EvalPlan, "read", counted)
    return served


def call(layer, x, amp=False):
    with torch.no_grad(), torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=amp):
        return layer(x)


def long_way(layer, x, amp=False):
    """The same call without the plan (which it makes again)."""
    layer._plan = None
    return call(layer, x, amp)


def layer_of(kind, frozen=True):
    """A grown layer in eval mode whose calls are stacked ("kept": the base's copy kept) or read the base apart."""
    layer = grown(tasks=3, frozen=frozen).eval()
    if kind == "kept":
        keep_base_casts(layer)
    return layer


def kept_layer(frozen=True):
    return layer_of("kept", frozen)


# ---------------------------------------------------------------- the plan serves repeats, exactly
@pytest.mark.parametrize("kind,path", KIND_PATHS)
@pytest.mark.parametrize("amp", [False, True])
@pytest.mark.parametrize("shape", [(2, 5, 24), (7, 24)])
def test_a_repeated_call_is_planned_and_equals_the_long_way(planned, kind, path, amp, shape):
    layer = layer_of(kind)
    x = torch.randn(*shape)
    with use_path(path):
        first = call(layer, x, amp)
        assert planned == [] and layer._plan is not None
        repeats = [call(layer, x, amp) for _ in range(3)]
        assert len(planned) == 3
        for out in repeats:
            assert torch.equal(out, first) and out.shape == (*shape[:-1], layer.out_features)
        assert torch.equal(long_way(layer, x, amp), first)
    torch.testing.assert_close(first.double(), naive_of(layer, x), rtol=3e-2 if amp else 1e-5,
                               atol=3e-2 if amp else 1e-5)


@pytest.mark.parametrize("kind", KINDS)
def test_no_plan_where_a_repeat_could_not_be_checked(planned, kind):
    x = torch.randn(3, 24)
    layer = layer_of(kind)
    with use_path("dense"):
        layer(x), layer(x)  # grad mode on: a backward may follow
        assert layer._plan is None
        layer.start_recording()  # the activation statistics read every call
        call(layer, x)
        once = layer.atom_hits.clone()
        call(layer, x)
        assert layer._plan is None and int(once.sum()) > 0 and torch.equal(layer.atom_hits, 2 * once)
        layer.stop_recording()
    empty = MoRAMLinear(nn.Linear(24, 20)).eval()  # no atoms: the base alone
    if kind == "kept":
        keep_base_casts(empty)
    with use_path("dense"):
        assert torch.equal(call(empty, x), call(empty, x)) and empty._plan is None
    ablation = MoRAMAblationLinear(nn.Linear(24, 20), atoms_per_task=6, topk=4, temperature=0.05, threshold=0.2,
                                   router="linear")
    ablation.expand()
    ablation.freeze()  # (a frozen bank: only its class's own decisions keep it from a plan)
    if kind == "kept":
        keep_base_casts(ablation)
    with use_path("dense"):
        call(ablation.eval(), x), call(ablation, x)
    assert ablation._plan is None and planned == []


def test_a_kept_base_on_a_path_without_a_stacked_form_is_not_planned(planned):
    """A CPU path reads the base's kept casts apart (``base_in``): neither kind of plan repeats that."""
    layer = kept_layer()
    x = torch.randn(3, 24)
    with use_path("reference"):
        first = [call(layer, x, amp=True), call(layer, x, amp=True)]
    assert layer._plan is None and planned == [] and torch.equal(first[0], first[1])
    assert layer._base_casts  # (the casts it read)


# ---------------------------------------------------------------- what the plan checks
def _scale(layer):
    layer.new_value_scale = 2.0


def _replace_base(layer):
    torch.manual_seed(3)
    layer.base = nn.Linear(24, 20)


def _load(layer):
    layer.load_state_dict(grown(tasks=3, seed=1).state_dict())


def _grow(layer):
    layer.expand()
    with torch.no_grad():
        layer.new_values.normal_(std=0.5)


def _train_a_task(layer):
    _grow(layer)
    layer.freeze()


def _resize_data(layer):  # the same storage, fewer rows: neither its version nor its data pointer moves
    layer.frozen_keys.data, layer.frozen_values.data = layer.frozen_keys.data[:3], layer.frozen_values.data[:3]


def _set_trainable_rows(layer):  # trainable rows set on a frozen bank, its frozen rows untouched
    torch.manual_seed(5)
    layer.new_keys = nn.Parameter(torch.randn(2, layer.in_features))
    layer.new_values = nn.Parameter(torch.randn(2, layer.out_features))


def _shadow(layer):  # a row in the instance's own dictionary, where nn.Module finds it first
    layer.__dict__["frozen_values"] = layer.frozen_values * -1


def _swap_frozen_keys(layer):  # .data swapped: a new storage, the same tensor object and version
    layer.frozen_keys.data = layer.frozen_keys.data * -1


CHANGES = {  # name: (change, whether the changed layer's calls are planned again)
    "base weight edited in place": (lambda layer: layer.base.weight.add_(0.5), True),
    "base bias's storage swapped": (lambda layer: setattr(layer.base.bias, "data", layer.base.bias.data + 1), True),
    "base weight replaced": (lambda layer: setattr(layer.base, "weight", nn.Parameter(layer.base.weight * -1)), True),
    # (its values rounded to bf16 and its dtype bf16: the cast a call apart makes is decided anew)
    "base weight's .data in another dtype": (
        lambda layer: setattr(layer.base.weight, "data", layer.base.weight.data.to(torch.bfloat16)), True),
    "base replaced": (_replace_base, True),
    "frozen keys edited in place": (lambda layer: layer.frozen_keys.mul_(-1), True),
    "frozen values replaced": (lambda layer: setattr(layer, "frozen_values", layer.frozen_values * 2), True),
    "frozen keys' storage swapped": (_swap_frozen_keys, True),
    "a new task (trainable rows: read apart)": (_grow, False),
    "a task trained and frozen": (_train_a_task, True),
    "trainable rows set on a frozen bank": (_set_trainable_rows, False),
    "the bank resized through .data": (_resize_data, True),
    "a row shadowed in the instance's dictionary": (_shadow, False),
    "loaded": (_load, True),
    "moved to float64": (lambda layer: layer.double(), True),
    "training mode (no gate)": (lambda layer: layer.train(), True),
    "threshold": (lambda layer: setattr(layer, "threshold", 0.5), True),
    "topk": (lambda layer: setattr(layer, "topk", 2), True),
    "temperature": (lambda layer: setattr(layer, "temperature", 1.0), True),
    "the values' scale": (_scale, True),
    "the base's copy kept or no longer kept": (lambda layer: keep_base_casts(layer, not layer.keep_base_cast), True),
    "the flag set on the layer itself": (lambda layer: setattr(layer, "keep_base_cast", not layer.keep_base_cast), True),
    "recording": (lambda layer: layer.start_recording(), False),
}


#: changes of the base's values, its shape and dtype kept: a call reading the base apart reads it at
#: each call (nothing kept of it), so its plan still applies and serves the changed call; a stacked
#: call's copy was made from the base, so its plan goes the long way
READ_AT_EACH_CALL = {"base weight edited in place", "base bias's storage swapped"}


@pytest.mark.parametrize("amp", [False, True])
@pytest.mark.parametrize("kind,path", KIND_PATHS)
@pytest.mark.parametrize("name", list(CHANGES))
def test_a_change_the_long_way_would_see_is_seen(planned, kind, path, name, amp):
    """On each path a plan is made on, under bf16 autocast too (the calls read the bank's kept bf16
    copy and cast the base). Where the plan reads what changed at each call (a base read apart:
    :data:`READ_AT_EACH_CALL`), it serves the changed call, which equals the long way's."""
    change, again = CHANGES[name]
    live = kind == "apart" and name in READ_AT_EACH_CALL
    layer = layer_of(kind)
    x = torch.randn(2, 5, 24)
    with use_path(path):
        before = [call(layer, x, amp), call(layer, x, amp)]
        assert len(planned) == 1
        with torch.no_grad():
            change(layer)
        after = call(layer, x, amp)
        assert len(planned) == (2 if live else 1)  # the long way, or the plan reading the base at the call
        assert torch.equal(after, call(copy.deepcopy(layer), x, amp))  # (a copy keeps no plan and no copies)
        if not amp:  # (bf16's rounding may tie the top-k otherwise than float64: the copy above is exact)
            torch.testing.assert_close(after.double(), naive_of(layer, x), rtol=1e-5, atol=1e-5)
        rounded_alike = amp and name == "base weight's .data in another dtype"  # (autocast rounds it so too)
        if name not in ("the values' scale", "the base's copy kept or no longer kept", "the flag set on the layer itself",
                        "recording", "moved to float64") and not rounded_alike:
            assert not torch.equal(after, before[0])  # (the change shows: a stale repeat would have failed)
        repeat = call(layer, x, amp)
        again = again and not (path == "reference" and layer.keep_base_cast)  # (a CPU path: no stacked form)
        assert len(planned) == (3 if live else 2 if again else 1)
        assert torch.equal(repeat, after)


@pytest.mark.parametrize("kind,path", KIND_PATHS)
@pytest.mark.parametrize("amp", [False, True])
def test_a_weight_s_data_swapped_for_its_transpose_is_seen(planned, kind, path, amp):
    """A square base weight's ``.data`` swapped for its transpose keeps the pointer, shape, dtype and
    version: only its strides tell. A stacked call's plan checks them (the call goes the long way
    once, then is planned again), and so does its kept copy, which is built again (0.7.7's stamps
    held no strides: the kept copy served the old layout). A call apart reads the base at each call:
    its plan serves the swapped weight."""
    layer = grown(d_in=24, d_out=24, tasks=3).eval()
    keep_base_casts(layer, kind == "kept")
    x = torch.randn(2, 5, 24)
    with use_path(path):
        call(layer, x, amp), call(layer, x, amp)
        assert len(planned) == 1
        with torch.no_grad():
            layer.base.weight.data = layer.base.weight.data.t()
        swapped = call(layer, x, amp)
        apart = kind == "apart"
        assert len(planned) == (2 if apart else 1)  # (the plan apart; the long way, which plans again)
        repeat = call(layer, x, amp)
        assert len(planned) == (3 if apart else 2)
        fresh = copy.deepcopy(layer)
        assert torch.equal(swapped, call(fresh, x, amp)) and torch.equal(repeat, swapped)
        if not amp:
            torch.testing.assert_close(repeat.double(), naive_of(layer, x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind,path", KIND_PATHS)
def test_autocast_s_dtype_is_checked(planned, kind, path):
    """bf16 then float16 autocast: each its own compute dtype, planned in turn."""
    layer = layer_of(kind)
    x = torch.randn(2, 5, 24)
    outs = {}
    with use_path(path), torch.no_grad():
        for dtype in (torch.bfloat16, torch.float16, torch.bfloat16):
            with torch.autocast("cpu", dtype=dtype):
                outs[dtype] = [layer(x), layer(x)]
    assert len(planned) == 3 and outs[torch.float16][0].dtype == torch.float16
    for dtype, (first, again) in outs.items():
        with torch.no_grad(), use_path(path), torch.autocast("cpu", dtype=dtype):
            assert torch.equal(first, again) and torch.equal(first, copy.deepcopy(layer)(x))


class OwnForward(nn.Linear):
    """A base with a forward of its own (as a quantised layer has): run as it is, the atoms added."""

    def forward(self, x):
        return F.linear(x, self.weight, self.bias)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("amp", [False, True])
def test_a_base_with_its_own_forward_plans_the_atoms_alone(planned, kind, amp):
    """``MoRAMLinear.fuse_base`` off: ``base(x) + read(x)``, the read planned without a base (apart,
    whatever the base's copy), and the base read live at each call."""
    torch.manual_seed(0)
    layer = layer_of(kind)
    own = OwnForward(24, 20)
    own.load_state_dict(layer.base.state_dict())
    layer.base, layer.fuse_base = own, False
    x = torch.randn(2, 5, 24)
    tolerance = 3e-2 if amp else 1e-5
    with use_path("dense"):
        first = [call(layer, x, amp) for _ in range(3)]
        assert len(planned) == 2 and layer._plan.weight is None
        assert all(torch.equal(out, first[0]) for out in first) and torch.equal(long_way(layer, x, amp), first[0])
        torch.testing.assert_close(first[0].double(), naive_of(layer, x), rtol=tolerance, atol=tolerance)
        with torch.no_grad():
            layer.base.weight.add_(0.5)
        after = call(layer, x, amp)
        assert len(planned) == 3 and not torch.equal(after, first[0])  # (the plan holds: the base is read live)
        torch.testing.assert_close(after.double(), naive_of(layer, x), rtol=tolerance, atol=tolerance)
        layer.keep_base_cast = not layer.keep_base_cast  # (the read reads no base: its plan holds either way)
        assert torch.equal(call(layer, x, amp), after) and len(planned) == 4


@pytest.mark.parametrize("kind", KINDS)
def test_a_bank_with_trainable_rows_is_never_planned(planned, kind):
    """Its rows are never stacked nor planned (an update its versions miss would go unseen): every call the long way."""
    layer = layer_of(kind, frozen=False)
    x = torch.randn(2, 5, 24)
    with use_path("dense"):
        before = [call(layer, x), call(layer, x)]
        layer.new_values.data.add_(0.3)  # an update through .data, as DeepSpeed's optimizers make it
        after = call(layer, x)
    assert planned == [] and layer._plan is None and not layer._stacked and torch.equal(before[0], before[1])
    assert not torch.equal(after, before[0])
    torch.testing.assert_close(after.double(), naive_of(layer, x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", KINDS)
def test_an_option_set_to_an_equal_value_of_another_type_goes_the_long_way(planned, kind):
    layer = layer_of(kind)
    x = torch.randn(3, 24)
    with use_path("dense"):
        call(layer, x), call(layer, x)
        layer.topk = 4.0  # equal to 4, but the long way's top-k takes an int: it says so
        with pytest.raises(TypeError):
            call(layer, x)
    assert len(planned) == 1


@pytest.mark.parametrize("kind", KINDS)
def test_a_class_with_its_own_decisions_is_never_planned(planned, kind):
    from moram_avalanche.layers.moram.layer import MoRAMLinear, plannable

    class ScheduledK(MoRAMLinear):  # k from a schedule: a decision the plan would not re-ask
        k_now = 4

        def routing_now(self, num_atoms):
            return min(self.k_now, num_atoms), super().routing_now(num_atoms)[1]

    torch.manual_seed(0)
    layer = ScheduledK(nn.Linear(24, 20), atoms_per_task=6, topk=4, temperature=0.05, threshold=0.2)
    for _ in range(3):
        _grow(layer)
    layer.freeze()
    keep_base_casts(layer.eval(), kind == "kept")
    x = torch.randn(2, 5, 24)
    with use_path("dense"):
        first = [call(layer, x), call(layer, x)]
        layer.k_now = 2
        second = call(layer, x)
    assert planned == [] and layer._plan is None and torch.equal(first[0], first[1])
    assert not torch.equal(second, first[0])
    assert not plannable(ScheduledK) and plannable(MoRAMLinear) and plannable(MoRAMAtoms)


@pytest.mark.parametrize("kind", KINDS)
def test_the_call_s_own_context_is_checked(planned, kind):
    layer = layer_of(kind)
    x = torch.randn(2, 5, 24)
    with use_path("dense"):
        fp32 = [call(layer, x), call(layer, x)]
        bf16 = call(layer, x, amp=True)  # autocast on: another compute dtype
        assert len(planned) == 1 and bf16.dtype == torch.bfloat16
        assert torch.equal(call(layer, x, amp=True), bf16) and len(planned) == 2
        wide = call(layer, x.double())  # another input dtype
        assert len(planned) == 2 and wide.dtype == torch.float64
        assert torch.equal(call(layer, x), fp32[0]) and len(planned) == 2
        with torch.enable_grad():  # a backward may follow: the base read apart
            layer(x)
        assert len(planned) == 2
    with use_path("reference"):  # another path (no stacked form: the base read apart, its kept copy not planned)
        torch.testing.assert_close(call(layer, x), fp32[0], rtol=1e-5, atol=1e-5)
        assert len(planned) == 2 and (layer._plan is None) is (kind == "kept")


@pytest.mark.parametrize("kind", KINDS)
def test_bad_input_still_gets_its_clear_error(planned, kind):
    layer = layer_of(kind)
    with use_path("dense"):
        call(layer, torch.randn(3, 24)), call(layer, torch.randn(3, 24))
        with pytest.raises(ValueError, match="in_features=24"):
            call(layer, torch.randn(3, 23))
        with pytest.raises(ValueError, match="in_features=24"):
            call(layer, torch.tensor(1.0))
        with pytest.raises(TypeError, match="floating-point"):
            call(layer, torch.ones(3, 24, dtype=torch.long))
    assert len(planned) == 1


# ---------------------------------------------------------------- copies, banks without a base, compile
def test_a_move_lets_the_kept_copies_go():
    """``.to()`` and kin drop the stacked copy and the plan at once (after ``model.cpu()``, no copy on the GPU)."""
    layer = kept_layer()
    x = torch.randn(3, 24)
    with use_path("dense"):
        call(layer, x), call(layer, x)
        kept = weakref.ref(layer._stacked[torch.float32][3].weight_keys_t)  # the group's one copy
        layer.double()
        gc.collect()
        assert kept() is None and layer._plan is None and not layer._stacked and not layer._cast_rows
        torch.testing.assert_close(call(layer, x.double()), naive_of(layer, x), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("kind", KINDS)
def test_a_layer_made_in_inference_mode_runs_and_plans(kind):
    """Inference tensors keep no version counter: the checks read none of theirs."""
    x = torch.randn(2, 5, 24)
    with torch.inference_mode():
        layer = layer_of(kind)
        assert layer.base.weight.is_inference()
        with use_path("dense"):
            first = [layer(x), layer(x)]
        planned = layer._plan is not None
        with use_path("reference"):
            apart = layer(x)
    assert planned and torch.equal(first[0], first[1])  # (the second call was planned)
    torch.testing.assert_close(first[1].double(), naive_of(layer, x), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(apart, first[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", KINDS)
def test_copies_and_pickles_hold_no_plan(kind):
    layer = layer_of(kind)
    x = torch.randn(3, 24)
    with use_path("dense"):
        call(layer, x), call(layer, x)
        assert layer._plan is not None
        twin, loaded = copy.deepcopy(layer), pickle.loads(pickle.dumps(layer))
        assert twin._plan is None and loaded._plan is None and layer._plan is not None
        assert torch.equal(call(twin, x), call(layer, x)) and torch.equal(call(loaded, x), call(layer, x))


@pytest.mark.parametrize("kind", KINDS)
def test_a_base_weight_without_storage_is_read_and_never_planned(planned, kind):
    """Under a ``torch.func`` transform the base's weight is a wrapper without storage (no data
    pointer to check a repeat against): each call reads it the long way, as a plain call would."""
    layer = layer_of(kind)
    x = torch.randn(5, 24)
    weights = torch.stack([layer.base.weight, -layer.base.weight, 2 * layer.base.weight])

    def with_weight(weight):
        return torch.func.functional_call(layer, {"base.weight": weight}, (x,))

    with use_path("dense"), torch.no_grad():
        call(layer, x)  # (a plan made over the real weight first)
        batched = torch.func.vmap(with_weight)(weights)
        assert layer._plan is None and planned == []  # (its check saw another weight; none made over a wrapper)
        one_by_one = [with_weight(weight) for weight in weights]
    with use_path("dense"), torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        torch.func.vmap(with_weight)(weights)  # (the base cast: kept where asked, never a wrapper's)
    assert not any(entry[0] is not layer.base.weight for entry in layer._base_casts.values())
    for out, expected in zip(batched, one_by_one):
        torch.testing.assert_close(out, expected, rtol=1e-6, atol=1e-6)
    assert not torch.equal(batched[0], batched[1])


def frozen_atoms():
    """A bank without a base (MoRAMAtoms, the peft layer's), three tasks, frozen, in eval mode."""
    bank = MoRAMAtoms(24, 20, torch.empty(0), atoms_per_task=6, topk=4, temperature=0.05, threshold=0.2)
    for _ in range(3):
        bank.expand()
        with torch.no_grad():
            bank.new_values.normal_(std=0.5)
    bank.freeze()
    return bank.eval()


@pytest.mark.parametrize("kind", KINDS)
def test_a_bank_read_with_a_host_s_base_is_planned_for_that_base(planned, kind):
    """The peft layer's call: ``bank.read(x, weight, bias)`` with its base layer's tensors."""
    torch.manual_seed(0)
    base = nn.Linear(24, 20)
    bank = frozen_atoms()
    keep_base_casts(bank, kind == "kept")
    x = torch.randn(2, 5, 24)
    with use_path("dense"), torch.no_grad():
        first = bank.read(x, base.weight, base.bias)
        assert torch.equal(bank.read(x, base.weight, base.bias), first) and len(planned) == 1
        other = nn.Linear(24, 20)
        changed = bank.read(x, other.weight, other.bias)  # another base: the long way
        assert len(planned) == 1
        torch.testing.assert_close(changed - other(x), first - base(x), rtol=1e-5, atol=1e-5)  # the same atoms' term


@pytest.mark.parametrize("path", ["reference", *GPU_PATHS])
@pytest.mark.parametrize("amp", [False, True])
def test_a_bank_read_without_a_base_is_planned_apart(planned, read_outs, path, amp):
    """The atoms' term alone (what the peft layer adds to a base it does not fuse): on the Triton
    path the bound read-out without a base."""
    from moram_avalanche.layers.moram.naive import naive_moram

    torch.manual_seed(0)
    bank = frozen_atoms()
    x = torch.randn(2, 5, 24)
    with use_path(path), torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
        first = bank.read(x)
        again = [bank.read(x) for _ in range(2)]
        bank._plan = None
        long = bank.read(x)
    assert len(planned) == 2 and all(torch.equal(out, first) for out in [*again, long])
    assert read_outs == ([10, 10] if path == "triton" else [])
    expected = naive_moram(x.reshape(-1, 24).double(), torch.zeros(20, 24, dtype=torch.float64), None,
                           [bank.keys.double()], [bank.values.double()], topk=4, temperature=0.05, threshold=0.2,
                           training=False)
    torch.testing.assert_close(first.reshape(-1, 20).double(), expected, rtol=3e-2 if amp else 1e-5,
                               atol=3e-2 if amp else 1e-5)


@pytest.mark.parametrize("kind", KINDS)
def test_torch_compile_reads_no_plan(planned, kind):
    layer = layer_of(kind)
    x = torch.randn(2, 5, 24)
    with use_path("dense"):
        eager = [call(layer, x), call(layer, x)]
        plan = layer._plan
        compiled = torch.compile(layer, backend="eager", fullgraph=True)
        with torch.no_grad():
            out = compiled(x)
        assert torch.equal(out, eager[0]) and len(planned) == 1 and layer._plan is plan


# ---------------------------------------------------------------- what a repeat runs (paths.dense.StackedRepeat)
@pytest.fixture
def read_outs(monkeypatch):
    """The row counts the bound read-out (paths.triton.ReadOut) served, a call each."""
    served = []
    apart, joined = moram_triton.ReadOut.__call__, moram_triton.ReadOut.joined

    def counted(read_out, proj, base_out=None, shape=None):
        served.append(proj.shape[0])
        return apart(read_out, proj, base_out, shape)

    def counted_joined(read_out, full, shape=None):
        served.append(full.shape[0])
        return joined(read_out, full, shape)

    monkeypatch.setattr(moram_triton.ReadOut, "__call__", counted)
    monkeypatch.setattr(moram_triton.ReadOut, "joined", counted_joined)
    return served


@pytest.mark.skipif(not moram_triton.usable(torch.empty(0)), reason="Triton's interpreter is off")
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("amp", [False, True])
def test_a_repeat_reads_out_each_row_count_as_the_long_way_does(planned, read_outs, monkeypatch, kind, amp):
    """One plan, inputs of several row counts (its launch worked out per count), then more rows than
    the one-call read-out takes (the router's steps and ``addmm`` instead, as the long way)."""
    layer = layer_of(kind)
    torch.manual_seed(1)
    inputs = [torch.randn(3, 24), torch.randn(1, 24), torch.randn(2, 5, 24), torch.randn(3, 24)]
    with use_path("triton"):
        call(layer, inputs[0], amp)
        repeats = [call(layer, x, amp) for x in inputs]
        assert len(planned) == 4 and read_outs == [3, 1, 10, 3]
        assert sorted(layer._plan.steps.read_out.launchers) == [1, 3, 10]
        for x, out in zip(inputs, repeats):
            assert torch.equal(out, long_way(layer, x, amp))
        monkeypatch.setattr(moram_triton, "READ_OUT_ROWS", 2)
        many = call(layer, inputs[0], amp)  # (planned: the long way above planned again)
        assert len(planned) == 5 and read_outs == [3, 1, 10, 3]
        assert torch.equal(many, long_way(layer, inputs[0], amp))
        few = call(layer, inputs[1], amp)  # one row: the read-out again
        assert read_outs[-1] == 1 and torch.equal(few, long_way(layer, inputs[1], amp))
    torch.testing.assert_close(many.double(), naive_of(layer, inputs[0]), rtol=3e-2 if amp else 1e-5,
                               atol=3e-2 if amp else 1e-5)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("path", GPU_PATHS)
def test_a_plan_that_keeps_every_atom_repeats_the_router_and_addmm(planned, read_outs, kind, path):
    """``k = R`` (``topk=None``): no one-call read-out (it keeps ``k < R``); the repeat runs the path's
    steps as the long way does."""
    layer = layer_of(kind)
    layer.topk = None
    x = torch.randn(2, 5, 24)
    with use_path(path):
        first = call(layer, x)
        again = call(layer, x)
        assert len(planned) == 1 and read_outs == [] and layer._plan.steps.read_out is None
        assert torch.equal(again, first) and torch.equal(long_way(layer, x), first)
    torch.testing.assert_close(first.double(), naive_of(layer, x), rtol=1e-5, atol=1e-5)


def test_a_repeat_of_another_stacked_form_calls_it_as_it_is():
    """``stacked_repeat`` binds the read-out only for ``stacked_mixture`` with the Triton router; any
    other callable of the stacked form is called with the plan's arguments, nothing recorded."""
    from moram_avalanche.layers.moram.paths.dense import stacked_repeat
    from moram_avalanche.layers.moram.stacked import stack_base

    calls = []

    def form(tokens, stacked, k, temperature, threshold, recording):
        calls.append((tokens, stacked, k, temperature, threshold, recording))
        return tokens * 2, None, None

    stacked = stack_base(torch.randn(3, 4), None, torch.randn(6, 4), torch.randn(6, 3), torch.float32)
    x = torch.randn(3, 4)
    repeat = stacked_repeat(form, stacked, 5, 0.1, None)
    assert repeat.read_out is None and torch.equal(repeat(x), x * 2)
    assert calls == [(x, stacked, 5, 0.1, None, False)]


@pytest.mark.parametrize("kind,path", KIND_PATHS)
def test_a_float64_input_under_autocast_is_stacked_unplanned_or_cast_apart(planned, kind, path):
    """The long way casts the tokens to autocast's dtype; autocast itself never casts float64, so a
    stacked repeat relying on its GEMM's cast would multiply float64 by bf16: such a stacked call is
    never planned. A repeat of the call apart casts the tokens itself, as the long way does."""
    layer = layer_of(kind)
    x = torch.randn(2, 5, 24, dtype=torch.float64)
    with use_path(path):
        first = call(layer, x, amp=True)
        again = call(layer, x, amp=True)
    assert (layer._plan is None) is (kind == "kept") and len(planned) == (kind == "apart")
    assert first.dtype == torch.bfloat16 and torch.equal(again, first)
    torch.testing.assert_close(first.double(), naive_of(layer, x), rtol=3e-2, atol=3e-2)


def _bias_set_as_a_tensor(base):  # a bias-less base given one: no longer in its parameter table
    del base.bias
    base.bias = torch.full((base.out_features,), 100.0)


def _weight_shadowed(base):  # a weight in the base's own dictionary, where nn.Module finds it first
    base.__dict__["weight"] = base.weight * -1


@pytest.mark.parametrize("change", [_bias_set_as_a_tensor, _weight_shadowed])
@pytest.mark.parametrize("kind", KINDS)
def test_a_base_tensor_outside_its_parameter_table_takes_the_long_way(planned, change, kind):
    """What ``base.weight`` / ``base.bias`` give, not what the parameter table holds, is what a call reads."""
    torch.manual_seed(0)
    layer = grown(tasks=3).eval()
    layer.base = nn.Linear(24, 20, bias=False)
    keep_base_casts(layer, kind == "kept")
    x = torch.randn(2, 5, 24)
    with use_path("dense"):
        call(layer, x), call(layer, x)
        assert len(planned) == 1
        change(layer.base)
        out = call(layer, x)
        assert len(planned) == 1 and torch.equal(call(layer, x), out)
    torch.testing.assert_close(out.double(), naive_of(layer, x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", KINDS)
def test_a_weight_reinterpreted_in_another_dtype_takes_the_long_way(planned, kind):
    """``.data`` swapped for a view in another dtype of the same size: the same storage, pointer,
    shape and version, other numbers; the weight's dtype is part of what the plan checks."""
    layer = layer_of(kind).to(torch.bfloat16)
    x = torch.randn(2, 5, 24, dtype=torch.bfloat16)
    with use_path("dense"):
        call(layer, x), call(layer, x)
        assert len(planned) == 1
        layer.base.weight.data = layer.base.weight.data.view(torch.float16)
        out = call(layer, x)
        assert len(planned) == 1 and torch.equal(out, long_way(layer, x))
    torch.testing.assert_close(out.double(), naive_of(layer, x.double()), rtol=3e-2, atol=3e-2)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA only (the GPU check runs it)")
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("amp", [False, True])
def test_on_cuda_a_repeat_launches_what_the_long_way_launches(planned, read_outs, kind, amp):
    """Triton's own launcher (bound once per row count by ``read_out_launcher``), not the interpreter:
    each repeat equals the long way bit for bit, up to and past the one-call read-out's rows."""
    if not moram_triton.usable(torch.empty(0, device="cuda")):
        pytest.skip("Triton cannot run on this GPU")
    layer = layer_of(kind).cuda()
    torch.manual_seed(2)
    rows = [1, 8, moram_triton.READ_OUT_ROWS, moram_triton.READ_OUT_ROWS + 1]
    with use_path("triton"):
        for count in rows:
            x = torch.randn(count, 24, device="cuda")
            first = long_way(layer, x, amp)
            assert all(torch.equal(call(layer, x, amp), first) for _ in range(2))
            torch.testing.assert_close(first.double(), naive_of(layer, x), rtol=3e-2 if amp else 1e-4,
                                       atol=3e-2 if amp else 1e-4)
    assert len(planned) == 2 * len(rows) and read_outs == [count for count in rows[:3] for _ in range(2)]


@pytest.fixture
def tensor_casts(monkeypatch):
    """The tensors ``Tensor.to`` was called on from Python (autocast's own casts are not: they are C++)."""
    cast = []
    to = torch.Tensor.to

    def recorded(tensor, *args, **kwargs):
        cast.append(tensor)
        return to(tensor, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "to", recorded)
    return cast


@pytest.mark.skipif(not moram_triton.usable(torch.empty(0)), reason="Triton's interpreter is off")
@pytest.mark.parametrize("base_dtype", [torch.float32, torch.float64])
def test_under_autocast_a_repeat_apart_leaves_the_base_s_cast_to_autocast(planned, tensor_casts, base_dtype):
    """The repeat's ``F.linear`` under autocast casts a float32 weight and bias itself (the same
    rounding as ``.to``: the output equals the long way's bit for bit); a float64 base, which
    autocast leaves alone, is cast by the repeat as the long way casts it."""
    layer = grown(tasks=3).eval()
    layer.base.to(base_dtype)
    weight, bias = layer.base.weight, layer.base.bias
    x = torch.randn(2, 5, 24)
    with use_path("triton"):
        call(layer, x, amp=True)
        tensor_casts.clear()
        repeat = call(layer, x, amp=True)
        assert len(planned) == 1
        cast_base = [t for t in tensor_casts if t is weight or t is bias]
        assert len(cast_base) == (2 if base_dtype == torch.float64 else 0)
        assert torch.equal(repeat, long_way(layer, x, amp=True)) and repeat.dtype == torch.bfloat16
    torch.testing.assert_close(repeat.double(), naive_of(layer, x), rtol=3e-2, atol=3e-2)


@pytest.mark.skipif(not moram_triton.usable(torch.empty(0)), reason="Triton's interpreter is off")
@pytest.mark.parametrize("name", ["weight", "bias"])
def test_a_base_that_requires_grad_is_cast_by_the_repeat_not_by_autocast_s_cache(planned, name):
    """Autocast keeps the casts of float32 leaves that require grad for the rest of its region
    (its cache), even under ``torch.no_grad()``: a weight (or bias) edited in place inside the
    region would be read stale from it. A repeat apart casts such a base itself, as the long way does
    (its plan serves the edited call: it reads the base at each call)."""
    layer = grown(tasks=3).eval()
    tensor = getattr(layer.base, name).requires_grad_(True)
    x = torch.randn(2, 5, 24)
    with use_path("triton"), torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        layer(x), layer(x)  # planned, and repeated
        tensor.mul_(-1.0).add_(0.5)  # in place: the repeat reads it (cast at the call, not autocast's stale cast)
        edited = layer(x)
        repeat = layer(x)
        assert len(planned) == 3
        layer._plan = None
        assert torch.equal(repeat, layer(x)) and torch.equal(repeat, edited)
    torch.testing.assert_close(repeat.double(), naive_of(layer, x), rtol=3e-2, atol=3e-2)


@pytest.mark.parametrize("kind,path", KIND_PATHS)
@pytest.mark.parametrize("amp", [False, True])
def test_the_bank_s_keys_data_swapped_for_their_transpose_is_seen(planned, kind, path, amp):
    """24 frozen atoms of 24 inputs: the keys' ``.data`` swapped for their transpose keeps pointer,
    shape, dtype and version; the bank's kept rows (their transpose bound once, or their cast
    copy) are built again from the strides (``rows_stamp``), and the plan goes the long way once."""
    layer = grown(d_in=24, d_out=20, tasks=4, per_task=6)
    keep_base_casts(layer.eval(), kind == "kept")
    x = torch.randn(2, 5, 24)
    with use_path(path):
        call(layer, x, amp), call(layer, x, amp)
        assert len(planned) == 1
        with torch.no_grad():
            layer.frozen_keys.data = layer.frozen_keys.data.t()
        swapped = call(layer, x, amp)
        assert len(planned) == 1
        assert torch.equal(swapped, call(copy.deepcopy(layer), x, amp))
    torch.testing.assert_close(swapped.double(), naive_of(layer, x), rtol=3e-2 if amp else 1e-5,
                               atol=3e-2 if amp else 1e-5)


@pytest.mark.parametrize("path", ["reference", *GPU_PATHS])
def test_a_kept_cast_of_a_transposed_weight_is_made_again(path):
    """A bank with trainable rows is not planned; with ``keep_base_casts`` under bf16 autocast its
    base's bf16 copy is kept (``base_in``) and checked against the weight's stamp at each call: a
    square weight's ``.data`` swapped for its transpose is seen by the strides."""
    layer = grown(d_in=24, d_out=24, tasks=3, frozen=False).eval()
    keep_base_casts(layer)
    x = torch.randn(2, 5, 24)
    with use_path(path):
        call(layer, x, amp=True)
        assert torch.bfloat16 in layer._base_casts  # (the cast copy kept)
        with torch.no_grad():
            layer.base.weight.data = layer.base.weight.data.t()
        swapped = call(layer, x, amp=True)
        assert torch.equal(swapped, call(copy.deepcopy(layer), x, amp=True))
    torch.testing.assert_close(swapped.double(), naive_of(layer, x), rtol=3e-2, atol=3e-2)


def _outcome(layer, x):
    """A call's output, or its error's type and message."""
    try:
        return call(layer, x)
    except RuntimeError as error:
        return type(error), str(error)


@pytest.mark.parametrize("path", ["reference", *GPU_PATHS])
def test_a_bias_s_data_in_another_dtype_takes_the_long_way(planned, path):
    """A call apart reads the base at each call, so its plan checks only what decides that read: the
    weight's shape and dtype and the bias's dtype. A bias swapped for a bf16 one beside a float32
    weight goes the long way, which reads it as it reads any base (the reference path casts it, the
    GPU paths refuse it, as ``nn.Linear`` does): the same outcome as a fresh copy's."""
    layer = layer_of("apart")
    x = torch.randn(2, 5, 24)
    with use_path(path):
        call(layer, x), call(layer, x)
        assert len(planned) == 1
        with torch.no_grad():
            layer.base.bias.data = layer.base.bias.data.to(torch.bfloat16)
        outcome, fresh = _outcome(layer, x), _outcome(copy.deepcopy(layer), x)
        assert len(planned) == 1  # (the long way)
    if isinstance(fresh, tuple):
        assert outcome == fresh
    else:
        assert torch.equal(outcome, fresh)


@pytest.mark.parametrize("kind,path", KIND_PATHS)
def test_a_base_weight_s_data_swapped_for_a_wider_one_is_refused(planned, kind, path):
    """A base whose weight's ``.data`` is swapped for one of more output features no longer fits the
    atoms' values: the planned call sees the shape (a call apart's plan checks it, a stacked call's
    stamps it) and goes the long way, which refuses it on every path (the Triton read-out, which
    reads ``d_out`` columns of the base's output, with a clear error of its own)."""
    layer = layer_of(kind)
    x = torch.randn(2, 5, 24)
    with use_path(path):
        call(layer, x), call(layer, x)
        assert len(planned) == 1
        with torch.no_grad():
            layer.base.weight.data = torch.randn(30, 24)
            layer.base.bias.data = torch.randn(30)
        with pytest.raises((RuntimeError, ValueError)):
            call(layer, x)
        assert len(planned) == 1
