"""MoRAM's routing fused by Triton: where it runs, and the two calls the GPU path makes.

The dense GPU path (:mod:`~moram_avalanche.layers.moram.paths.dense`) spends a dozen small kernels
on steps 2-5 (:mod:`~moram_avalanche.layers.moram.paths.reference` states them) in PyTorch (norm,
top-k, divisions, softmax, gate, scatter). Two Triton kernels
(:mod:`~moram_avalanche.layers.moram.paths.triton_kernels`) do them in one pass over each token's
``R`` projections:

* :func:`route_forward` -- ``p`` ``[N, R]`` -> ``c = w * p`` ``[N, R]`` (and ``w`` on request);
* :func:`route_backward` -- ``(dL/dc, p)`` -> ``dL/dp`` (and ``c`` on request), recomputing the
  routing from ``p`` so that the forward keeps nothing else for the backward.

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
from typing import Optional, Tuple

import torch

from .reference import RELEVANCE_EPS

#: the widest bank a program holds in registers (atoms, rounded up to a power of two); a wider
#: one takes the PyTorch dense path (:func:`fits`)
MAX_ATOMS = 8192


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


def _launch(num_rows: int, num_atoms: int):
    """``(grid, BLOCK_N, BLOCK_R, num_warps)`` for ``num_rows`` tokens of ``num_atoms`` projections."""
    block_r = max(16, 1 << (num_atoms - 1).bit_length())           # the bank, rounded up to a power of 2
    block_n = max(1, min(64, 4096 // block_r))                      # tokens per program: ~4096 values
    warps = 4 if block_n * block_r <= 4096 else 8
    return (-(-num_rows // block_n),), block_n, block_r, warps


def _numbers(k: int, temperature: float, threshold: Optional[float]):
    return int(k), 1.0 / float(temperature), 0.0 if threshold is None else float(threshold)


def route_forward(proj: torch.Tensor, k: int, temperature: float, threshold: Optional[float],
                  want_weights: bool = False) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    """Steps 2-5 on ``proj`` ``[N, R]``: ``(c [N, R] in proj's dtype, w [N, R] float32 or None)``."""
    proj = proj.contiguous()
    rows, atoms = proj.shape
    coef = torch.empty_like(proj)
    weights = torch.empty(rows, atoms, device=proj.device, dtype=torch.float32) if want_weights else coef
    grid, block_n, block_r, warps = _launch(rows, atoms)
    k, inv_tau, delta = _numbers(k, temperature, threshold)
    _kernels().route_forward_kernel[grid](
        proj, coef, weights, rows, atoms, proj.stride(0), coef.stride(0), weights.stride(0), k, inv_tau, delta,
        RELEVANCE_EPS, GATED=threshold is not None, KEEP_ALL=k >= atoms, WRITE_W=want_weights,
        F64=proj.dtype == torch.float64, BLOCK_N=block_n, BLOCK_R=block_r, num_warps=warps)
    return coef, (weights if want_weights else None)


def route_backward(grad_coef: Optional[torch.Tensor], proj: torch.Tensor, k: int, temperature: float,
                   threshold: Optional[float], want_coef: bool = False
                   ) -> Tuple[Optional[torch.Tensor], Optional[torch.Tensor]]:
    """``(dL/dp [N, R] or None, c [N, R] or None)`` from ``dL/dc`` (None: only ``c``) and ``proj``."""
    proj = proj.contiguous()
    rows, atoms = proj.shape
    grad_proj = None if grad_coef is None else torch.empty_like(proj)
    coef = torch.empty_like(proj) if want_coef else None
    if grad_coef is not None:
        grad_coef = grad_coef.contiguous()
    anything = grad_proj if grad_proj is not None else coef
    grid, block_n, block_r, warps = _launch(rows, atoms)
    k, inv_tau, delta = _numbers(k, temperature, threshold)
    _kernels().route_backward_kernel[grid](
        anything if grad_coef is None else grad_coef, proj, anything if grad_proj is None else grad_proj,
        anything if coef is None else coef, rows, atoms,
        0 if grad_coef is None else grad_coef.stride(0), proj.stride(0),
        0 if grad_proj is None else grad_proj.stride(0), 0 if coef is None else coef.stride(0), k, inv_tau,
        delta, RELEVANCE_EPS, GATED=threshold is not None, KEEP_ALL=k >= atoms, WRITE_GRAD=grad_coef is not None,
        WRITE_COEF=want_coef, F64=proj.dtype == torch.float64, BLOCK_N=block_n, BLOCK_R=block_r,
        num_warps=warps)
    return grad_proj, coef


__all__ = ["MAX_ATOMS", "fits", "installed", "interpreting", "route_backward", "route_forward", "usable", "why_not"]
