"""The one chooser: which path runs a MoRAM layer's call, and on the ``cpu-kernel`` path, who runs each step.

The paths (:mod:`moram_avalanche.layers.moram.paths` describes each) compute the same numbers;
the one switch (:mod:`~moram_avalanche.layers.moram.paths.switch`, ``MORAM_AVALANCHE_PATH`` or
``use_path``) forces one or leaves the pick to :func:`path_name`, by the tokens' device:

* the CPU takes ``cpu-kernel`` once the compiled kernel is built (and the switch does not say
  ``no-cpu-kernel``), else ``reference``;
* CUDA takes ``triton`` when Triton is installed and the bank fits one program
  (:data:`~moram_avalanche.layers.moram.paths.triton.MAX_ATOMS`), else ``dense``;
* any other device takes ``dense``.

On ``cpu-kernel``, :func:`kernels_for` picks who runs the three steps the compiled CPU kernels
cover (the top-k with the norm, the gated read-out, the router's backward): the compiled one
where its dtype and the bank's size make it the faster, the reference path's own step elsewhere.
:func:`mixture_for` turns both answers into the function the layer calls. A layer asks it once
per device, dtype, bank size, ``k`` and gate and keeps the answer
(:meth:`~moram_avalanche.layers.moram.layer.MoRAMRouting.path`) until the switch's
:func:`~moram_avalanche.layers.moram.paths.switch.token` changes: the hot call reads no variable
and chooses nothing.
"""

from __future__ import annotations

import functools
from typing import Callable, Optional

import torch

from . import cpu_kernel
from . import triton as moram_triton
from .dense import TORCH_ROUTER, TRITON_ROUTER, dense_mixture, stacked_mixture
from .reference import (
    GATED_TORCH_KERNELS,
    TORCH_KERNELS,
    Kernels,
    route_dtype,
    router_backward,
    select,
    sparse_mixture,
)
from .switch import PATHS, requested, source


def path_name(tokens: torch.Tensor, num_atoms: int, k: int, gated: bool) -> str:
    """The path for ``tokens`` ``[N, d_in]`` and a bank of ``num_atoms`` (module docstring)."""
    name = requested()
    if name in PATHS:
        return name
    device = tokens.device.type
    if device == "cpu":
        return "reference" if cpu_kernel.built() is None else "cpu-kernel"
    if device == "cuda" and moram_triton.usable(tokens) and moram_triton.fits(num_atoms):
        return "triton"
    return "dense"


def kernels_for(tokens: torch.Tensor, num_atoms: int, k: int, gated: bool) -> Kernels:
    """Who runs the compiled kernels' three steps for ``tokens`` ``[N, d_in]``, a bank of
    ``num_atoms`` and ``k`` kept atoms.

    The compiled kernels when they are built (:func:`cpu_kernel.built()
    <moram_avalanche.layers.moram.paths.cpu_kernel.built>`; never built here) and the tensors they see
    are CPU float32: the projections (float32 for float32, bfloat16 and float16 tokens) for
    the top-k; the tokens' own dtype for the read-out and the router's backward. The compiled
    read-out only where the gate skips terms (ungated, ``embedding_bag`` is as fast), the
    compiled backward only where the bank is a few times ``k``: it takes the ``k`` products
    ``g . B_i`` each token needs (memory-bound) where PyTorch's GEMM takes ``R``
    (compute-bound), which wins at ``R = k`` (``scripts/bench_atoms.py``).
    """
    compiled = tokens.device.type == "cpu" and cpu_kernel.built() is not None
    in_float32 = compiled and tokens.dtype == torch.float32
    reference = GATED_TORCH_KERNELS if gated else TORCH_KERNELS
    return Kernels(
        select=cpu_kernel.select if compiled and route_dtype(tokens.dtype) == torch.float32 else select,
        read_out=cpu_kernel.read_out if gated and in_float32 else reference.read_out,
        router_backward=cpu_kernel.route_backward if in_float32 and num_atoms > 2 * k else router_backward,
    )


def mixture_for(tokens: torch.Tensor, num_atoms: int, k: int, gated: bool, stacked: bool = False
                ) -> Optional[Callable]:
    """``mixture(tokens, weight, bias, bank, k, temperature, threshold, recording) -> (y, idx, weights)``
    of the chosen path (:func:`path_name`); a forced path that cannot run here is a RuntimeError
    that says why.

    ``stacked``: the path's form over a stacked base and keys instead,
    ``mixture(tokens, stacked, k, temperature, threshold, recording)``
    (:func:`~moram_avalanche.layers.moram.paths.dense.stacked_mixture`, no backward), or None
    where the chosen path has none (the CPU paths: the reference path reads the base apart)."""
    name = path_name(tokens, num_atoms, k, gated)
    if stacked and name in ("reference", "cpu-kernel"):
        return None
    if name == "reference":
        return _REFERENCE[gated]
    if name == "cpu-kernel":
        reason = (f"it runs on CPU tensors, got {tokens.device.type} tensors" if tokens.device.type != "cpu" else
                  "the compiled kernel is not built: call moram_avalanche.layers.moram.paths.cpu_kernel.load() "
                  "first" if cpu_kernel.built() is None else None)
        if reason:
            raise RuntimeError(f"MoRAM path 'cpu-kernel' ({source()}) cannot run here: {reason}")
        return functools.partial(sparse_mixture, kernels_for(tokens, num_atoms, k, gated))
    if name == "dense":
        return _STACKED_DENSE if stacked else _DENSE
    reason = moram_triton.why_not(tokens) or (
        None if moram_triton.fits(num_atoms) else
        f"a bank of {num_atoms} atoms is wider than the kernel holds ({moram_triton.MAX_ATOMS})")
    if reason:
        raise RuntimeError(f"MoRAM path 'triton' ({source()}) cannot run here: {reason}")
    return _STACKED_TRITON if stacked else _TRITON


_REFERENCE = {False: functools.partial(sparse_mixture, TORCH_KERNELS),
              True: functools.partial(sparse_mixture, GATED_TORCH_KERNELS)}
_DENSE = functools.partial(dense_mixture, TORCH_ROUTER)
_TRITON = functools.partial(dense_mixture, TRITON_ROUTER)
_STACKED_DENSE = functools.partial(stacked_mixture, TORCH_ROUTER)
_STACKED_TRITON = functools.partial(stacked_mixture, TRITON_ROUTER)


__all__ = ["kernels_for", "mixture_for", "path_name"]
