"""When a MoRAM layer calls its base and when it reads the base's weight into the atoms' read-out.

A layer reads ``W`` and ``b`` into its read-out (one output, steps 1-6) only where calling the base
would be a plain ``F.linear`` (``hooks.plain_linear``), asked at each call; otherwise it calls the
base, so that the base's hooks (``weight_norm``, pruning, accelerate's offload) and a forward of its
own run. Expected values: the base's own call (its hooks run) plus the atoms' term of the naive
float64 layer over a zero base. Also: a kept cast of a trainable base passes its gradient, an
``nn.DataParallel`` replica keeps copies of its own, and ``forget_copies`` drops every kept copy
(after an edit through ``.data``, which no check sees).
"""

from __future__ import annotations

import functools
import warnings
from collections import OrderedDict

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils import prune

from moram_avalanche.layers.moram.hooks import plain_call, plain_linear
from moram_avalanche.layers.moram.layer import forget_copies, keep_base_casts
from moram_avalanche.layers.moram.naive import naive_moram
from moram_avalanche.layers.moram.paths import use_path
from moram_avalanche.layers.moram.plan import EvalPlan
from tiny_layers import grown, naive_of

KINDS = ["kept", "apart"]


@pytest.fixture
def planned(monkeypatch):
    """How many calls a plan served (a list, one entry a call)."""
    served = []
    read = EvalPlan.read
    monkeypatch.setattr(EvalPlan, "read", lambda plan, x: (served.append(1), read(plan, x))[1])
    return served


def layer_of(kind):
    layer = grown(tasks=3).eval()
    keep_base_casts(layer, kind == "kept")
    return layer


def atoms_term(layer, x):
    """The atoms' term ``sum_i w_i p_i B_i`` of the naive float64 layer (a zero base)."""
    tokens = x.reshape(-1, layer.in_features).double()
    zero = torch.zeros(layer.out_features, layer.in_features, dtype=torch.float64)
    out = naive_moram(tokens, zero, None, [layer.keys.double()], [layer.values.double()], topk=layer.effective_topk,
                      temperature=layer.temperature, threshold=layer.threshold, training=layer.training)
    return out.reshape(*x.shape[:-1], layer.out_features)


def expected(layer, x):
    """The base's own call (its hooks run) and the naive atoms' term."""
    with torch.no_grad():
        return layer.base(x).double() + atoms_term(layer, x)


def calls(layer, x, n=3):
    with torch.no_grad(), use_path("dense"):
        return [layer(x) for _ in range(n)]


def test_a_plain_linear_is_told_apart_from_a_hooked_wrapped_or_subclassed_one():
    linear = nn.Linear(3, 2)
    assert plain_linear(linear) and plain_call(linear)
    handle = linear.register_forward_pre_hook(lambda module, args: None)
    assert not plain_linear(linear) and not plain_call(linear)
    handle.remove()
    linear.forward = functools.partial(nn.Linear.forward, linear)  # (as accelerate's hooks wrap it)
    assert not plain_linear(linear) and not plain_call(linear)
    del linear.forward
    handle = torch.nn.modules.module.register_module_forward_hook(lambda module, args, out: None)
    try:
        assert not plain_linear(linear)
    finally:
        handle.remove()
    assert plain_linear(linear) and not plain_linear(OwnForward(3, 2)) and plain_call(OwnForward(3, 2))


@pytest.mark.parametrize("kind", KINDS)
def test_a_hook_on_the_base_added_after_planned_calls_runs_and_shapes_the_output(planned, kind):
    layer = layer_of(kind)
    x = torch.randn(2, 5, 24)
    calls(layer, x)
    assert len(planned) == 2  # (the fused call is planned: the hook below must end that)
    seen = []
    layer.base.register_forward_pre_hook(lambda module, args: (args[0] * 0.5,))
    layer.base.register_forward_hook(lambda module, args, out: seen.append(1))
    outs = calls(layer, x)
    assert len(seen) == 3  # (the atoms' term alone may be planned: the base is called)
    for out in outs:
        torch.testing.assert_close(out.double(), expected(layer, x), rtol=1e-5, atol=1e-5)
    assert not torch.allclose(outs[0].double(), F.linear(x, layer.base.weight, layer.base.bias).double()
                              + atoms_term(layer, x), atol=1e-3)  # (the hook's halved input shows)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("util", ["weight_norm", "prune"])
def test_a_base_whose_weight_a_pre_hook_recomputes_follows_its_parameters(kind, util):
    layer = layer_of(kind)
    x = torch.randn(7, 24)
    calls(layer, x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the hook-based weight_norm is deprecated: its pre-hook is the case)
        if util == "weight_norm":
            torch.nn.utils.weight_norm(layer.base)
        else:
            prune.l1_unstructured(layer.base, "weight", amount=0.5)
    with torch.no_grad():  # an optimizer's step on what the hook recomputes the weight from
        (layer.base.weight_g if util == "weight_norm" else layer.base.weight_orig).mul_(3)
    out = calls(layer, x)[-1]
    torch.testing.assert_close(out.double(), expected(layer, x), rtol=1e-5, atol=1e-5)


class OwnForward(nn.Linear):
    """A base with a forward of its own (a quantised layer's, say): twice ``F.linear``, to be seen."""

    def forward(self, x):
        return 2 * F.linear(x, self.weight, self.bias)


@pytest.mark.parametrize("kind", KINDS)
def test_a_base_swapped_after_construction_for_one_with_its_own_forward_runs_it(planned, kind):
    layer = layer_of(kind)
    x = torch.randn(7, 24)
    calls(layer, x)
    own = OwnForward(24, 20)
    own.load_state_dict(layer.base.state_dict())
    layer.base = own
    out = calls(layer, x)[-1]
    torch.testing.assert_close(out.double(), expected(layer, x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", KINDS)
def test_a_forward_set_on_the_base_instance_is_called(kind):
    layer = layer_of(kind)
    x = torch.randn(7, 24)
    calls(layer, x)
    seen = []

    def wrapped(module, x):  # as accelerate's add_hook_to_module wraps a module's forward
        seen.append(1)
        return nn.Linear.forward(module, x) + 1.0

    layer.base.forward = functools.partial(wrapped, layer.base)
    out = calls(layer, x)[-1]
    assert len(seen) == 3  # each call through the wrapper
    torch.testing.assert_close(out.double(), expected(layer, x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("frozen", [True, False])
def test_a_kept_cast_of_a_trainable_base_passes_its_gradient(frozen):
    """``keep_base_casts`` with the base trainable: a bf16 training step's base gradient as without it."""
    grads = []
    for keep in (False, True):
        layer = grown(tasks=2, frozen=frozen).train()
        layer.base.requires_grad_(True)
        keep_base_casts(layer, keep)
        x = torch.randn(6, 24)
        with torch.autocast("cpu", dtype=torch.bfloat16), use_path("dense"):
            for _ in range(2):  # (the second call would read a kept copy)
                layer.zero_grad()
                layer(x).float().square().sum().backward()
        assert layer.base.weight.grad is not None and layer.base.bias.grad is not None
        grads.append((layer.base.weight.grad, layer.base.bias.grad))
    assert torch.equal(grads[0][0], grads[1][0]) and torch.equal(grads[0][1], grads[1][1])


def replicated(network):
    """``network``'s replica as ``torch.nn.parallel.replicate`` makes it for a second device (which
    needs CUDA): each module's ``_replicate_for_data_parallel``, its children the replicas, its
    parameters and buffers copies (another device's)."""
    modules = list(network.modules())
    index = {module: i for i, module in enumerate(modules)}
    copies = [module._replicate_for_data_parallel() for module in modules]
    for module, replica in zip(modules, copies):
        replica._former_parameters = OrderedDict()
        for name, child in module._modules.items():
            setattr(replica, name, None if child is None else copies[index[child]])
        for name, tensor in module._parameters.items():
            replica._parameters[name] = None if tensor is None else tensor.detach().clone()
        for name, tensor in module._buffers.items():
            replica._buffers[name] = None if tensor is None else tensor.clone()
    return copies[0]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("amp", [False, True])
def test_a_data_parallel_replica_keeps_copies_of_its_own(kind, amp):
    layer = layer_of(kind)
    x = torch.randn(7, 24)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
        want = calls(layer, x, 2)[-1]
        kept = (dict(layer._stacked), dict(layer._base_casts), dict(layer._cast_rows), layer._plan)
        replica = replicated(layer)
        for name in ("_stacked", "_base_casts", "_cast_rows", "_eval_rows"):
            assert getattr(replica, name) is not getattr(layer, name)
        assert replica._plan is None and replica._path is None
        assert all(torch.equal(out, want) for out in calls(replica, x, 2))
    assert (layer._stacked, layer._base_casts, layer._cast_rows, layer._plan) == kept  # (untouched by the replica)


@pytest.mark.parametrize("kind,edited", [("kept", "frozen_values"), ("kept", "weight"), ("apart", "frozen_values")])
def test_forget_copies_after_an_edit_through_data(kind, edited):
    """An edit through ``.data`` moves no version: the kept bf16 copies serve the old tensors (as the
    docs say) until ``forget_copies``, after which the call is the naive layer's on the new ones."""
    layer = layer_of(kind)
    x = torch.randn(7, 24)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        before = calls(layer, x, 2)[-1]
        # (a base read apart is cast at each call: nothing is kept of it to go stale)
        (layer.frozen_values if edited == "frozen_values" else layer.base.weight).data.mul_(3)
        stale = calls(layer, x, 1)[-1]
        assert forget_copies(layer) == 1
        after = calls(layer, x, 1)[-1]
    assert torch.equal(stale, before)
    torch.testing.assert_close(after.double(), naive_of(layer, x), rtol=3e-2, atol=3e-2)
    assert not torch.allclose(after, before, atol=1e-2)


@pytest.mark.parametrize("through", ["layer", "parent"])
def test_a_compiled_call_after_a_checkpoint_loaded_in_place_reads_the_new_weights(through):
    """``torch.compile`` reads a kept stacked copy where it was made from the same objects (no
    versions in a graph): a load through the layer or a module holding it drops the copies, so the
    compiled call after it is the naive layer's on the loaded weights."""
    layer = layer_of("kept")
    parent = nn.Sequential(layer)
    x = torch.randn(4, 24)
    torch.manual_seed(5)
    loaded = {name: torch.randn_like(tensor) for name, tensor in layer.state_dict().items()
              if name.startswith("base.")}
    torch._dynamo.reset()  # (every compiled MoRAMLinear.forward counts against one code object's recompile limit)
    with torch.no_grad(), use_path("dense"):
        layer(x)  # (an eager call makes the kept copy, which the graph reads)
        compiled = torch.compile(layer, backend="eager", fullgraph=True)
        before = compiled(x)
        want_before = naive_of(layer, x)
        if through == "layer":
            layer.load_state_dict(loaded, strict=False)
        else:
            parent.load_state_dict({f"0.{name}": tensor for name, tensor in loaded.items()}, strict=False)
        after = compiled(x)
    torch._dynamo.reset()
    torch.testing.assert_close(before.double(), want_before, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(after.double(), naive_of(layer, x), rtol=1e-5, atol=1e-5)
