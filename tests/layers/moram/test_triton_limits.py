"""The Triton routing kernels at the edges of their arithmetic (layers/moram/paths/triton.py and
triton_kernels.py): offsets past int32, a NaN in the projections, float64's scalars.

* Offsets: which launches take int64 offsets (``LONG_INDEX``), at the boundary, each tensor's last
  offset worked out from its own shape and strides (meta tensors: no memory, kernels recorded, not
  run); then, under Triton's interpreter, the forward and the read-out on rows ``2 ** 24`` entries
  apart in a sparse memory-mapped file (the view starts ``2 ** 31`` entries in, so that a row whose
  offset wraps in int32 lands on a decoy row at the file's start), against the reference path; and
  the int64 kernels giving the int32 ones' outputs bit for bit.
* NaN: the backward writes every entry of ``dL/dp`` where a row's cut (its last kept entry) is NaN
  or a NaN is left off the kept set (memory filled with a sentinel first), as the reference path's
  NaN pattern; the forward's norm of such a row is NaN.
* float64: a float64 launch's ``1 / tau``, ``delta`` and ``eps``, typed as Triton types a launch's
  arguments (``mangle_type``: a Python float is float32), reach the kernel exactly.
"""

import struct

import pytest
import torch
from triton.runtime.jit import mangle_type

from moram_avalanche.layers.moram.paths import triton as moram_triton
from moram_avalanche.layers.moram.paths.reference import RELEVANCE_EPS, kept_router_backward, route

needs_interpreter = pytest.mark.skipif(not moram_triton.usable(torch.empty(0)),
                                       reason="Triton's interpreter is off (TRITON_INTERPRET=1 not set early)")
TAU = 0.05


def last_offset(tensor):
    """The offset, in entries from its first, of ``tensor``'s last entry: where int32 ends matters."""
    return sum((size - 1) * stride for size, stride in zip(tensor.shape, tensor.stride()))


class Recorded:
    """A kernel stand-in: ``kernel[grid](*args, **constants)`` records the call and runs nothing."""

    def __init__(self):
        self.calls = []

    def __getitem__(self, grid):
        return lambda *args, **constants: self.calls.append((args, constants))


@pytest.fixture
def recorded(monkeypatch):
    kernels = type("Kernels", (), {})()
    for name in ("route_forward_kernel", "route_backward_kernel", "route_read_out_kernel"):
        setattr(kernels, name, Recorded())
    monkeypatch.setattr(moram_triton, "_routing", kernels)
    return kernels


def meta_view(rows, atoms, row_stride, dtype=torch.bfloat16):
    return torch.empty_strided((rows, atoms), (row_stride, 1), device="meta", dtype=dtype)


# ---------------------------------------------------------------- which launch takes int64 offsets
@pytest.mark.parametrize("atoms", [16, 17])  # rows 2 ** 27 - 1 apart: the last entry at 2 ** 31 - 1, 2 ** 31
def test_the_forward_takes_long_offsets_from_an_offset_of_2_to_the_31(recorded, atoms):
    proj = meta_view(17, atoms, 2 ** 27 - 1)
    assert last_offset(proj) == 2 ** 31 - 1 + (atoms - 16)
    moram_triton.route_forward(proj, 4, TAU, None, want_state=True)
    (args, constants), = recorded.route_forward_kernel.calls
    assert constants["LONG_INDEX"] is (last_offset(proj) >= 2 ** 31)


@pytest.mark.parametrize("rows, atoms", [(2 ** 24, 128), (715827883, 3)])  # N * R = 2 ** 31, 2 ** 31 + 1
def test_the_backward_takes_long_offsets_from_an_offset_of_2_to_the_31(recorded, rows, atoms):
    proj = torch.empty(rows, atoms, device="meta")
    state = (torch.empty(rows, 1, device="meta", dtype=torch.int16), torch.empty(rows, device="meta"))
    moram_triton.route_backward(torch.empty_like(proj), proj, state, 1, TAU, None, want_coef=True)
    (args, constants), = recorded.route_backward_kernel.calls
    assert last_offset(proj) in (2 ** 31 - 1, 2 ** 31)
    assert constants["LONG_INDEX"] is (last_offset(proj) >= 2 ** 31)


@pytest.mark.parametrize("atoms, outputs", [(16, 16), (17, 16),  # p's last entry at 2 ** 31 - 1, 2 ** 31
                                            (128, 2 ** 24), (3, 715827883)])  # the bank's
def test_the_read_out_takes_long_offsets_from_an_offset_of_2_to_the_31(recorded, atoms, outputs):
    proj = meta_view(17, atoms, 2 ** 27 - 1) if outputs == 16 else meta_view(2, atoms, atoms)
    values = torch.empty(atoms, outputs, device="meta", dtype=torch.bfloat16)
    moram_triton.route_read_out(proj, None, values, 1, TAU, None)
    (args, constants), = recorded.route_read_out_kernel.calls
    largest = max(last_offset(proj), last_offset(values))
    assert largest in (2 ** 31 - 1, 2 ** 31)
    assert constants["LONG_INDEX"] is (largest >= 2 ** 31)


@pytest.mark.parametrize("rows, outputs", [(2, 1073741823), (83, 25873295)])  # y0's last entry: 2 ** 31 - 1, 2 ** 31
def test_a_planned_read_out_takes_long_offsets_from_an_offset_of_2_to_the_31(recorded, rows, outputs):
    atoms = 2
    values = torch.empty(atoms, outputs, device="meta", dtype=torch.bfloat16)
    full = torch.empty(rows, outputs + atoms, device="meta", dtype=torch.bfloat16)  # the stacked GEMM's output
    read_out = moram_triton.ReadOut(values, 1, TAU, None)
    read_out.joined(full)
    read_out(full[:, outputs:], full[:, :outputs])  # the same row count: the same launcher
    calls = recorded.route_read_out_kernel.calls
    base, proj = full[:, :outputs], full[:, outputs:]
    largest = max(last_offset(base), last_offset(proj), last_offset(values))
    assert largest in (2 ** 31 - 1, 2 ** 31) and len(calls) == 2
    assert all(constants["LONG_INDEX"] is (largest >= 2 ** 31) for args, constants in calls)


# ---------------------------------------------------------------- offsets past int32, run
def sparse_rows(tmp_path, rows, width, row_stride):
    """``(storage, view)``: a ``[rows, width]`` float32 view ``row_stride`` entries apart, starting
    ``2 ** 31`` entries into a sparse memory-mapped file (the untouched gap costs neither memory nor
    disk), so that row ``r`` wraps in int32 to ``r * row_stride - 2 ** 31``: from the file's start."""
    path = tmp_path / "rows.bin"
    size = 2 ** 31 + rows * row_stride + width
    with open(path, "wb") as file:
        file.truncate(size * 4)
    storage = torch.from_file(str(path), shared=False, size=size, dtype=torch.float32)
    path.unlink()  # (mapped: the file goes when the tensor does)
    return storage, storage.as_strided((rows, width), (row_stride, 1), 2 ** 31)


ROWS, STRIDE = 132, 2 ** 24  # rows 128 to 131 lie 2 ** 31 entries and more into the view


@needs_interpreter
def test_the_forward_reads_rows_past_an_offset_of_2_to_the_31(tmp_path):
    atoms, k = 64, 4
    storage, proj = sparse_rows(tmp_path, ROWS, atoms, STRIDE)
    data = torch.randn(ROWS, atoms, generator=torch.Generator().manual_seed(0))
    proj.copy_(data)
    storage[:atoms] = 0.0
    storage[7] = 1000.0  # a decoy where row 128 would wrap to
    coef, _, (kept, norm) = moram_triton.route_forward(proj, k, TAU, None, want_state=True)
    expected = route(data.double(), k, TAU, None)
    assert torch.equal(kept.long().sort(1).values, expected.idx.sort(1).values)
    torch.testing.assert_close(norm.double(), expected.norm[:, 0], rtol=1e-6, atol=0)
    dense = torch.zeros(ROWS, atoms, dtype=torch.float64).scatter(1, expected.idx,
                                                                   expected.weights * expected.kept_proj)
    torch.testing.assert_close(coef.double(), dense, rtol=2e-5, atol=1e-6)


@needs_interpreter
def test_the_read_out_reads_rows_past_an_offset_of_2_to_the_31(tmp_path):
    atoms, outputs, k = 64, 48, 4
    storage, full = sparse_rows(tmp_path, ROWS, atoms + outputs, STRIDE)  # y0 beside p, as the stacked GEMM's
    gen = torch.Generator().manual_seed(1)
    data = torch.randn(ROWS, atoms + outputs, generator=gen)
    full.copy_(data)
    storage[:atoms + outputs] = 1000.0  # a decoy where row 128 would wrap to
    values = torch.randn(atoms, outputs, generator=gen)
    out = moram_triton.route_read_out(full[:, :atoms], full[:, atoms:], values, k, TAU, None)
    routing = route(data[:, :atoms].double(), k, TAU, None)
    expected = data[:, atoms:].double() + (
        (routing.weights * routing.kept_proj)[:, :, None] * values.double()[routing.idx]).sum(1)
    torch.testing.assert_close(out.double(), expected, rtol=2e-5, atol=2e-5 * expected.abs().max().item())


@needs_interpreter
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float64], ids=str)
def test_the_int64_offsets_give_the_int32_ones_outputs(monkeypatch, dtype):
    gen = torch.Generator().manual_seed(2)
    proj = torch.randn(9, 40, generator=gen).to(dtype)
    grad = torch.randn(9, 40, generator=gen).to(dtype)
    values = torch.randn(40, 24, generator=gen).to(dtype)

    def outputs():
        coef, weights, state = moram_triton.route_forward(proj, 4, TAU, 0.1, want_weights=True, want_state=True)
        grad_proj, again = moram_triton.route_backward(grad, proj, state, 4, TAU, 0.1, want_coef=True)
        return coef, weights, *state, grad_proj, again, moram_triton.route_read_out(proj, proj[:, :24], values, 4,
                                                                                    TAU, 0.1)

    narrow = outputs()
    monkeypatch.setattr(moram_triton, "long_index", lambda *args: True)
    wide = outputs()
    assert all(torch.equal(a, b) for a, b in zip(narrow, wide))


# ---------------------------------------------------------------- a NaN in the projections
@needs_interpreter
def test_the_backward_writes_every_entry_of_a_row_holding_a_nan():
    nan = float("nan")
    proj = torch.tensor([[nan, nan, 0.5, -0.25, 1.0, 0.0, 2.0, 0.75],     # the cut (2nd kept) NaN
                         [1.0, 0.5, -nan, 0.25, -1.0, 0.0, 2.0, 0.75],    # a NaN left off the kept set
                         [1.0, 0.5, -0.5, 0.25, -1.0, 0.0, 2.0, 0.75]])   # none
    assert struct.pack("<f", proj[1, 2].item())[3] & 0x80  # (a NaN with its sign bit: ranked last)
    k = 2
    coef, _, state = moram_triton.route_forward(proj, k, TAU, None, want_state=True)
    assert torch.isnan(state[1][:2]).all() and not torch.isnan(state[1][2])
    grad = torch.randn(3, 8, generator=torch.Generator().manual_seed(3))
    sentinel = torch.full_like(proj, 12345.0)  # memory the backward's output may be given next
    del sentinel
    grad_proj, _ = moram_triton.route_backward(grad, proj, state, k, TAU, None)
    routing = route(proj, k, TAU, None)
    expected = kept_router_backward(grad.gather(1, routing.idx), proj, routing, TAU, None)
    assert torch.equal(torch.isnan(grad_proj), torch.isnan(expected)) and torch.isnan(expected[:2]).all()
    torch.testing.assert_close(grad_proj[2], expected[2], rtol=2e-5, atol=1e-6)


# ---------------------------------------------------------------- float64's scalars
def as_a_gpu_launch_passes_it(argument):
    """A float argument's value as a launch on a GPU gives it to a float64 kernel: a Python float
    typed float32 (rounded to it); an int, the float64 whose bits it is (what the kernels read back)."""
    kind = mangle_type(argument)
    if kind == "fp32":
        return struct.unpack("<f", struct.pack("<f", argument))[0]
    assert kind in ("i32", "i64"), kind
    return struct.unpack("<d", struct.pack("<q", argument))[0]


def test_a_float64_launch_passes_its_scalars_exactly(recorded):
    tau, delta = 0.03, 0.2  # neither 1 / tau nor delta is a float32
    proj = torch.empty(5, 16, device="meta", dtype=torch.float64)
    values = torch.empty(16, 8, device="meta", dtype=torch.float64)
    state = (torch.empty(5, 2, device="meta", dtype=torch.int16), torch.empty(5, device="meta", dtype=torch.float64))
    moram_triton.route_forward(proj, 2, tau, delta)
    moram_triton.route_backward(proj, proj, state, 2, tau, delta)
    moram_triton.route_read_out(proj, None, values, 2, tau, delta)
    planned = moram_triton.ReadOut(values, 2, tau, delta, base=False)
    planned(proj)
    calls = [call for kernel in ("route_forward_kernel", "route_backward_kernel", "route_read_out_kernel")
             for call in getattr(recorded, kernel).calls]
    assert len(calls) == 4
    for args, _ in calls:
        assert [as_a_gpu_launch_passes_it(number) for number in args[-3:]] == [1 / tau, delta, RELEVANCE_EPS]
