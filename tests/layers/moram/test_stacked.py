"""The base and the keys as one GEMM, ``x [W; A]^T + [b; 0]`` (``layers.moram.stacked``; issue "GPU path II", item 3).

Where the layer keeps its base's copy (``keep_base_casts``) and no backward follows, the GPU paths
read the tokens once: these tests hold its numbers to the float64 naive layer on both GPU paths,
count the GEMMs that read the tokens, and check when the stacked copy is (and is not) built again.
"""

import copy
import functools
import pickle
import re

import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from moram_avalanche.layers.moram.layer import keep_base_casts
from moram_avalanche.layers.moram.paths import triton as moram_triton
from moram_avalanche.layers.moram.paths import use_path
from moram_avalanche.layers.moram.stacked import stack_base
from moram_avalanche.layers.moram.together import read_together
from moram_avalanche.layers.moram.variants import MoRAMAblationLinear
from tiny_layers import grown, naive_of

GPU_PATHS = ["dense", pytest.param("triton", marks=pytest.mark.skipif(
    not moram_triton.usable(torch.empty(0)), reason="Triton's interpreter is off (TRITON_INTERPRET=1 not set early)"))]


def assert_naive(layer, x, out, amp):
    tolerance = 3e-2 if amp else 1e-5
    torch.testing.assert_close(out.double(), naive_of(layer, x), rtol=tolerance, atol=tolerance)


def call(layer, x, amp):
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
        return layer(x)


class Gemms(TorchDispatchMode):
    """Each matrix product's ``(first operand's shape, output's shape)``."""

    NAMES = {"aten::mm", "aten::addmm", "aten::addmm_"}

    def __init__(self):
        super().__init__()
        self.shapes = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func._schema.name in self.NAMES:
            first = args[0] if func._schema.name == "aten::mm" else args[1]
            self.shapes.append((tuple(first.shape), tuple(out.shape)))
        return out


# ---------------------------------------------------------------- the numbers
@pytest.mark.parametrize("path", GPU_PATHS + ["triton, many rows"])
@pytest.mark.parametrize("amp", [False, True])
@pytest.mark.parametrize("bank", ["frozen", "scaled", "no-bias", "trainable", "trainable, scaled"])
def test_the_stacked_call_equals_the_naive_layer(path, amp, bank, monkeypatch):
    """A frozen bank is stacked; one with trainable rows reads them where they live (the base's copy
    kept cast), with the same numbers."""
    if path == "triton, many rows":  # routed, then read out by a GEMM (more rows than a decode step's)
        if not moram_triton.usable(torch.empty(0)):
            pytest.skip("Triton's interpreter is off")
        monkeypatch.setattr(moram_triton, "READ_OUT_ROWS", 0)
        path = "triton"
    trainable = bank.startswith("trainable")
    layer = grown(frozen=not trainable).eval()
    if bank.endswith("scaled"):
        layer.new_value_scale = 2.0  # the release's atom scaling: a trainable value counts twice, a frozen once
    if bank == "no-bias":
        layer.base.bias = None
    keep_base_casts(layer)
    x = torch.randn(2, 9, 24)
    with use_path(path):
        out = call(layer, x, amp)
        again = call(layer, x, amp)
    if trainable:
        assert not layer._stacked and list(layer._base_casts) == ([torch.bfloat16] if amp else [])
    else:
        assert len(layer._stacked) == 1 and not layer._base_casts
    assert out.dtype == (torch.bfloat16 if amp else torch.float32) and out.is_contiguous()
    assert_naive(layer, x, out, amp)
    assert torch.equal(again, out)
    with use_path(path):  # the same numbers as the call that reads the base apart
        keep_base_casts(layer, False)
        torch.testing.assert_close(call(layer, x, amp), out, rtol=0, atol=2e-2 if amp else 1e-6)


@pytest.mark.parametrize("path", GPU_PATHS)
def test_the_gate_closing_every_atom_leaves_the_base_alone(path):
    layer = grown().eval()
    layer.threshold = 1.0  # no relevance reaches 1 (the keys are not parallel to x): every term gated
    keep_base_casts(layer)
    x = torch.randn(3, 24)
    with use_path(path):
        out = call(layer, x, False)
    torch.testing.assert_close(out, layer.base(x), rtol=0, atol=1e-6)


# ---------------------------------------------------------------- one GEMM reads the tokens
@pytest.mark.parametrize("path", GPU_PATHS)
def test_the_tokens_are_read_by_one_gemm_that_gives_the_base_and_the_projections(path):
    layer = grown(tasks=3).eval()  # 18 atoms: no product's operand has the tokens' shape by chance
    x = torch.randn(2, 9, 24)
    with use_path(path):
        call(layer, x, True)
        with Gemms() as apart:
            call(layer, x, True)
        keep_base_casts(layer)
        call(layer, x, True)
        with Gemms() as stacked:
            call(layer, x, True)
    tokens, atoms = (18, 24), layer.num_atoms
    assert [shape for shape in apart.shapes if shape[0] == tokens] == [(tokens, (18, atoms)), (tokens, (18, 20))]
    read_out = [((18, atoms), (18, 20))] if path == "dense" else []  # Triton: the read-out kernel (a few rows)
    assert stacked.shapes == [(tokens, (18, 20 + atoms))] + read_out  # [W x + b | p], then + c B


# ---------------------------------------------------------------- when the copy is built again
@pytest.mark.parametrize("change", ["base in place", "base swapped", "keys edited", "a task trained", "scale",
                                    "to float64"])
def test_the_stacked_copy_is_built_again_when_what_it_holds_changes(change):
    layer = grown().eval()
    keep_base_casts(layer)
    x = torch.randn(4, 24)
    with use_path("dense"):
        call(layer, x, False)
        kept = layer._stacked[torch.float32][2]
        call(layer, x, False)
        assert layer._stacked[torch.float32][2] is kept  # nothing changed: nothing built
        with torch.no_grad():
            if change == "base in place":
                layer.base.weight.mul_(2)
            elif change == "base swapped":
                layer.base.weight.data = layer.base.weight.data * 3
            elif change == "keys edited":  # the frozen rows edited in place
                layer.frozen_keys.add_(torch.randn_like(layer.frozen_keys))
                layer.frozen_values.add_(1.0)
            elif change == "a task trained":  # a new task's atoms, trained and frozen
                layer.expand()
                layer.new_values.normal_(std=0.5)
                layer.freeze()
            elif change == "scale":
                layer.new_value_scale = 0.5
            else:
                layer.to(torch.float64)
                x = x.double()
        out = call(layer, x, False)
    assert_naive(layer, x, out, False)
    assert list(layer._stacked) == [x.dtype] and layer._stacked[x.dtype][2] is not kept  # the old copy let go


def test_a_layer_keeps_one_copy_of_its_base_at_a_time():
    layer = grown()
    keep_base_casts(layer)
    x = torch.randn(4, 24, requires_grad=True)  # (a frozen backbone's earlier layers train)
    with use_path("dense"), torch.autocast("cpu", dtype=torch.bfloat16):
        layer.train()
        layer(x).float().sum().backward()  # a backward follows: the base cast apart
        assert list(layer._base_casts) == [torch.bfloat16] and not layer._stacked
        layer.eval()
        with torch.no_grad():
            layer(x)
        assert list(layer._stacked) == [torch.bfloat16] and not layer._base_casts
        layer.train()
        layer(x).float().sum().backward()
        assert list(layer._base_casts) == [torch.bfloat16] and not layer._stacked


# ---------------------------------------------------------------- where it is not used
def test_no_stack_where_a_backward_follows_or_on_the_cpu_paths_or_with_the_option_off():
    layer = grown().eval()
    x = torch.randn(4, 24, requires_grad=True)
    with use_path("dense"):
        call(layer, x, False)
        assert not layer._stacked  # the option is off
        keep_base_casts(layer)
        out = layer(x)  # grad mode on: the backward needs W and A apart
        out.sum().backward()
        assert not layer._stacked and x.grad is not None
    with use_path("reference"):
        assert_naive(layer, x.detach(), call(layer, x.detach(), False), False)
    assert not layer._stacked


def test_an_external_router_never_stacks_the_keys():
    torch.manual_seed(0)
    layer = MoRAMAblationLinear(nn.Linear(24, 20), atoms_per_task=6, topk=4, temperature=0.05, threshold=0.2,
                                router=True).eval()
    layer.expand()
    with torch.no_grad():
        layer.new_values.normal_(std=0.5)  # a term to route (zero values would hide a routing by the keys)
    keep_base_casts(layer)
    x = torch.randn(4, 24)
    with use_path("dense"):
        expected = call(layer, x, False)
        keep_base_casts(layer, False)
        assert torch.equal(call(layer, x, False), expected)
    assert not layer._stacked


def test_copies_and_pickles_carry_no_stacked_copy():
    layer = grown().eval()
    keep_base_casts(layer)
    with use_path("dense"):
        call(layer, torch.randn(4, 24), False)
    assert layer._stacked
    assert not copy.deepcopy(layer)._stacked and not pickle.loads(pickle.dumps(layer))._stacked


@pytest.mark.parametrize("case", ["frozen, eager first", "frozen, compiled first", "trainable rows"])
def test_torch_compile_reads_a_frozen_banks_kept_copy_and_never_stacks_in_the_graph(case):
    layer = grown(frozen=case != "trainable rows").eval()
    keep_base_casts(layer)
    x = torch.randn(2, 9, 24)
    graphs = []

    def backend(gm, inputs):
        graphs.append(gm)
        return gm.forward

    with use_path("dense"), torch.no_grad():
        eager = layer(x) if case != "frozen, compiled first" else None  # an eager call keeps the copy
        compiled = torch.compile(layer, backend=backend, fullgraph=True)
        out = compiled(x)
        assert len(graphs) == 1
        assert_naive(layer, x, out, False)
        called = [str(node.target) for node in graphs[0].graph.nodes if node.op in ("call_function", "call_method")]
        stacks = [name for name in called if re.search(r"\b(cat|concat|stack)\b", name)]
        products = sum(bool(re.search(r"\b(addmm_?|mm|linear)\b", name)) for name in called)
        if case == "frozen, eager first":
            assert torch.equal(out, eager) and products == 2 and not stacks  # [W x + b | p], then + c B
        elif case == "frozen, compiled first":
            assert products == 3 and not stacks and not layer._stacked  # no copy made while tracing
        else:  # an optimizer's in-place step would not reach a kept copy read by the graph: read apart
            assert products == 3
            with torch.no_grad():
                layer.new_keys.add_(1.0)
            assert_naive(layer, x, compiled(x), False)


@pytest.mark.parametrize("update", [".data", "fused Adam"])
def test_a_bank_with_trainable_rows_is_never_stacked_so_an_update_its_versions_miss_is_seen(update):
    """DeepSpeed's optimizers step ``p.data``; a fused optimizer's kernel writes in place: neither
    bumps the rows' versions, so a kept copy of them would be read stale. The rows are read where they live."""
    layer = grown(frozen=False).eval()
    keep_base_casts(layer)
    x = torch.randn(2, 9, 24)
    optimizer = torch.optim.Adam(layer.parameters(), lr=0.5, fused=True)
    with use_path("dense"):
        call(layer, x, False)
        if update == ".data":
            layer.new_keys.data.add_(0.5)
            layer.new_values.data.mul_(-2.0)
        else:
            layer.train()
            layer(x).square().sum().backward()
            optimizer.step()
            layer.eval()
        out = call(layer, x, False)
    assert_naive(layer, x, out, False)
    assert not layer._stacked and layer._plan is None


def test_stack_base_refuses_rows_of_other_widths():
    with pytest.raises(ValueError, match=r"expected keys \[R, 24\]"):
        stack_base(torch.zeros(20, 24), None, torch.zeros(6, 23), torch.zeros(6, 20), torch.float32)


# ---------------------------------------------------------------- several layers over one input (q, k, v)
def three_layers(frozen=True):
    """Three MoRAM layers over bases reading the same 24 features: q, k, v-like (two with a bias)."""
    layers = [grown(d_out=20, tasks=3, seed=0, frozen=frozen), grown(d_out=16, tasks=2, seed=1, frozen=frozen),
              grown(d_out=20, tasks=1, seed=2, frozen=frozen)]  # (no bank of 24 atoms: the input's width)
    layers[1].base.bias = None
    return [layer.eval() for layer in layers]


@pytest.mark.parametrize("path", GPU_PATHS)
@pytest.mark.parametrize("amp", [False, True])
def test_layers_read_together_give_each_layers_own_output_from_one_gemm(path, amp):
    layers = three_layers()
    x = torch.randn(2, 9, 24)
    with use_path(path):
        alone = [call(layer, x, amp) for layer in layers]  # the option off: each read apart
        keep_base_casts(nn.ModuleList(layers))
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            read_together(layers, x)  # the first call keeps the group's copy
            with Gemms() as gemms:
                together = read_together(layers, x)
    for layer, out, expected in zip(layers, together, alone):
        assert out.shape == expected.shape and out.dtype == expected.dtype and out.is_contiguous()
        assert_naive(layer, x, out, amp)
        # (float32: one GEMM over the three weights may sum in another order than three GEMMs, the
        # BLAS choosing its kernel by shape, and the softmax moves by 1 / tau times a projection's
        # rounding: 1.01e-6 apart on an AMD EPYC's BLAS, within assert_naive's 1e-5 of float64)
        torch.testing.assert_close(out, expected, rtol=0, atol=2e-2 if amp else 1e-5)
    widths = [layer.out_features + layer.num_atoms for layer in layers]
    reads = [shape for shape in gemms.shapes if shape[0] == (18, 24)]
    assert reads == [((18, 24), (18, sum(widths)))]  # the input read once, by one GEMM
    assert len(gemms.shapes) == 1 + (len(layers) if path == "dense" else 0)  # and a read-out each (Triton: kernels)
    group = layers[0]._stacked[torch.bfloat16 if amp else torch.float32][3]
    assert all(layer._stacked[key][3] is group for layer in layers for key in layer._stacked)  # one copy
    assert all(part.weight_keys_t._base is group.weight_keys_t._base for part in group.parts)


def test_a_group_is_refused_where_a_bank_has_trainable_rows_or_a_layer_has_hooks():
    x = torch.randn(5, 24)
    layers = three_layers()
    layers[2].expand()  # a task still trainable: never stacked
    keep_base_casts(nn.ModuleList(layers))
    with use_path("dense"), torch.no_grad():
        assert read_together(layers, x) is None and not any(layer._stacked for layer in layers)
    layers = three_layers()
    keep_base_casts(nn.ModuleList(layers))
    seen = []
    handle = layers[1].register_forward_hook(lambda module, inputs, out: seen.append(out))
    with use_path("dense"), torch.no_grad():
        assert read_together(layers, x) is None  # its call is made, and runs the hook
        handle.remove()
        assert read_together(layers, x) is not None
        layers[0].forward = functools.partial(type(layers[0]).forward, layers[0])  # (as accelerate wraps it)
        assert read_together(layers, x) is None  # its call is made, through the wrapper
        del layers[0].forward
        assert read_together(layers, x) is not None
        with nn.modules.module.register_module_forward_pre_hook(lambda module, inputs: None):
            assert read_together(layers, x) is None


def test_the_group_is_built_again_when_one_layer_changes_and_refused_where_a_call_would_not_stack():
    layers = three_layers()
    x = torch.randn(5, 24)
    keep_base_casts(nn.ModuleList(layers))
    with use_path("dense"), torch.no_grad():
        read_together(layers, x)
        group = layers[0]._stacked[torch.float32][3]
        layers[1].base.weight.mul_(-1)  # one base edited in place
        outs = read_together(layers, x)
        assert layers[0]._stacked[torch.float32][3] is not group
        for layer, out in zip(layers, outs):
            assert_naive(layer, x, out, False)
        assert read_together(layers + [nn.Linear(24, 4)], x) is None  # not every layer is MoRAM's
        assert read_together(layers, torch.randn(5, 23)) is None  # an input they refuse: their own error
    with use_path("reference"), torch.no_grad():
        assert read_together(layers, x) is None  # a CPU path reads the base apart
    with use_path("dense"):
        assert read_together(layers, x) is None  # grad mode on: a backward may follow
        keep_base_casts(nn.ModuleList(layers), False)
        with torch.no_grad():
            assert read_together(layers, x) is None  # the option off
