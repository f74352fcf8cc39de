"""The Triton routing kernels (layers/moram/paths/triton_kernels.py, launched by paths/triton.py) against
independent expectations, in every dtype the GPU path launches (bfloat16, float16, float32) and float64.

On a GPU, or under Triton's interpreter (``TRITON_INTERPRET=1``, set by conftest.py on a machine
without one):
the kept set the forward saves is ``torch.topk``'s, ties to the lower column, in the order of a stable
descending sort (many ties, ``-0.0`` beside ``+0.0``, rows past a program's end, a zero row, banks
narrower and wider than a warp's row); the coefficients, weights and ``dL/dp`` equal a float64
statement of steps 2-5 on that set, differentiated by autograd (within the routing dtype's
rounding); the backward's coefficients are the forward's. Without the interpreter: the launch
gives each warp whole rows, and ``torch.compile(fullgraph=True)`` captures a layer on the Triton
path whole, one kernel each way, and the eval read-out after a stacked GEMM as that GEMM and one
kernel (fake CUDA tensors, in a process of its own). The read-out's arithmetic:
test_triton_read_out.py.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from moram_avalanche.layers.moram.paths import triton as moram_triton

#: where the kernels run: the GPU where there is one (scripts/gpu_check.sh runs tests/layers there),
#: else the CPU under Triton's interpreter
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
needs_interpreter = pytest.mark.skipif(not moram_triton.usable(torch.empty(0, device=DEVICE)),
                                       reason="no GPU, and Triton's interpreter is off (TRITON_INTERPRET=1 not set early)")

DTYPES = [torch.bfloat16, torch.float16, torch.float32, torch.float64]
TAU = 0.05
#: (the weights, the coefficients in the projections' dtype) relative tolerances: the routing runs
#: in float32 for 16- and 32-bit projections (float64 for float64), the coefficients are stored in
#: the projections' dtype
TOLERANCE = {torch.bfloat16: (2e-5, 1e-2), torch.float16: (2e-5, 2e-3), torch.float32: (2e-5, 2e-5),
             torch.float64: (1e-12, 1e-12)}


def tied_projections(rows, atoms, dtype, seed=0):
    """Projections with many ties: multiples of 1/4 in [-1, 1] (exact in every dtype), a third of
    the zeros negative, the last row zero, the row before it all equal."""
    gen = torch.Generator().manual_seed(seed)
    proj = torch.randint(-4, 5, (rows, atoms), generator=gen).double() / 4
    zeros = proj == 0
    proj[zeros & (torch.rand(rows, atoms, generator=gen) < 1 / 3)] = -0.0
    proj[-1] = 0.0
    if rows > 1:
        proj[-2] = 0.5
    return proj.to(dtype)


def expected_kept(proj, k):
    """The ``k`` largest entries of each row, largest first, ties to the lower column: a stable sort
    (``-0.0 == +0.0`` in its comparisons, as in ``torch.topk``'s)."""
    return torch.sort(proj.double(), dim=1, descending=True, stable=True).indices[:, :k]


def reference_coef(proj, kept, threshold):
    """Steps 2-5 in float64 on the kept set ``kept`` ``[N, k]``: dense ``c = w * p`` and ``w`` ``[N, R]``
    (the reference path's module docstring states them)."""
    norm = torch.linalg.vector_norm(proj, dim=1, keepdim=True).clamp_min(1e-12)
    relevance = proj.gather(1, kept) / norm
    weights = torch.softmax(relevance / TAU, dim=1)
    if threshold is not None:
        weights = weights * (relevance >= threshold)
    dense = torch.zeros_like(proj).scatter(1, kept, weights)
    return dense * proj, dense


def kept_of(state, rows, atoms):
    """The kept columns the forward saved, as int64 on the CPU (all of them where every atom is kept)."""
    kept, norm = state
    assert kept.dtype == torch.int16 and norm.shape == (rows,)
    return kept.long().cpu() if kept.shape[1] else torch.arange(atoms).expand(rows, atoms)


def forward(proj, k, threshold):
    """``(c, w, state)`` of the forward on ``DEVICE``, ``c`` and ``w`` back on the CPU."""
    coef, weights, state = moram_triton.route_forward(proj.to(DEVICE), k, TAU, threshold, want_weights=True,
                                                      want_state=True)
    return coef.cpu(), weights.cpu(), state


# ---------------------------------------------------------------- step 3: the kept set
@needs_interpreter
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("rows, atoms, k", [(9, 5, 2), (37, 17, 16), (37, 160, 16), (21, 120, 4), (13, 300, 5),
                                            (3, 1100, 16)])
def test_the_saved_kept_set_is_the_stable_top_k(dtype, rows, atoms, k, block_order):
    proj = tied_projections(rows, atoms, dtype, seed=atoms + k)
    coef, weights, state = forward(proj, k, None)
    kept = kept_of(state, rows, atoms)
    assert torch.equal(kept, expected_kept(proj, k))  # the same columns, in the same order
    off = torch.ones(rows, atoms, dtype=torch.bool).scatter(1, kept, False)
    assert (coef[off] == 0).all() and (weights[off] == 0).all()
    assert (weights.gather(1, kept) > 0).all()  # tau = 0.05 and |s| <= 1: no kept weight underflows
    torch.testing.assert_close(state[1].cpu().double(), torch.linalg.vector_norm(proj.double(), dim=1).clamp_min(1e-12))


@needs_interpreter
def test_a_negative_zero_ties_with_a_positive_one_and_the_lower_column_wins():
    proj = torch.tensor([[-0.0, 0.0, -1.0, 0.0], [0.0, -0.0, -0.0, -2.0]])
    for dtype in DTYPES:
        _, _, state = forward(proj.to(dtype), 2, None)
        assert state[0].tolist() == [[0, 1], [0, 1]], dtype


@needs_interpreter
@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning", "ignore:invalid value:RuntimeWarning")
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_the_kept_set_spans_the_whole_range_of_keys(dtype):  # (the norms overflow: NumPy warns, a GPU does not)
    """The dtype's extremes (infinities, the largest and the least positive numbers of either sign,
    both zeros) in shuffled rows: the keys reach both ends of their integer type, where a wrong
    wrap of the rounds' ``(top - 1) - key`` would misorder them."""
    info = torch.finfo(dtype)
    extremes = torch.tensor([float("inf"), -float("inf"), info.max, -info.max, info.tiny, -info.tiny,
                             info.smallest_normal * info.eps, -info.smallest_normal * info.eps, 0.0, -0.0, 1.0, -1.0],
                            dtype=torch.float64).to(dtype)
    gen = torch.Generator().manual_seed(7)
    proj = torch.stack([extremes[torch.randperm(len(extremes), generator=gen)] for _ in range(6)])
    for k in (2, 5, len(extremes) - 1):
        _, _, state = forward(proj, k, None)
        assert torch.equal(kept_of(state, *proj.shape), expected_kept(proj, k)), k


# ---------------------------------------------------------------- steps 2-5 and the backward against float64
@needs_interpreter
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("threshold", [None, 0.2])
@pytest.mark.parametrize("rows, atoms, k", [(37, 160, 16), (10, 120, 4), (6, 12, 12)])
def test_forward_and_backward_equal_the_float64_reference(dtype, threshold, rows, atoms, k, block_order):
    gen = torch.Generator().manual_seed(atoms)
    proj = torch.randn(rows, atoms, generator=gen).to(dtype)
    proj[-1] = 0.0  # a zero token: the norm clamped, every c = 0, no gradient through the norm
    upstream = torch.randn(rows, atoms, generator=gen).to(dtype)
    coef, weights, state = forward(proj, k, threshold)
    grad, coef_again = moram_triton.route_backward(upstream.to(DEVICE), proj.to(DEVICE), state, k, TAU, threshold,
                                                   want_coef=True)
    grad, coef_again = grad.cpu(), coef_again.cpu()

    kept = kept_of(state, rows, atoms)
    assert torch.equal(kept.sort(1).values, expected_kept(proj, k).sort(1).values)
    exact = proj.double().requires_grad_()
    expected_coef, expected_weights = reference_coef(exact, kept, threshold)
    expected_coef.backward(upstream.double())
    weight_tolerance, coef_tolerance = TOLERANCE[dtype]
    torch.testing.assert_close(weights.double(), expected_weights.detach(), rtol=weight_tolerance, atol=1e-7)
    torch.testing.assert_close(coef.double(), expected_coef.detach(), rtol=coef_tolerance, atol=1e-7)
    scale = exact.grad.abs().max().item()  # dL/dp runs to 1 / tau times the rest: rounding is relative to it
    torch.testing.assert_close(grad.double(), exact.grad, rtol=coef_tolerance, atol=coef_tolerance * scale)
    assert torch.equal(coef_again, coef)  # the backward's coefficients are the forward's, bit for bit


# ---------------------------------------------------------------- the launch and the captured graph
@pytest.mark.parametrize("atoms, k, itemsize, expected", [
    (160, 16, 2, moram_triton.Launch((3152,), 4, 1, 256, 32, 4)),   # CLIP tower, bf16: a row of 256 per warp
    (160, 16, 4, moram_triton.Launch((3152,), 4, 2, 128, 32, 4)),   # float32: two slices of 128 per warp
    (120, 4, 2, moram_triton.Launch((3152,), 4, 4, 32, 32, 4)),     # LLaMA-1B, bf16: rows not 16-byte aligned
    (128, 4, 2, moram_triton.Launch((1576,), 8, 1, 128, 16, 4)),    # bf16, 16-byte rows of 128: two a warp
    (160, 160, 2, moram_triton.Launch((3152,), 4, 1, 256, 256, 4)),  # every atom kept: no top-k
    (8192, 16, 4, moram_triton.Launch((12608,), 1, 64, 128, 32, 8)),  # the widest bank: a row over 8 warps
])
def test_the_launch_gives_each_warp_whole_rows(atoms, k, itemsize, expected, block_order):
    rows_first = block_order == "rows" and expected.block_h > 1  # (the order's rule: the next test)
    assert moram_triton.launch(12608, atoms, k, itemsize) == expected._replace(rows_first=rows_first)


@pytest.mark.parametrize("version, rows_first", [("3.5.1", True), ("3.6.0", True), ("3.7.1", False), ("3.9.0", False),
                                                 ("dev", False)])
def test_rows_come_first_where_a_row_is_several_slices_under_a_triton_before_3_7(monkeypatch, version, rows_first):
    """The block order (``paths.triton.rows_first``) by the installed Triton: the sm_90 reports of
    both orders under Triton 3.6 to 3.9 (docs/concepts/gpu-path.md, "Triton versions")."""
    import importlib.metadata

    monkeypatch.setattr(moram_triton, "_INSTALLED", True)
    monkeypatch.setattr(importlib.metadata, "version", lambda name: version if name == "triton" else None)
    assert moram_triton._triton_takes_rows_first() is rows_first
    monkeypatch.setattr(moram_triton, "_ROWS_FIRST", rows_first)  # (what an import under that Triton reads)
    several = [moram_triton.launch(12608, 160, 16, 4),            # the CLIP tower in float32: 2 slices of 128
               moram_triton.launch(8, 120, 4, 2),                 # LLaMA-1B decode in bf16: 4 of 32 (unaligned)
               moram_triton.read_out_launch(8, 240, 16, 4, 2048)]  # its read-out in float32: 2 of 128
    one = [moram_triton.launch(12608, 160, 16, 2), moram_triton.read_out_launch(8, 240, 16, 2, 2048)]  # bf16
    assert [(launch.block_h > 1, launch.rows_first) for launch in several] == [(True, rows_first)] * 3
    assert [(launch.block_h, launch.rows_first) for launch in one] == [(1, False)] * 2


def test_the_block_order_is_read_of_the_installed_triton_at_import_not_at_a_launch():
    """A launch rule's first call may come inside a ``torch.compile`` trace, where torch 2.11's Dynamo
    cannot read a package's metadata: in a fresh process, once the module is imported, the rule
    reads none."""
    script = ("import importlib.metadata\n"
              "from moram_avalanche.layers.moram.paths import triton as moram_triton\n"
              "def unreadable(name):\n"
              "    raise AssertionError(f'{name} metadata read at a launch')\n"
              "importlib.metadata.version = unreadable\n"
              "print(moram_triton.launch(8, 120, 4, 2).rows_first)\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).parents[3]), os.environ.get("PYTHONPATH", "")]))
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == [str(moram_triton._ROWS_FIRST)]
    assert moram_triton._ROWS_FIRST is moram_triton._triton_takes_rows_first()


@pytest.mark.skipif(not moram_triton.installed(), reason="Triton is not installed")
def test_torch_compile_captures_the_triton_path_whole_with_one_kernel_each_way():
    script = Path(__file__).parents[2] / "helpers" / "triton_capture.py"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parents[3]), env.get("PYTHONPATH", "")])
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    cases = json.loads(result.stdout.strip().splitlines()[-1])
    train, evaluation = cases["train"], cases["eval"]
    kernel = "triton_kernel_wrapper_mutation"
    assert train["graph"].count(kernel) == 1 and train["graph"].count("autograd_function_apply") == 1
    (backward,) = [ops for name, ops in train.items() if name.startswith("bwd_body")]
    assert backward.count(kernel) == 1 and not any("topk" in name or "sort" in name for name in backward)
    assert train["graph"].count("empty") == 2  # the kept columns and the norms, saved for the backward
    # eval, a few rows: p = A x, W x + b, then the read-out kernel writes y (nothing saved, no coefficients)
    assert evaluation["graph"].count(kernel) == 1 and evaluation["graph"].count("empty") == 1
    assert not any(op in evaluation["graph"] for op in ("addmm_", "empty_like", "topk", "sort", "scatter"))
    read_out = cases["read_out"]["graph"]  # x [W; A]^T + [b; 0], then route_read_out on its two views
    assert read_out.count("linear") == 1 and read_out.count(kernel) == 1 and read_out.count("empty") == 1, read_out
    assert not any(op in read_out for op in ("mm", "addmm", "addmm_", "contiguous", "topk", "sort", "scatter"))
    # the layer as a decode step calls it (no grad, its base's copy kept): two kernels, the stacked
    # GEMM and the read-out; nothing else but views and y's allocation (issue 44 item 4)
    decode = cases["decode"]["graph"]
    kernels = [op for op in decode if op not in ("reshape", "split_with_sizes", "getitem", "empty", "view")]
    assert kernels == ["addmm", kernel], decode
