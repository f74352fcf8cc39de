"""A lean MoRAM call (issue "GPU path II", item 1): few operators, nothing re-chosen, re-read or re-joined per call.

Counted on the CPU, never timed: the operators one eval call dispatches on the path CUDA takes
(Triton, its launch stubbed) against the ``nn.Linear`` it wraps; that a call reusing the layer's
choice reads no environment variable and asks the chooser nothing, while ``use_path`` and the
variable still switch it (``use_path`` per thread); that the bank a forward reads is kept, its
trainable rows views of the parameters (an optimizer's in-place step is seen, with no copy),
and rebuilt when the bank grows, freezes, loads or moves; the base's cast kept when asked.
"""

import collections.abc
import copy
import os
import threading
import types

import pytest
import torch
from torch import nn

from moram_avalanche.layers.moram.bank import AtomBank, live_rows, owns_storage
from moram_avalanche.layers.moram.layer import keep_base_casts
from moram_avalanche.layers.moram.naive import naive_moram
from moram_avalanche.layers.moram.paths import PATH_VARIABLE, choice, cpu_kernel, switch, use_path
from moram_avalanche.layers.moram.paths import triton as moram_triton
from moram_avalanche.utils.dispatch import OpCounter
from tiny_layers import grown as tiny_layer


def grown(**options):
    """The shared grown layer (``tiny_layers.grown``), three tasks unless told."""
    return tiny_layer(**{"tasks": 3, **options})


def naive_of(layer, x):
    """Steps 1-6 on ``x`` by the naive reference in float64, with ``layer``'s base and atoms and mode."""
    base = layer.base
    out = naive_moram(x.reshape(-1, layer.in_features).double(), base.weight.double(), base.bias.double(),
                      [layer.keys.double()], [layer.values.double()], topk=layer.effective_topk,
                      temperature=layer.temperature, threshold=layer.threshold, training=layer.training)
    return out.reshape(*x.shape[:-1], layer.out_features)


def assert_naive(layer, x, out, tolerance=1e-5):
    torch.testing.assert_close(out.double(), naive_of(layer, x), rtol=tolerance, atol=tolerance)


@pytest.fixture
def stub_kernels(monkeypatch):
    """The Triton launches replaced by no-ops (what is left is what the path asks of PyTorch)."""
    launches = []

    class Launcher:
        def __getitem__(self, grid):
            return lambda *args, **kwargs: launches.append(1)

    monkeypatch.setattr(moram_triton, "_kernels", lambda: types.SimpleNamespace(
        route_forward_kernel=Launcher(), route_backward_kernel=Launcher(), route_read_out_kernel=Launcher()))
    monkeypatch.setattr(moram_triton, "usable", lambda tensor: True)
    return launches


def ops_of(module, x, amp):
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
        module(x)  # the first call keeps the bank in the compute dtype
        with OpCounter() as ops:
            module(x)
    return ops


# ---------------------------------------------------------------- operators per eval call
@pytest.mark.parametrize("amp", [True, False])
@pytest.mark.parametrize("shape", [(2, 9, 24), (9, 24)])
@pytest.mark.parametrize("rows", ["few", "many"])
def test_an_eval_call_on_the_gpu_path_dispatches_at_most_three_operators_more_than_its_linear(stub_kernels, amp,
                                                                                              shape, rows, monkeypatch):
    if rows == "many":  # more token rows than a decode step's: routed, then read out by a GEMM
        monkeypatch.setattr(moram_triton, "READ_OUT_ROWS", 0)
    layer = grown().eval()
    x = torch.randn(*shape)
    with use_path("triton"):
        moram = ops_of(layer, x, amp)
    linear = ops_of(layer.base, x, amp)
    assert len(stub_kernels) == 2  # the routing (or read-out) kernel, counted apart
    assert moram.host_syncs() == []
    assert moram.total <= linear.total + 3, (moram.summary(), linear.summary())
    assert moram.counts["aten::mm"] == 1 and moram.counts["aten::cat"] == 0  # p = A x; nothing of the bank
    if rows == "many":  # the three: p = A x, the coefficients the kernel writes, + c B
        assert moram.counts["aten::empty_like"] == 1 and moram.counts["aten::addmm_"] == 1
    else:  # two: p = A x, and y the one read-out kernel writes (no coefficients, no + c B)
        assert moram.counts["aten::empty"] + moram.counts["aten::new_empty"] == 1  # (new_empty: a planned call's)
        assert moram.counts["aten::addmm_"] == moram.counts["aten::empty_like"] == 0
        assert moram.total <= linear.total + 2
    assert moram.counts["aten::_to_copy"] == linear.counts["aten::_to_copy"]  # x, W, b under autocast; none else


def test_an_eval_call_with_a_task_still_trainable_copies_only_its_rows(stub_kernels):
    layer = grown(frozen=False).eval()
    x = torch.randn(2, 9, 24)
    with use_path("triton"):
        fp32, bf16 = ops_of(layer, x, False), ops_of(layer, x, True)
    assert fp32.counts["aten::cat"] == bf16.counts["aten::cat"] == 0
    assert fp32.counts["aten::copy_"] == 0                     # the parameters' own rows: nothing to copy
    assert bf16.counts["aten::copy_"] == 2                     # the trainable keys and values, cast
    assert bf16.counts["aten::_to_copy"] == 3                  # x, W, b, as nn.Linear under autocast


def test_a_training_call_in_the_banks_dtype_joins_nothing(stub_kernels):
    layer = grown(frozen=False).train()
    x = torch.randn(2, 9, 24, requires_grad=True)
    with use_path("triton"):
        layer(x)
        with OpCounter() as ops:
            layer(x).sum().backward()
    assert ops.counts["aten::cat"] == 0 and ops.counts["aten::_to_copy"] == 0


# ---------------------------------------------------------------- chosen once, read once
class Untouchable(collections.abc.MutableMapping):
    """An ``os.environ`` stand-in that fails any read or write."""

    def _fail(self, *args, **kwargs):
        raise AssertionError("the environment was read in a MoRAM call")

    __getitem__ = __setitem__ = __delitem__ = __iter__ = __len__ = get = __contains__ = _fail


@pytest.fixture
def choices(monkeypatch):
    """The paths the chooser picked, one name per choice."""
    picked = []
    path_name = choice.path_name

    def counted(*args, **kwargs):
        picked.append(path_name(*args, **kwargs))
        return picked[-1]

    monkeypatch.setattr(choice, "path_name", counted)
    return picked


@pytest.mark.parametrize("training", [False, True])
def test_a_call_that_reuses_the_choice_reads_no_environment_and_chooses_nothing(monkeypatch, choices, training):
    monkeypatch.setenv(PATH_VARIABLE, "dense")
    layer = grown(frozen=not training).train(training)
    x = torch.randn(2, 9, 24, requires_grad=training)

    def calls():
        for amp in (False, True):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
                out = layer(x)
            if training:
                out.float().sum().backward()

    calls()
    assert choices == ["dense", "dense"]  # once per compute dtype
    with monkeypatch.context() as blocked:
        blocked.setattr(os, "environ", Untouchable())
        calls()
        calls()
    assert choices == ["dense", "dense"]  # kept: nothing chosen again, nothing read


def test_use_path_and_the_variable_still_switch_a_layer_that_has_chosen(monkeypatch, choices):
    monkeypatch.delenv(PATH_VARIABLE, raising=False)
    monkeypatch.delenv(switch.KERNEL_VARIABLE, raising=False)
    layer = grown().eval()
    x = torch.randn(3, 24)
    with use_path("reference"):
        assert_naive(layer, x, layer(x))
        layer(x)
    with use_path("dense"):
        assert_naive(layer, x, layer(x))
    with use_path("dense"):  # a new block: chosen again (what the chooser reads may have changed)
        layer(x)
    monkeypatch.setenv(PATH_VARIABLE, "reference")
    layer(x)
    monkeypatch.setenv(PATH_VARIABLE, "dense")
    assert_naive(layer, x, layer(x))
    monkeypatch.delenv(PATH_VARIABLE)
    layer(x)
    assert choices[:5] == ["reference", "dense", "dense", "reference", "dense"]
    assert len(choices) == 6 and choices[5] in ("reference", "cpu-kernel")  # auto on the CPU


def test_the_compiled_kernel_built_after_a_choice_is_taken_at_the_next_call(monkeypatch, choices):
    from moram_avalanche.layers.moram.paths import cpu_kernel

    monkeypatch.delenv(PATH_VARIABLE, raising=False)
    monkeypatch.setattr(cpu_kernel, "_module", None)
    monkeypatch.setattr(cpu_kernel, "_failure", None)
    layer = grown().eval()
    x = torch.randn(3, 24)
    layer(x)
    reference = layer.path(x, layer.num_atoms, layer.effective_topk, True)  # kept: not chosen again
    assert choices == ["reference"]
    monkeypatch.setattr(cpu_kernel, "_build", lambda: types.SimpleNamespace())  # a build that succeeds
    assert cpu_kernel.load() is not None
    monkeypatch.setattr(choice, "mixture_for", lambda *args: choices.append("chosen again") or reference)
    layer(x)
    layer(x)
    assert choices == ["reference", "chosen again"]


def test_use_path_forces_a_path_in_its_own_thread_only(monkeypatch, choices):
    monkeypatch.delenv(PATH_VARIABLE, raising=False)
    monkeypatch.delenv(switch.KERNEL_VARIABLE, raising=False)
    layer_here, layer_there = grown().eval(), grown().eval()
    x = torch.randn(3, 24)
    entered, checked = threading.Event(), threading.Event()
    seen = {}

    def other_thread():
        with use_path("dense"):
            seen["there"] = switch.requested()
            layer_there(x)
            entered.set()
            checked.wait(timeout=30)
            seen["there, later"] = switch.requested()
        seen["there, after"] = switch.requested()

    thread = threading.Thread(target=other_thread)
    thread.start()
    assert entered.wait(timeout=30)
    seen["here"] = switch.requested()
    layer_here(x)
    with use_path("reference"):
        seen["here, forced"] = switch.requested()
    checked.set()
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert seen == {"there": "dense", "here": "auto", "here, forced": "reference", "there, later": "dense",
                    "there, after": "auto"}
    assert choices[0] == "dense" and choices[1] in ("reference", "cpu-kernel")


class TraceUnreadable:
    """A stand-in for the switch's ContextVar whose ``get`` fails inside a ``torch.compile`` trace, as
    torch 2.11's Dynamo fails on ``ContextVar.get`` ("Unsupported method call")."""

    def __init__(self, var):
        self.var = var

    def get(self):
        if torch.compiler.is_compiling():
            raise AssertionError("the switch's ContextVar was read inside a torch.compile trace")
        return self.var.get()

    def set(self, value):
        return self.var.set(value)

    def reset(self, token):
        self.var.reset(token)


@pytest.mark.parametrize("setting", ["reference", "dense"])
def test_a_compiled_layer_takes_use_path_without_reading_the_context_variable(monkeypatch, choices, setting):
    """A ``torch.compile(fullgraph=True)`` trace reads the setting from the switch's global, never its
    ContextVar (torch 2.11's Dynamo cannot trace ``ContextVar.get``), and takes each block's path."""
    monkeypatch.delenv(PATH_VARIABLE, raising=False)
    monkeypatch.delenv(switch.KERNEL_VARIABLE, raising=False)
    monkeypatch.setattr(switch, "_forced", TraceUnreadable(switch._forced))
    # outside the block the chooser's pick: the reference path (the compiled CPU kernel, when an earlier
    # test built it, is a pybind function that no graph holds)
    monkeypatch.setattr(cpu_kernel, "built", lambda: None)
    torch._dynamo.reset()
    layer = grown().eval()
    x = torch.randn(3, 24)
    compiled = torch.compile(layer, fullgraph=True, backend="eager")
    try:
        with use_path(setting):
            assert switch.forced_now().name == setting and switch.requested() == setting
            torch.testing.assert_close(compiled(x).double(), naive_of(layer, x), rtol=1e-5, atol=1e-5)
        assert switch.forced_now() is None and switch.traced_token() is switch.token()
        torch.testing.assert_close(compiled(x).double(), naive_of(layer, x), rtol=1e-5, atol=1e-5)
    finally:
        torch._dynamo.reset()
    assert choices[0] == setting and choices[-1] == "reference" and len(choices) >= 2


def test_the_blocks_a_trace_reads_end_in_any_order_across_threads():
    """The global a trace reads is the innermost block entered last that is still open, in any thread:
    a block that ends before a later one (another thread's) leaves it in place, and none stays stale."""
    first_open, second_open, first_closed = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def first():
        with use_path("dense"):
            first_open.set()
            second_open.wait(timeout=30)
        first_closed.set()

    thread = threading.Thread(target=first)
    thread.start()
    assert first_open.wait(timeout=30)
    seen["first"] = switch.traced_token().name
    with use_path("reference"):
        second_open.set()
        assert first_closed.wait(timeout=30)
        seen["first closed"] = switch.traced_token().name
    thread.join(timeout=30)
    seen["both closed"] = switch.traced_token()
    assert seen == {"first": "dense", "first closed": "reference", "both closed": switch.token()}
    assert switch._open_blocks == []


# ---------------------------------------------------------------- the bank kept, its trainable rows views
def test_the_trainable_rows_are_views_of_the_rows_a_forward_reads():
    layer = grown(frozen=False)
    for frozen, new in ((layer.frozen_keys, layer.new_keys), (layer.frozen_values, layer.new_values)):
        whole = live_rows(frozen, new)
        assert whole is not None and whole.shape[0] == layer.num_atoms
    rows = layer.rows(torch.float32)
    assert rows.keys.data_ptr() == layer.frozen_keys.data_ptr()
    assert rows.keys[layer.num_frozen:].data_ptr() == layer.new_keys.data_ptr()
    assert layer.rows(torch.float32) is rows  # kept, not rebuilt


@pytest.mark.parametrize("path", ["reference", "dense"])
@pytest.mark.parametrize("amp", [False, True])
def test_an_optimizer_step_in_place_is_seen_by_the_next_forward(path, amp):
    layer = grown(frozen=False)
    x = torch.randn(4, 24)
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.5)
    with use_path(path):
        for _ in range(3):
            layer.train()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
                layer(x).float().square().sum().backward()
            optimizer.step()
            optimizer.zero_grad()
            check_eval(layer, x, amp)
        layer.new_keys.data.add_(0.1)  # an update through .data, as DeepSpeed's optimizers make it
        check_eval(layer, x, amp)


def check_eval(layer, x, amp):
    """``layer``'s eval output is the naive reference's (float32) or a fresh copy's (bf16: the
    routing's rounding is the layer's own; the copy keeps no rows from earlier calls)."""
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
        out = layer.eval()(x)
        if amp:
            assert torch.equal(out, copy.deepcopy(layer)(x))
        else:
            assert_naive(layer, x, out)


def test_the_kept_rows_follow_growth_freezing_loading_and_moves():
    layer = grown(frozen=False)
    x = torch.randn(5, 24)

    def check():
        inputs = x.to(layer.base.weight.dtype)
        assert_naive(layer.eval(), inputs, layer(inputs))

    check()
    layer.expand()
    with torch.no_grad():
        layer.new_values.normal_()
    check()
    layer.freeze()
    check()
    layer.expand()
    with torch.no_grad():
        layer.new_values.normal_()
    other = grown(frozen=False, seed=3)
    other.expand()
    layer.load_state_dict(other.state_dict())  # same split: copied into the shared rows
    assert live_rows(layer.frozen_keys, layer.new_keys) is not None
    check()
    layer.load_state_dict(grown(frozen=False, tasks=2, seed=4).state_dict())  # another size: new rows
    assert live_rows(layer.frozen_values, layer.new_values) is not None
    check()
    held = layer.new_keys
    layer.double()
    assert layer.new_keys is held and live_rows(layer.frozen_keys, layer.new_keys) is not None
    check()
    twin = copy.deepcopy(layer)  # its parameters are copies: the twin joins per call, still right
    torch.testing.assert_close(twin.eval()(x.double()), layer(x.double()))


def test_rows_kept_inside_inference_mode_serve_a_later_training_step():
    layer = grown()
    x = torch.randn(2, 24)
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        layer.eval()(x)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = layer.train()(x.clone().requires_grad_())
    out.float().sum().backward()  # inference tensors cannot be saved for backward: these are normal ones


def test_the_banks_state_dicts_are_unchanged_and_save_each_tensor_on_its_own():
    layer = grown(frozen=False)
    assert sorted(layer.state_dict()) == ["atom_keys", "atom_task", "atom_values", "base.bias", "base.weight",
                                          "num_frozen"]
    bank = AtomBank(24, 20, 6, torch.empty(0))
    bank.expand()
    bank.expand()
    assert live_rows(bank.frozen_keys, bank.new_keys) is not None
    state = bank.state_dict()
    assert sorted(state) == ["atom_task", "frozen_keys", "frozen_values", "new_keys", "new_values"]
    assert all(owns_storage(tensor) for tensor in state.values())
    torch.testing.assert_close(state["new_keys"], bank.new_keys.detach())
    safetensors = pytest.importorskip("safetensors.torch")
    safetensors.save(state)  # refuses tensors that share memory


# ---------------------------------------------------------------- the base's cast kept (an option, off by default)
def test_a_kept_base_cast_saves_two_casts_and_changes_no_number(stub_kernels):
    model = nn.Sequential(grown().eval(), nn.ReLU(), grown(d_in=20, d_out=20, seed=1).eval())
    x = torch.randn(2, 9, 24)
    layer = model[0]
    assert layer.keep_base_cast is False
    with use_path("triton"):  # the launch stubbed: operators only (its coefficients are not written)
        plain = ops_of(layer, x, True)
        assert keep_base_casts(model) == 2
        kept = ops_of(layer, x, True)
    assert plain.counts["aten::_to_copy"] == 3 and kept.counts["aten::_to_copy"] == 1  # x only
    # no backward follows: the base stacked with the keys (layers.moram.stacked), one GEMM fewer too:
    # [W x + b | p] in one GEMM, then the one read-out kernel (a few rows), which reads it in place:
    # two casts, a GEMM and F.linear's view W^T fewer
    assert kept.total == plain.total - 4 and kept.counts["aten::mm"] == 0 and kept.counts["aten::addmm"] == 1
    keep_base_casts(model, False)
    with use_path("triton"):  # with a backward: the base's cast kept apart, two casts fewer
        plain, kept = training_ops_of(layer, x), None
        keep_base_casts(model)
        kept = training_ops_of(layer, x)
    assert plain.counts["aten::_to_copy"] - kept.counts["aten::_to_copy"] == 2 and kept.total == plain.total - 2
    keep_base_casts(model, False)
    with use_path("dense"), torch.autocast("cpu", dtype=torch.bfloat16), torch.no_grad():
        expected = model(x)
        assert keep_base_casts(model) == 2
        assert torch.equal(model(x), expected) and torch.equal(model(x), expected)
        layer.base.weight.mul_(2)  # an in-place edit of the base is seen
        assert torch.equal(layer(x), cast_at_the_call(layer, x))
        layer.base.weight.data = layer.base.weight.data / 2  # and a swap of its data
        assert torch.equal(model(x), expected)
        assert keep_base_casts(model, False) == 2
        assert torch.equal(model(x), expected)


def training_ops_of(layer, x):
    """The operators of one bf16 autocast forward of ``layer`` that a backward follows (the input requires grad)."""
    x = x.clone().requires_grad_()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        layer(x)
        with OpCounter() as ops:
            layer(x)
    return ops


def cast_at_the_call(layer, x):
    """``layer``'s output with its base cast at the call (the option off, on a copy)."""
    twin = copy.deepcopy(layer)
    twin.keep_base_cast = False
    return twin(x)
