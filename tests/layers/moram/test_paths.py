"""The paths of MoRAM's layer (layers/moram/paths): the one chooser, the one switch, and what the GPU paths promise.

Every path's numbers against the naive reference are checked by test_layer.py (each of its
tests runs on reference, dense and triton). Here: which path runs where, that a forced path that
cannot run says so, that the GPU paths never make a GPU wait for the host (every operator one
forward and one backward dispatch, read on the CPU), how few operators they dispatch, the bank
cast once per dtype, the Triton kernels on hand cases, and the dense path traced whole by
torch.compile.
"""

import copy
import pickle
import types
import warnings

import pytest
import torch
from torch import nn

from moram_avalanche.layers.moram import paths as moram_paths
from moram_avalanche.layers.moram.layer import MoRAMLinear
from moram_avalanche.layers.moram.naive import naive_mixture
from moram_avalanche.layers.moram.paths import PATH_VARIABLE, kernels_for, path_name, switch, use_path
from moram_avalanche.layers.moram.paths import cpu_kernel as routing_kernel
from moram_avalanche.layers.moram.paths import triton as moram_triton
from moram_avalanche.layers.moram.paths.reference import GATED_TORCH_KERNELS
from moram_avalanche.text.layer import DropoutMoRAMLinear
from moram_avalanche.utils.dispatch import OpCounter
from tiny_layers import grown, naive_of

needs_interpreter = pytest.mark.skipif(not moram_triton.usable(torch.empty(0)),
                                       reason="Triton's interpreter is off (TRITON_INTERPRET=1 not set early)")


def tokens_like(device):
    return types.SimpleNamespace(device=torch.device(device))


# ---------------------------------------------------------------- the one choice
def test_auto_picks_by_device(monkeypatch):
    monkeypatch.delenv(PATH_VARIABLE, raising=False)
    monkeypatch.setattr(routing_kernel, "built", lambda: None)
    assert path_name(torch.zeros(2, 3), 40, 4, gated=True) == "reference"
    monkeypatch.setattr(routing_kernel, "built", lambda: object())
    assert path_name(torch.zeros(2, 3), 40, 4, gated=True) == "cpu-kernel"
    monkeypatch.setattr(moram_triton, "_INSTALLED", True)
    assert path_name(tokens_like("cuda"), 160, 16, gated=True) == "triton"
    assert path_name(tokens_like("cuda"), moram_triton.MAX_ATOMS + 1, 16, gated=True) == "dense"
    assert path_name(tokens_like("mps"), 160, 16, gated=True) == "dense"
    monkeypatch.setattr(moram_triton, "_INSTALLED", False)
    assert path_name(tokens_like("cuda"), 160, 16, gated=True) == "dense"


def test_the_variable_and_use_path_force_a_path_and_bad_names_are_refused(monkeypatch):
    monkeypatch.setenv(PATH_VARIABLE, "Dense")
    assert path_name(torch.zeros(2, 3), 40, 4, gated=True) == "dense"
    with use_path("reference"):  # wins over the variable, and restores it
        assert path_name(torch.zeros(2, 3), 40, 4, gated=True) == "reference"
    assert path_name(torch.zeros(2, 3), 40, 4, gated=True) == "dense"
    monkeypatch.setenv(PATH_VARIABLE, "gpu")
    with pytest.raises(ValueError, match="MORAM_AVALANCHE_PATH: unknown MoRAM path 'gpu', expected auto or one of reference, cpu-kernel"):
        path_name(torch.zeros(2, 3), 40, 4, gated=True)
    with pytest.raises(ValueError, match="use_path.*unknown MoRAM path 'fast'"):
        use_path("fast").__enter__()


def test_no_cpu_kernel_is_auto_without_the_compiled_kernel(monkeypatch):
    monkeypatch.delenv(PATH_VARIABLE, raising=False)
    monkeypatch.setattr(routing_kernel, "_module", types.SimpleNamespace())  # a kernel already built
    monkeypatch.setattr(moram_triton, "_INSTALLED", True)
    cpu = torch.zeros(2, 3)

    def without_the_kernel():
        assert routing_kernel.mode() == "off" and routing_kernel.built() is None
        assert path_name(cpu, 40, 4, gated=True) == "reference"
        assert kernels_for(cpu, 40, 4, gated=True) == GATED_TORCH_KERNELS
        assert path_name(tokens_like("cuda"), 160, 16, gated=True) == "triton"  # the GPU's pick is untouched

    assert routing_kernel.mode() == "auto" and path_name(cpu, 40, 4, gated=True) == "cpu-kernel"
    with use_path("no-cpu-kernel"):
        without_the_kernel()
    monkeypatch.setenv(PATH_VARIABLE, "No_CPU_Kernel")
    without_the_kernel()


@pytest.mark.parametrize("old, new", [("off", "no-cpu-kernel"), ("0", "no-cpu-kernel"), ("on", "cpu-kernel"),
                                      ("TRUE", "cpu-kernel"), ("auto", "auto")])
def test_the_old_kernel_variable_is_read_until_0_8_and_says_what_replaces_it(monkeypatch, old, new):
    monkeypatch.setattr(switch, "_warned", set())
    monkeypatch.delenv(PATH_VARIABLE, raising=False)
    monkeypatch.setenv(switch.KERNEL_VARIABLE, old)
    with pytest.warns(DeprecationWarning, match=f"MORAM_AVALANCHE_KERNEL is deprecated.*MORAM_AVALANCHE_PATH={new}$"):
        assert switch.requested() == new
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per process
        assert switch.requested() == new
    monkeypatch.setenv(PATH_VARIABLE, "dense")  # the new variable wins
    with pytest.warns(DeprecationWarning, match="MORAM_AVALANCHE_PATH is set too and wins"):
        assert switch.requested() == "dense"
    with use_path("reference"):  # and use_path over both
        assert switch.requested() == "reference"


def test_a_forced_path_that_cannot_run_says_why(monkeypatch):
    layer = grown()
    x = torch.randn(3, 24)
    monkeypatch.setattr(routing_kernel, "built", lambda: None)
    with use_path("cpu-kernel"), pytest.raises(RuntimeError, match=r"cpu_kernel.load\(\) first"):
        layer(x)
    monkeypatch.setattr(moram_triton, "interpreting", lambda: False)
    with use_path("triton"), pytest.raises(RuntimeError, match="TRITON_INTERPRET=1"):
        layer(x)
    monkeypatch.setattr(moram_triton, "_INSTALLED", False)
    with use_path("triton"), pytest.raises(RuntimeError, match="Triton is not installed"):
        layer(x)


# ---------------------------------------------------------------- no host synchronisation
def forward_backward(layer, x, training, amp):
    """Op counters of one forward and one backward (eval: no backward) of ``layer`` on ``x``."""
    layer.train(training)
    x = x.clone().requires_grad_(training)
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
        with OpCounter() as forward:
            out = layer(x)
    backward = OpCounter()
    if training:
        upstream = torch.randn_like(out)
        with backward:
            out.backward(upstream)
    return forward, backward


@pytest.mark.parametrize("path", ["dense", pytest.param("triton", marks=needs_interpreter)])
@pytest.mark.parametrize("training", [False, True])
@pytest.mark.parametrize("amp", [False, True])
def test_the_gpu_paths_never_wait_for_the_device(path, training, amp):
    layer = grown(frozen=not training)  # eval after a task (frozen bank), training with a task's atoms
    layer.start_recording()  # the strategy records while training: the statistics must not wait either
    with use_path(path):
        forward, backward = forward_backward(layer, torch.randn(2, 9, 24), training, amp)
    assert forward.host_syncs() == [] and backward.host_syncs() == []
    assert forward.counts["aten::mm"] + forward.counts["aten::addmm"] >= 2  # the counter saw the GEMMs


def test_the_sparse_reference_path_synchronises_at_eval_and_the_counter_sees_it():
    layer = grown()
    with use_path("reference"):
        forward, _ = forward_backward(layer, torch.randn(2, 9, 24), False, False)
    assert "aten::index" in forward.host_syncs()  # the gated read-out's boolean indexing


def test_the_counter_names_each_kind_of_synchronisation():
    x = torch.randn(5)
    with OpCounter() as ops:
        x.sum().item()
        torch.nonzero(x > 0)
        x[x > 0]
        x.index_put_((x > 0,), torch.tensor(1.0))  # a mask and a tensor: it waits
        torch.unique(x)
        x.index_select(0, torch.tensor([0, 2]))  # an integer index: no wait
        x[torch.tensor([1, 3])]                  # nor here
    assert ops.host_syncs() == ["aten::_local_scalar_dense", "aten::nonzero", "aten::index", "aten::index_put_",
                                "aten::_unique2"]
    with OpCounter() as scalar:
        x[x > 0] = 0.0  # a scalar: masked_fill_, no wait (torch 2.15); torch 2.11 still calls index_put_
    assert scalar.host_syncs() in ([], ["aten::index_put_"])


@pytest.fixture
def stub_kernels(monkeypatch):
    """The Triton launches replaced by no-ops: what remains is what the path asks of PyTorch."""
    launches = []

    class Launcher:
        def __init__(self, name):
            self.name = name

        def __getitem__(self, grid):
            return lambda *args, **kwargs: launches.append(self.name)

    monkeypatch.setattr(moram_triton, "_kernels", lambda: types.SimpleNamespace(
        route_forward_kernel=Launcher("forward"), route_backward_kernel=Launcher("backward"),
        route_read_out_kernel=Launcher("read-out")))
    monkeypatch.setattr(moram_triton, "usable", lambda tensor: True)
    return launches


GEMMS = ("aten::mm", "aten::addmm", "aten::addmm_")


@pytest.mark.parametrize("rows", ["few", "many"])
def test_the_triton_path_at_eval_is_two_gemms_and_the_read_out_kernel_or_three_and_the_routing(stub_kernels, rows,
                                                                                                monkeypatch):
    if rows == "many":  # more rows than a decode step's (triton.READ_OUT_ROWS): routed, then a GEMM read-out
        monkeypatch.setattr(moram_triton, "READ_OUT_ROWS", 0)
    layer = grown().eval()
    x = torch.randn(2, 9, 24)
    with use_path("triton"), torch.no_grad():
        with OpCounter() as fp32:
            layer(x)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            layer(x)  # casts the bank once
            with OpCounter() as bf16:
                layer(x)
    assert stub_kernels == ["forward" if rows == "many" else "read-out"] * 3
    # the coefficients, or y (new_empty: a planned call's, made in the call's shape)
    written = ("aten::empty_like",) if rows == "many" else ("aten::empty", "aten::new_empty")
    for ops in (fp32, bf16):
        # p = A x; W x + b; (+ c B, or in the read-out kernel)
        assert sum(ops.counts[name] for name in GEMMS) == (3 if rows == "many" else 2)
        assert sum(ops.counts[name] for name in written) == 1  # what the kernel writes
    # besides views, fp32 adds nothing; bf16 only the casts nn.Linear makes under autocast too
    # (input, weight, bias): the bank is not cast again
    assert {name for name in fp32.counts if name not in GEMMS} <= {"aten::view", "aten::t", *written}
    assert bf16.counts["aten::_to_copy"] == 3


def test_the_triton_training_step_dispatches_a_few_gemms_and_one_kernel_each_way(stub_kernels):
    layer = grown(frozen=False)
    with use_path("triton"):
        forward, backward = forward_backward(layer, torch.randn(2, 9, 24), True, False)
    assert stub_kernels == ["forward", "backward"]
    assert sum(forward.counts[name] for name in GEMMS) == 3
    # dL/dc = g B^T, dL/dB_tail, dL/dx = dL/dp A (+ g W), dL/dA_tail
    assert sum(backward.counts[name] for name in GEMMS) == 5
    assert forward.total <= 14 and backward.total <= 22


# ---------------------------------------------------------------- the bank, cast once per dtype
def casts_of(ops_list):
    return sum(ops.counts["aten::_to_copy"] for ops in ops_list)


def test_a_frozen_bank_is_cast_once_per_dtype_then_reused(stub_kernels):
    layer = grown().eval()
    x = torch.randn(2, 9, 24)
    counters = []
    with use_path("triton"), torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        for _ in range(3):
            with OpCounter() as ops:
                layer(x)
            counters.append(ops)
    # first call: input, weight, bias and the bank's keys and values; then only the first three
    assert [ops.counts["aten::_to_copy"] for ops in counters] == [5, 3, 3]
    keys, values = layer.frozen_rows(torch.bfloat16)
    assert keys.dtype == values.dtype == torch.bfloat16 and torch.equal(keys, layer.frozen_keys.bfloat16())


def test_the_cast_copy_follows_every_change_of_the_bank():
    layer = grown()
    keys = layer.frozen_rows(torch.bfloat16)[0]
    assert layer.frozen_rows(torch.bfloat16)[0] is keys
    with torch.no_grad():
        layer.frozen_keys.mul_(2)  # an in-place edit bumps the buffer's version
    assert torch.equal(layer.frozen_rows(torch.bfloat16)[0], layer.frozen_keys.bfloat16())
    assert not torch.equal(layer.frozen_rows(torch.bfloat16)[0], keys)
    layer.expand()
    layer.freeze()  # new buffers
    assert layer.frozen_rows(torch.bfloat16)[0].shape[0] == layer.num_atoms
    layer.double()  # .to() replaces the buffers
    assert torch.equal(layer.frozen_rows(torch.bfloat16)[0], layer.frozen_keys.bfloat16())
    assert layer.frozen_rows(torch.float64)[0] is layer.frozen_keys  # its own dtype: no copy


@pytest.mark.parametrize("amp", [False, True])
@pytest.mark.parametrize("frozen", [True, False])
def test_the_kept_rows_follow_a_swapped_data(frozen, amp):
    """``.data`` swapped for another storage keeps the tensor object and its version: the copies kept
    of the rows (a frozen bank's cast, the joined copy beside trainable rows, the live rows) see its
    pointer move and are made again."""
    layer = grown(frozen=frozen).eval()
    x = torch.randn(3, 24)
    with use_path("dense"), torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
        before = layer(x)
        layer.frozen_keys.data = layer.frozen_keys.data * -1
        layer.frozen_values.data = layer.frozen_values.data * 2
        after = layer(x)
    tolerance = 3e-2 if amp else 1e-5
    assert not torch.equal(after, before)
    torch.testing.assert_close(after.double(), naive_of(layer, x), rtol=tolerance, atol=tolerance)


def test_a_bank_without_storage_keeps_no_copy():
    """Under a ``torch.func`` transform the rows are wrappers without storage, made anew at each
    call (no data pointer to check a copy against): read, never kept."""
    layer = grown()

    class Rows(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = layer

        def forward(self, dtype):
            return self.layer.frozen_bank(dtype).keys.float()

    keys = torch.stack([layer.frozen_keys, -layer.frozen_keys])
    out = torch.func.vmap(lambda k: torch.func.functional_call(Rows(), {"layer.frozen_keys": k}, (torch.bfloat16,)))(keys)
    assert torch.equal(out, keys.bfloat16().float()) and layer._cast_rows == {}


def test_cast_copies_are_not_pickled_or_deep_copied():
    layer = grown()
    layer.frozen_rows(torch.bfloat16)
    assert layer._cast_rows
    for twin in (copy.deepcopy(layer), pickle.loads(pickle.dumps(layer))):
        assert twin._cast_rows == {}
        torch.testing.assert_close(twin.eval()(torch.ones(2, 24)), layer.eval()(torch.ones(2, 24)))


def test_a_layer_pickled_before_new_value_scale_existed_still_loads():
    layer = grown()
    state = layer.__getstate__()
    del state["new_value_scale"], state["_cast_rows"]
    twin = MoRAMLinear.__new__(MoRAMLinear)
    twin.__setstate__(state)
    assert twin.new_value_scale == 1.0
    torch.testing.assert_close(twin.eval()(torch.ones(2, 24)), layer.eval()(torch.ones(2, 24)))


# ---------------------------------------------------------------- the Triton kernels on hand cases
@needs_interpreter
def test_triton_forward_keeps_the_k_largest_ties_to_the_lower_index():
    proj = torch.tensor([[1.0, 3.0, 3.0, 3.0, -5.0],
                         [0.0, 0.0, 0.0, 0.0, 0.0],   # a zero token: norm clamped, every c = 0
                         [2.0, -1.0, 0.5, 4.0, 4.0]])
    coef, weights, _ = moram_triton.route_forward(proj, 2, 1.0, None, want_weights=True)
    kept = weights > 0
    assert kept[0].tolist() == [False, True, True, False, False]
    assert kept[2].tolist() == [False, False, False, True, True]
    torch.testing.assert_close(weights[0, 1:3], torch.tensor([0.5, 0.5]))
    assert torch.equal(coef[1], torch.zeros(5))
    torch.testing.assert_close(coef, weights * proj)


@needs_interpreter
@pytest.mark.parametrize("rows, atoms, k, threshold", [(1, 2, 2, None), (7, 17, 16, 0.2), (70, 33, 5, None),
                                                         (3, 300, 16, 0.1), (5, 12, 12, 0.3)])
def test_triton_forward_weights_equal_the_naive_mixture(rows, atoms, k, threshold):
    torch.manual_seed(rows + atoms)
    proj = torch.randn(rows, atoms, dtype=torch.float64)
    coef, weights, state = moram_triton.route_forward(proj, k, 0.05, threshold, want_weights=True, want_state=True)
    expected = naive_mixture(proj, topk=k, temperature=0.05, threshold=threshold or 0.0,
                             training=threshold is None)
    torch.testing.assert_close(weights.double(), expected, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(coef, expected * proj, rtol=1e-12, atol=1e-12)
    only, _ = moram_triton.route_backward(None, proj, state, k, 0.05, threshold, want_coef=True)[::-1]
    assert torch.equal(only, coef)  # the backward's recomputed coefficients are the forward's


# ---------------------------------------------------------------- the rest of the layer family
@pytest.mark.parametrize("path", ["reference", "dense", pytest.param("triton", marks=needs_interpreter)])
def test_every_path_records_the_same_statistics(path):
    layer = grown(frozen=False)
    x = torch.randn(3, 8, 24)
    expected = grown(frozen=False)
    expected.start_recording()
    with use_path("reference"):
        expected.train()(x)
    layer.start_recording()
    with use_path(path):
        layer.train()(x)
    torch.testing.assert_close(layer.atom_mass, expected.atom_mass, rtol=1e-5, atol=1e-6)
    assert torch.equal(layer.atom_hits, expected.atom_hits)


@pytest.mark.parametrize("path", ["dense", pytest.param("triton", marks=needs_interpreter)])
def test_the_text_layer_with_dropout_takes_the_same_paths(path):
    torch.manual_seed(0)
    layer = DropoutMoRAMLinear(nn.Linear(16, 12), atoms_per_task=4, topk=3, dropout=0.25)
    for _ in range(2):
        layer.expand()
        with torch.no_grad():
            layer.new_values.normal_()
    x = torch.randn(5, 16)
    results = []
    for chosen in ("reference", path):
        torch.manual_seed(7)  # the same dropout mask
        xx = x.clone().requires_grad_()
        with use_path(chosen):
            out = layer.train()(xx)
            out.square().sum().backward()
        results.append((out.detach(), xx.grad, layer.new_keys.grad.clone(), layer.new_values.grad.clone()))
        layer.zero_grad(set_to_none=True)
    for got, want in zip(*results):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


def test_the_dense_path_is_traced_whole_by_torch_compile():
    layer = grown(frozen=True).eval()
    x = torch.randn(2, 5, 24)
    with use_path("dense"):
        expected = layer(x)
        compiled = torch.compile(layer, fullgraph=True, backend="eager")  # a graph break is an error
        with torch.no_grad():
            torch.testing.assert_close(compiled(x), expected)
        with torch.autocast("cpu", dtype=torch.bfloat16):  # the bank cast once, inside the traced call
            amp = layer(x)
            layer._cast_rows.clear()
            with torch.no_grad():
                torch.testing.assert_close(compiled(x), amp)
        assert set(layer._cast_rows) == {torch.bfloat16}
        layer.expand()
        with torch.no_grad():
            layer.new_values.normal_()
        layer.train()
        expected, out = layer(x), compiled(x)
        torch.testing.assert_close(out, expected)
        out.sum().backward()
        assert layer.new_keys.grad is not None and torch.isfinite(layer.new_keys.grad).all()


def test_paths_lists_what_the_module_documents():
    assert moram_paths.PATHS == ("reference", "cpu-kernel", "dense", "triton")
    for name in moram_paths.PATHS:
        assert f"``{name}``" in moram_paths.__doc__


@pytest.mark.parametrize("version, expected", [("3.6.0", False), ("3.7.1", True), ("3.10.0", True),
                                               ("2.3.1", False), ("dev", None)])
def test_which_triton_keeps_rows_in_their_warp_is_read_from_its_version(monkeypatch, version, expected):
    import importlib.metadata

    monkeypatch.setattr(moram_triton, "_INSTALLED", True)
    monkeypatch.setattr(importlib.metadata, "version", lambda name: version if name == "triton" else None)
    assert moram_triton.rows_stay_in_their_warp() is expected
    monkeypatch.setattr(moram_triton, "_INSTALLED", False)
    assert moram_triton.rows_stay_in_their_warp() is None


@pytest.mark.skipif(not moram_triton.installed(), reason="Triton is not installed")
def test_the_triton_kernels_compile_for_hopper_gpus_without_one():
    """Triton's own compiler, to cubin for sm_90 (H100 / H200), in a process without the
    interpreter: catches what the interpreter lets through (a loop-carried value changing shape
    did, before this check existed)."""
    import os
    import re
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).with_name("compile_triton_for_gpu.py")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parents[3]), env.get("PYTHONPATH", "")])
    result = subprocess.run([sys.executable, str(script), "90"], capture_output=True, text=True, env=env,
                            timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr[-3000:]
    assert result.stdout.count("ok ") == 3  # the forward, the backward, the eval read-out
    # its report: at the CLIP tower's shape, nothing spills
    tower = [line for line in result.stdout.split("CLIP tower")[1].split("LLaMA")[0].splitlines()[1:] if line.strip()]
    assert len(tower) == 9 and all(" 0 B spilled" in line for line in tower), tower
    read_out = result.stdout.split("read-out (route_read_out_kernel")[1]
    decode = [line for line in read_out.split("CLIP tower")[0].splitlines()[1:] if "read-out" in line]
    assert len(decode) == 18 and all(" 0 B spilled" in line for line in decode)
    if moram_triton.rows_stay_in_their_warp() is False:  # Triton 3.6 and older (docs/concepts/gpu-path.md)
        eval_forward = [line for line in tower if line.split()[0] == "bf16" and "eval" in line]
        assert eval_forward and "  0 B shared   0 bar" not in eval_forward[0]  # (what the flag says, seen)
        return
    # and in bfloat16 (where users run) the eval forward and the backward keep each row in its warp:
    # no barrier, no shared memory
    for line in tower:
        if line.split()[0] == "bf16" and ("eval" in line or "backward" in line):
            assert "  0 B shared   0 bar" in line, line
    # and every kernel there holds a thread in at most 48 registers, for at least 75% of sm_90's warps
    # (the estimate: ~40 registers; the kernels it measured took 104-215, for 12-25%)
    for line in tower:
        registers, occupancy = re.search(r"(\d+) regs .* occupancy +(\d+)%", line).groups()
        assert int(registers) <= 48 and int(occupancy) >= 75, line
    # the eval read-out (issue 44: a decode step's second kernel) at LLaMA-3.2-1B's decode shapes:
    # at most 64 registers a thread, no shared memory, no barrier
    assert all("  0 B shared   0 bar" in line for line in decode)
    assert all(int(re.search(r"(\d+) regs", line).group(1)) <= 64 for line in decode), decode
