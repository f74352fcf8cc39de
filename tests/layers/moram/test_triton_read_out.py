"""The eval read-out kernel (``route_read_out``: steps 2-6 after one GEMM, ``y = y0 + c B``) against
independent expectations, in every dtype the GPU path launches (bfloat16, float16, float32) and float64.

On a GPU, or under Triton's interpreter (``TRITON_INTERPRET=1``, set by conftest.py on a machine
without one): ``y`` equals the reference path's routing
(:func:`~moram_avalanche.layers.moram.paths.reference.route`, float64, its kept set chosen by a
stable sort: ties to the lower column) read out in float64, ``y0 + sum_I c_i B_i`` (within the
routing's float32 and one rounding to the dtype); with ``p`` and ``y0`` as views of one
``[N, d_out + R]`` GEMM output (the stacked GEMM's layout), as separate tensors, and without
``y0``; gated and not; rows past a program's end and output columns past a column block's; banks
of 120, 160 and 240 atoms with k = 2 to 16. By hand: ties read the lower columns' values; a row
whose gate closes on every atom is ``y0`` bit for bit. The refusals, and the launch rule at the
shapes that matter.
"""

import pytest
import torch

from moram_avalanche.layers.moram.paths import triton as moram_triton
from moram_avalanche.layers.moram.paths.reference import RELEVANCE_EPS, route

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
needs_interpreter = pytest.mark.skipif(not moram_triton.usable(torch.empty(0, device=DEVICE)),
                                       reason="no GPU, and Triton's interpreter is off (TRITON_INTERPRET=1 not set early)")

DTYPES = [torch.bfloat16, torch.float16, torch.float32, torch.float64]
TAU = 0.05
#: relative tolerance, to the output's largest entry: the routing runs in float32 for 16- and
#: 32-bit inputs (float64 for float64), then one rounding to the dtype
TOLERANCE = {torch.bfloat16: 1e-2, torch.float16: 2e-3, torch.float32: 2e-5, torch.float64: 1e-12}


def stable_select(proj, k):
    """The reference's ``select`` with the kernels' tie rule: the ``k`` largest of each row, ties
    to the lower column (a stable descending sort), and ``max(||p||, eps)``."""
    idx = torch.sort(proj, dim=1, descending=True, stable=True).indices[:, :k]
    norm = torch.linalg.vector_norm(proj, dim=1, keepdim=True).clamp_min(RELEVANCE_EPS)
    return proj.gather(1, idx), idx, norm


def expected_read_out(proj, base_out, values, k, threshold):
    """``y0 + sum_I w_i p_i B_i`` in float64: the reference path's routing, gathered rows of ``B``."""
    routing = route(proj.double(), k, TAU, threshold, select=stable_select)
    coef = routing.weights * routing.kept_proj                                   # [N, k]
    out = (coef[:, :, None] * values.double()[routing.idx]).sum(1)               # [N, d_out]
    return out if base_out is None else base_out.double() + out


def inputs(rows, atoms, outputs, dtype, layout, seed=0):
    """``(proj, base_out, values)``: ``stacked``: ``y0`` and ``p`` as views of one ``[N, d_out + R]``
    tensor (``full[:, :d_out]``, ``full[:, d_out:]``); ``separate``: contiguous tensors; ``none``: no ``y0``.
    Each row's projections have a few dominant atoms (``+3`` to ``+4.5``: ``s`` about 0.2, so the gate
    at 0.2 passes some of the kept atoms and closes others); the last row's are zero (the norm
    clamped: every ``c`` is 0)."""
    gen = torch.Generator().manual_seed(seed)
    full = torch.randn(rows, outputs + atoms, generator=gen)
    dominant = torch.rand(rows, atoms, generator=gen).argsort(1)[:, :4]
    full[:, outputs:].scatter_add_(1, dominant, torch.tensor([3.0, 3.5, 4.0, 4.5]).expand(rows, 4))
    full = full.to(dtype).to(DEVICE)
    full[-1, outputs:] = 0.0
    values = torch.randn(atoms, outputs, generator=gen).to(dtype).to(DEVICE)
    if layout == "stacked":
        return full[:, outputs:], full[:, :outputs], values
    proj, base_out = full[:, outputs:].contiguous(), full[:, :outputs].contiguous()
    return proj, (base_out if layout == "separate" else None), values


def check(proj, base_out, values, k, threshold):
    out = moram_triton.route_read_out(proj, base_out, values, k, TAU, threshold)
    assert out.shape == (proj.shape[0], values.shape[1]) and out.dtype == proj.dtype and out.is_contiguous()
    expected = expected_read_out(proj.cpu(), None if base_out is None else base_out.cpu(), values.cpu(), k, threshold)
    tolerance = TOLERANCE[proj.dtype]
    torch.testing.assert_close(out.cpu().double(), expected, rtol=tolerance,
                               atol=tolerance * expected.abs().max().item())
    return out.cpu()


# ---------------------------------------------------------------- against the float64 reference
@needs_interpreter
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("threshold", [None, 0.2])
@pytest.mark.parametrize("rows, atoms, k, outputs", [(11, 240, 16, 200), (6, 120, 2, 72), (5, 160, 4, 130)])
def test_the_read_out_of_the_stacked_gemm_equals_the_float64_reference(dtype, threshold, rows, atoms, k, outputs,
                                                                      block_order):
    """``p`` and ``y0`` as views of one GEMM output (row stride ``d_out + R``); ``N`` not a multiple of
    the rows a program takes (4), ``d_out`` not one of its columns (64)."""
    proj, base_out, values = inputs(rows, atoms, outputs, dtype, "stacked", seed=atoms + k)
    assert proj.stride(0) == base_out.stride(0) == outputs + atoms
    out = check(proj, base_out, values, k, threshold)
    assert torch.equal(out[-1], base_out[-1].cpu())  # a zero token: c = 0, y = y0


@needs_interpreter
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", ["separate", "none"])
def test_the_read_out_of_separate_tensors_or_without_y0_equals_the_float64_reference(dtype, layout):
    proj, base_out, values = inputs(7, 160, 90, dtype, layout, seed=3)
    out = check(proj, base_out, values, 16, 0.2)
    if layout == "none":
        assert (out[-1] == 0).all()


# ---------------------------------------------------------------- by hand
@needs_interpreter
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_ties_read_the_lower_columns_values(dtype):
    """p = (0, 1, 1, 1, 0) keeps columns 1 and 2 at k = 2 (n = sqrt 3, equal s, w = 1/2 each, c = 1/2);
    B's row i is (i + 1) at column i: y = y0 + (0, 1, 1.5, 0, 0). Gated at 0.5 (s = 0.577 passes)."""
    proj = torch.tensor([[0.0, 1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 0.0, 0.0]], dtype=dtype, device=DEVICE)
    values = torch.diag(torch.arange(1.0, 6.0)).to(dtype).to(DEVICE)
    base_out = torch.full((2, 5), 0.25, dtype=dtype, device=DEVICE)
    for threshold in (None, 0.5):
        out = moram_triton.route_read_out(proj, base_out, values, 2, TAU, threshold).cpu().double()
        expected = torch.tensor([[0.0, 1.0, 1.5, 0.0, 0.0], [0.5, 1.0, 0.0, 0.0, 0.0]], dtype=torch.float64) + 0.25
        torch.testing.assert_close(out, expected, rtol=TOLERANCE[dtype], atol=0)


@needs_interpreter
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_many_ties_keep_the_stable_top_k(dtype, block_order):
    """Multiples of 1/4 (exact in every dtype): many ties, one all-equal row, one zero row."""
    gen = torch.Generator().manual_seed(1)
    proj = (torch.randint(-4, 5, (9, 120), generator=gen).double() / 4)
    proj[-2] = 0.5
    proj[-1] = 0.0
    values = torch.randn(120, 70, generator=gen)
    base_out = torch.randn(9, 70, generator=gen)
    check(proj.to(dtype).to(DEVICE), base_out.to(dtype).to(DEVICE), values.to(dtype).to(DEVICE), 16, None)


@needs_interpreter
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_a_row_whose_gate_closes_on_every_atom_is_y0_exactly(dtype):
    """Rows of equal projections have s = 1 / sqrt(R) = 0.09 < delta = 0.2 at every atom, a zero row
    s = 0: all of their c = 0, y = y0 bit for bit (and 0 without y0); the other rows get atoms."""
    proj, base_out, values = inputs(6, 120, 80, dtype, "separate", seed=5)
    proj[1] = 0.75
    proj[3] = -0.5
    proj[4] = 0.0
    out = check(proj, base_out, values, 16, 0.2)
    for row in (1, 3, 4):
        assert torch.equal(out[row], base_out[row].cpu()), row
    assert not torch.equal(out[0], base_out[0].cpu())  # (a row with a dominant atom passes the gate)
    alone = moram_triton.route_read_out(proj, None, values, 16, TAU, 0.2).cpu()
    assert (alone[[1, 3, 4]] == 0).all()


# ---------------------------------------------------------------- refusals and the launch
def test_it_refuses_what_it_does_not_cover_with_what_to_use_instead():
    proj, values, base_out = torch.randn(3, 8), torch.randn(8, 5), torch.randn(3, 5)
    with pytest.raises(ValueError, match="every atom is kept, use route_forward"):
        moram_triton.route_read_out(proj, base_out, values, 8, TAU, None)
    with pytest.raises(ValueError, match="one dtype"):
        moram_triton.route_read_out(proj, base_out.double(), values, 2, TAU, None)
    with pytest.raises(ValueError, match=r"values \[R, d_out\]"):
        moram_triton.route_read_out(proj, base_out, values[:7], 2, TAU, None)
    with pytest.raises(ValueError, match=r"base_out \[N, d_out\]"):
        moram_triton.route_read_out(proj, base_out[:2], values, 2, TAU, None)
    with pytest.raises(ValueError, match="no backward"):
        moram_triton.route_read_out(proj, base_out, values.requires_grad_(), 2, TAU, None)


@pytest.mark.parametrize("rows, atoms, k, itemsize, outputs, expected", [
    (8, 240, 16, 2, 2048, moram_triton.ReadOutLaunch((2, 32), 4, 1, 256, 32, 64, 4)),     # LLaMA-1B decode, q / o
    (8, 240, 16, 2, 8192, moram_triton.ReadOutLaunch((2, 64), 4, 1, 256, 32, 128, 4)),    # gate / up
    (8, 240, 4, 2, 512, moram_triton.ReadOutLaunch((2, 8), 4, 1, 256, 32, 64, 4)),        # k / v
    (12608, 160, 16, 2, 768, moram_triton.ReadOutLaunch((3152, 3), 4, 1, 256, 32, 256, 4)),  # CLIP tower
    (12608, 160, 16, 4, 3072, moram_triton.ReadOutLaunch((3152, 24), 4, 2, 128, 32, 128, 4)),  # float32
    (12608, 160, 16, 8, 768, moram_triton.ReadOutLaunch((3152, 12), 4, 4, 64, 32, 64, 4)),   # float64
    (3, 12, 2, 4, 20, moram_triton.ReadOutLaunch((1, 1), 8, 1, 16, 16, 32, 4)),           # narrow: one block
])
def test_the_read_out_launch_narrows_its_columns_until_the_gpu_is_covered(rows, atoms, k, itemsize, outputs, expected,
                                                                          block_order):
    launch = moram_triton.read_out_launch(rows, atoms, k, itemsize, outputs)
    assert launch == expected._replace(rows_first=block_order == "rows" and expected.block_h > 1)
    route = moram_triton.launch(rows, atoms, k, itemsize)  # the routing's blocks are the forward's
    assert launch[1:5] + launch[6:] == route[1:]
