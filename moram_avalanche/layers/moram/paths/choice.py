"""The one choice of how a MoRAM layer runs its six steps, and the switch that forces a path.

Four paths compute the same numbers (the test suite checks each, outputs and every gradient,
against the naive reference):

=============  ==============================================================================
``reference``  PyTorch, gathered ``[N, k]`` routing and an ``embedding_bag`` read-out that skips
               the eval gate's zero terms (:func:`~moram_avalanche.layers.moram.paths.cpu.sparse_mixture`).
               The CPU's path until the compiled kernel is built. On a GPU the skipping's boolean
               indexing waits for the device in every call.
``cpu-kernel`` The same, with the compiled C++ kernels for the top-k, the gated read-out and the
               router's backward (CPU, float32; :mod:`~moram_avalanche.layers.moram.paths.cpu_kernel`,
               built by ``routing_kernel.load()``).
``dense``      No host synchronisation: routing by PyTorch into dense ``[N, R]`` coefficients, one
               GEMM read-out, in the compute dtype (:mod:`~moram_avalanche.layers.moram.paths.dense`).
``triton``     The same GEMMs; steps 2-5 in one Triton kernel each way
               (:mod:`~moram_avalanche.layers.moram.paths.triton`).
=============  ==============================================================================

``auto`` (the default) picks by the tokens' device: the CPU takes ``cpu-kernel`` where its
kernels apply and are built, else ``reference``; CUDA takes ``triton`` when Triton is installed
and the bank fits one program (:data:`~moram_avalanche.layers.moram.paths.triton.MAX_ATOMS`), else
``dense``; any other device ``dense``.

Forcing a path, e.g. to check the GPU paths on a CPU: the environment variable
``MORAM_AVALANCHE_PATH`` (``auto``, ``reference``, ``cpu-kernel``, ``dense``, ``triton``), or in
Python ``with use_path("dense"): ...`` (which wins over the variable). A forced path that cannot
run on the tensors it meets is an error that says why (``cpu-kernel`` before the kernel is
built, ``triton`` on the CPU without ``TRITON_INTERPRET=1``), never a silent substitute.
"""

from __future__ import annotations

import contextlib
import functools
import os
from typing import Callable, Iterator, Optional

import torch

from . import cpu_kernel as routing_kernel
from . import triton as moram_triton
from .cpu import Kernels, gated_read_out, kernels_for, read_out, router_backward, select, sparse_mixture
from .dense import TORCH_ROUTER, TRITON_ROUTER, dense_mixture

#: the environment variable that forces a path
PATH_VARIABLE = "MORAM_AVALANCHE_PATH"
#: the paths, in the order of the module docstring's table
PATHS = ("reference", "cpu-kernel", "dense", "triton")

_forced: Optional[str] = None  # set by use_path(); wins over PATH_VARIABLE


def check_path(name: str, source: str = "use_path()") -> str:
    """``name`` normalised (lower case, ``_`` as ``-``), if it is ``auto`` or one of :data:`PATHS`;
    ``source`` says where it was set, for the error."""
    normal = str(name).strip().lower().replace("_", "-") or "auto"
    if normal != "auto" and normal not in PATHS:
        raise ValueError(f"{source}: unknown MoRAM path {name!r}, expected auto or one of {', '.join(PATHS)}")
    return normal


def requested() -> str:
    """The path asked for: :func:`use_path`'s, else :data:`PATH_VARIABLE`'s, else ``auto``."""
    if _forced is not None:
        return _forced
    return check_path(os.environ.get(PATH_VARIABLE, "auto"), PATH_VARIABLE)


@contextlib.contextmanager
def use_path(name: str) -> Iterator[str]:
    """Run every MoRAM layer inside the block on path ``name`` (``auto`` restores the choice)."""
    global _forced
    before, _forced = _forced, check_path(name)
    try:
        yield _forced
    finally:
        _forced = before


def path_name(tokens: torch.Tensor, num_atoms: int, k: int, gated: bool) -> str:
    """The path for ``tokens`` ``[N, d_in]`` and a bank of ``num_atoms`` (module docstring)."""
    name = requested()
    if name != "auto":
        return name
    device = tokens.device.type
    if device == "cpu":
        return "reference" if routing_kernel.built() is None else "cpu-kernel"
    if device == "cuda" and moram_triton.usable(tokens) and moram_triton.fits(num_atoms):
        return "triton"
    return "dense"


def mixture_for(tokens: torch.Tensor, num_atoms: int, k: int, gated: bool) -> Callable:
    """``mixture(tokens, weight, bias, bank, k, temperature, threshold, recording) -> (y, idx, weights)``
    of the chosen path (:func:`path_name`); checks a forced path can run here."""
    name = path_name(tokens, num_atoms, k, gated)
    if name == "reference":
        return _REFERENCE
    if name == "cpu-kernel":
        if routing_kernel.built() is None or tokens.device.type != "cpu":
            raise RuntimeError(
                f"MoRAM path 'cpu-kernel' needs CPU tensors and the compiled kernel (call "
                f"moram_avalanche.layers.moram.paths.cpu_kernel.load() first; {routing_kernel.KERNEL_VARIABLE} is "
                f"{routing_kernel.choice()}); got {tokens.device.type} tensors")
        # each step takes its compiled kernel where it applies (kernels_for: dtype, bank size)
        return functools.partial(sparse_mixture, kernels_for(tokens, num_atoms, k, gated))
    if name == "dense":
        return _DENSE
    reason = moram_triton.why_not(tokens) or (
        None if moram_triton.fits(num_atoms) else
        f"a bank of {num_atoms} atoms is wider than the kernel holds ({moram_triton.MAX_ATOMS})")
    if reason:
        raise RuntimeError(f"MoRAM path 'triton' cannot run here: {reason}")
    return _TRITON


def _reference(tokens, weight, bias, bank, k, temperature, threshold, recording):
    kernels = _GATED_KERNELS if threshold is not None else _KERNELS
    return sparse_mixture(kernels, tokens, weight, bias, bank, k, temperature, threshold, recording)


_KERNELS = Kernels(select, read_out, router_backward)
_GATED_KERNELS = Kernels(select, gated_read_out, router_backward)
_REFERENCE = _reference
_DENSE = functools.partial(dense_mixture, TORCH_ROUTER)
_TRITON = functools.partial(dense_mixture, TRITON_ROUTER)


__all__ = ["PATHS", "PATH_VARIABLE", "check_path", "mixture_for", "path_name", "requested", "use_path"]
