"""MoRAM's routing fused by Triton: where it runs, and the two calls the GPU path makes.

The dense GPU path (:mod:`~moram_avalanche.layers.moram.paths.dense`) spends a dozen small kernels
on steps 2-5 (:mod:`~moram_avalanche.layers.moram.paths.reference` states them) in PyTorch (norm,
top-k, divisions, softmax, gate, scatter). Two Triton kernels
(:mod:`~moram_avalanche.layers.moram.paths.triton_kernels`) do them in one pass over each token's
``R`` projections:

* :func:`route_forward` -- ``p`` ``[N, R]`` -> ``c = w * p`` ``[N, R]`` (and ``w`` on request),
  and, when a backward will follow, the state it reads: the kept columns ``[N, k]`` (int16) and
  the norms ``[N]``, ``2k + 4`` bytes a token (float32 norms; ``2k + 8`` in float64) beside the ``2R`` of ``p`` in bfloat16;
* :func:`route_backward` -- ``(dL/dc, p, state)`` -> ``dL/dp`` (and ``c`` on request), without a
  second top-k.

:func:`launch` chooses both kernels' blocks and warps (one row per warp: the kernels' module
docstring says why).

Triton is imported on first use only (a CPU-only install may not have it). :func:`usable` says
whether these calls can run on a tensor: a CUDA tensor with Triton installed, or any tensor
under ``TRITON_INTERPRET=1`` (Triton's interpreter, which the test suite uses on the CPU; it
must be set before Triton is first imported). Plain Python launchers, no custom operator: a
kernel launch traced by ``torch.compile`` stays in the graph (user-defined Triton kernels), and
eager calls pay no dispatcher overhead.
"""

from __future__ import annotations

import importlib.util
import os
from typing import NamedTuple, Optional, Tuple

import torch

from .reference import RELEVANCE_EPS, route_dtype

#: the widest bank a program holds in registers (atoms, rounded up to a power of two); a wider
#: one takes the PyTorch dense path (:func:`fits`). Below 2 ** 15: the kept columns are saved as
#: int16, and a packed key holds ``0xFFFF - column`` in 16 bits
MAX_ATOMS = 8192

#: the widest bank a warp holds one row of (32 entries a lane); a wider row spreads over warps
ROW_PER_WARP = 1024


_INSTALLED = importlib.util.find_spec("triton") is not None
_routing = None  # the kernels' module, imported on first use (it imports triton)


def installed() -> bool:
    """Whether Triton can be imported (never imports it)."""
    return _INSTALLED


def interpreting() -> bool:
    """Whether Triton runs its interpreter (``TRITON_INTERPRET=1``): kernels then take CPU tensors."""
    return os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "on", "yes")


def usable(tensor: torch.Tensor) -> bool:
    """Whether the kernels can run on ``tensor``'s device (module docstring)."""
    return _INSTALLED and (tensor.device.type == "cuda" or interpreting())


def fits(num_atoms: int) -> bool:
    """Whether a bank of ``num_atoms`` fits one program's registers (:data:`MAX_ATOMS`)."""
    return num_atoms <= MAX_ATOMS


def why_not(tensor: torch.Tensor) -> Optional[str]:
    """Why the kernels cannot run on ``tensor`` (how to fix it), or None when they can."""
    if not installed():
        return "Triton is not installed (pip install triton; it comes with PyTorch's CUDA builds on Linux)"
    if not usable(tensor):
        return (f"Triton runs on CUDA tensors, got a {tensor.device.type} tensor; on the CPU set "
                "TRITON_INTERPRET=1 before Triton is first imported (its interpreter, slow: for tests)")
    return None


def _kernels():
    global _routing
    if _routing is None:
        from . import triton_kernels as triton_routing  # imports triton

        _routing = triton_routing
    return _routing


class Launch(NamedTuple):
    """How both kernels are launched on ``N`` rows of ``R`` projections with ``k`` kept (:func:`launch`)."""

    grid: Tuple[int]
    block_n: int  # token rows a program takes
    block_h: int  # a row's slices ...
    block_w: int  # ... of this many columns: BLOCK_R = BLOCK_H * BLOCK_W, the bank rounded up to a power of two
    block_k: int  # the kept set's slots: k rounded up (at least a row's lanes); the whole bank when all are kept
    num_warps: int


def _power_of_two(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


def launch(num_rows: int, num_atoms: int, k: int, itemsize: int) -> Launch:
    """The launch of both kernels on ``num_rows`` tokens of ``num_atoms`` projections of ``itemsize``
    bytes, ``k`` of them kept.

    One row per warp (its reductions never leave the warp: shuffles, or one ``REDUX`` for a 32-bit
    integer on sm_80 and later, no barrier), four warps a program. A lane loads 16 bytes at a time
    where Triton knows the rows are 16-byte aligned (it hints a row stride divisible by 16), else
    one entry, so a warp covers ``BLOCK_W = 32 * 16 / itemsize`` (or 32) columns at once and holds a
    wider row as ``BLOCK_H`` such slices ([BLOCK_H, BLOCK_N, BLOCK_W] blocks: Triton's layouts then
    give the slices of a row to one warp instead of spreading them over warps); a narrower row
    shares its warp with others. A row wider than :data:`ROW_PER_WARP` spreads over ``BLOCK_R / 1024``
    warps.
    """
    vector = 16 // itemsize if num_atoms % 16 == 0 else 1
    block_r = max(16, _power_of_two(num_atoms))
    block_w = min(block_r, 32 * vector)
    lanes = min(32, block_w // vector)  # the lanes one row takes
    block_k = block_r if k >= num_atoms else max(_power_of_two(k), lanes)
    if block_r <= ROW_PER_WARP:
        warps, block_n = 4, 4 * 32 // lanes
    else:
        warps, block_n = min(32, block_r // ROW_PER_WARP), 1
    return Launch((-(-num_rows // block_n),), block_n, block_r // block_w, block_w, block_k, warps)


def _numbers(k: int, temperature: float, threshold: Optional[float], num_atoms: int):
    """``(K, inv_tau, delta, flags)`` the kernels take: ``K`` 0 where every atom is kept (no top-k)."""
    keep_all = k >= num_atoms
    flags = dict(GATED=threshold is not None, KEEP_ALL=keep_all)
    return 0 if keep_all else int(k), 1.0 / float(temperature), 0.0 if threshold is None else float(threshold), flags


def route_forward(proj: torch.Tensor, k: int, temperature: float, threshold: Optional[float],
                  want_weights: bool = False, want_state: bool = False
                  ) -> Tuple[torch.Tensor, Optional[torch.Tensor], Tuple[torch.Tensor, ...]]:
    """Steps 2-5 on ``proj`` ``[N, R]``: ``(c [N, R] in proj's dtype, w [N, R] float32 or None, state)``.

    ``state`` (``want_state``: a backward will follow; else ``()``) is what :func:`route_backward`
    reads instead of selecting again: the kept columns ``[N, k]`` int16, largest first (``[N, 0]``
    where every atom is kept), and the norms ``max(||p||, eps)`` ``[N]`` in the routing dtype.
    ``proj`` may be a view with rows apart (the stacked GEMM's ``p``): only its last stride must be 1.
    """
    if proj.stride(1) != 1:
        proj = proj.contiguous()
    rows, atoms = proj.shape
    coef = torch.empty_like(proj)  # contiguous even for a view with rows apart (not dense)
    weights = torch.empty(rows, atoms, device=proj.device, dtype=torch.float32) if want_weights else coef
    kept_k, inv_tau, delta, flags = _numbers(k, temperature, threshold, atoms)
    state = ()
    if want_state:
        state = (torch.empty(rows, kept_k, device=proj.device, dtype=torch.int16),
                 torch.empty(rows, device=proj.device, dtype=route_dtype(proj.dtype)))
    kept, norm = state or (coef, coef)
    grid, block_n, block_h, block_w, block_k, warps = launch(rows, atoms, k, proj.element_size())
    _kernels().route_forward_kernel[grid](
        proj, coef, weights, kept, norm, rows, atoms, proj.stride(0), coef.stride(0), weights.stride(0), inv_tau,
        delta, RELEVANCE_EPS, K=kept_k, WRITE_W=want_weights, SAVE=want_state, BLOCK_N=block_n, BLOCK_H=block_h,
        BLOCK_W=block_w, BLOCK_K=block_k, num_warps=warps, **flags)
    return coef, (weights if want_weights else None), state


def route_backward(grad_coef: Optional[torch.Tensor], proj: torch.Tensor, state: Tuple[torch.Tensor, ...], k: int,
                   temperature: float, threshold: Optional[float], want_coef: bool = False
                   ) -> Tuple[Optional[torch.Tensor], Optional[torch.Tensor]]:
    """``(dL/dp [N, R] or None, c [N, R] or None)`` from ``dL/dc`` (None: only ``c``), ``proj`` and
    the forward's ``state`` (:func:`route_forward` with ``want_state``)."""
    proj = proj.contiguous()
    rows, atoms = proj.shape
    kept, norm = state
    grad_proj = None if grad_coef is None else torch.empty_like(proj)
    coef = torch.empty_like(proj) if want_coef else None
    if grad_coef is not None:
        grad_coef = grad_coef.contiguous()
    anything = grad_proj if grad_proj is not None else coef
    kept_k, inv_tau, delta, flags = _numbers(k, temperature, threshold, atoms)
    grid, block_n, block_h, block_w, block_k, warps = launch(rows, atoms, k, proj.element_size())
    _kernels().route_backward_kernel[grid](
        anything if grad_coef is None else grad_coef, proj, kept, norm, anything if grad_proj is None else grad_proj,
        anything if coef is None else coef, rows, atoms,
        0 if grad_coef is None else grad_coef.stride(0), proj.stride(0),
        0 if grad_proj is None else grad_proj.stride(0), 0 if coef is None else coef.stride(0), inv_tau,
        delta, RELEVANCE_EPS, K=kept_k, WRITE_GRAD=grad_coef is not None, WRITE_COEF=want_coef, BLOCK_N=block_n,
        BLOCK_H=block_h, BLOCK_W=block_w, BLOCK_K=block_k, num_warps=warps, **flags)
    return grad_proj, coef


__all__ = ["Launch", "MAX_ATOMS", "ROW_PER_WARP", "fits", "installed", "interpreting", "launch", "route_backward", "route_forward", "usable", "why_not"]
