"""MoRAM's routing compiled for the CPU (``csrc/moram_routing.cpp``), with the PyTorch path as fallback.

On the CPU, once the projection GEMM ``p = A x`` is done, what is left of a MoRAM layer is per
token: the top-k of ``R`` relevances, the sparse read-out ``sum_j c_j B_j`` and, in training,
the router's backward. PyTorch runs them as a dozen kernels over ``[N, R]`` and ``[N, k]``
tensors; :func:`torch.topk` alone costs about a third of the projection GEMM at ``R = 160``,
``k = 16``. The C++ kernels here do each in one pass over a token's row
(``scripts/bench_atoms.py`` measures the layer with and without them):

* :func:`select` -- the kept atoms (the same set as ``torch.topk``) and ``max(||p||, eps)``;
* :func:`read_out` -- ``b + sum_j c_j B[idx_j]``, zero coefficients (the eval gate's) skipped;
* :func:`route_backward` -- ``dL/dp`` from ``dL/dy`` and the saved routing state, taking only
  the ``k`` products ``dL/dy . B_i`` each token needs where PyTorch multiplies by the whole bank
  (``[N, d_out] x [d_out, R]``, as large as the projection GEMM).

They are built by :func:`load`, at a point the caller chooses -- never inside a forward pass:
MoRAM's plugin calls it before a run's first experience (``prepare_run``), so no experience's
time includes the build. It uses ``torch.utils.cpp_extension`` (a C++ compiler and ``ninja``,
which the package installs; about a minute, cached by torch in ``TORCH_EXTENSIONS_DIR``) for this
machine's instruction set. Until then, and for other devices and dtypes (CUDA, bf16 autocast,
float64), MoRAM layers take the PyTorch steps of :mod:`~moram_avalanche.layers.moram.paths.reference`,
which compute the same numbers (tests compare the two); :func:`built` says which, and
:func:`~moram_avalanche.layers.moram.paths.choice.kernels_for` chooses per step.

The one switch (:mod:`~moram_avalanche.layers.moram.paths.switch`, ``MORAM_AVALANCHE_PATH``) sets
:func:`mode`: ``no-cpu-kernel`` never builds it (and a kernel already built is not used),
``cpu-kernel`` makes :func:`load` raise when it cannot be built, anything else builds it and falls
back with one warning when the build fails.
"""

from __future__ import annotations

import hashlib
import os
import platform
import sys
import warnings
from pathlib import Path
from typing import Optional

import torch

from ....utils.log_notes import note_dropped
from ....utils.moved import REMOVED_IN
from . import switch

SOURCE = Path(__file__).with_name("csrc") / "moram_routing.cpp"

_module = None
_failure: Optional[str] = None  # why the build failed (then never tried again in this process)


_MODES = {"no-cpu-kernel": "off", "cpu-kernel": "on"}  # the switch's settings that set a mode; others: auto


def mode() -> str:
    """What the one switch asks of this kernel (module docstring): ``off`` (``no-cpu-kernel``),
    ``on`` (``cpu-kernel``) or ``auto``."""
    return _MODES.get(switch.requested(), "auto")


def _machine_tag() -> str:
    """What the build depends on: the CPU's instruction set, torch, the source and where it is.

    ``-march=native`` code must not run on another CPU that shares the cache folder (a home
    directory on a cluster's file system), so the extension's name carries this.
    """
    flags = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = line
                break
    except OSError:
        pass
    # the source's path too: torch's build files name it, so two checkouts sharing one cache
    # folder would otherwise rebuild each other's kernel at every switch
    text = "\n".join([flags, torch.__version__, str(SOURCE.resolve()), SOURCE.read_text()])
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def load():
    """The compiled module, built on the first call (the explicit build point); None when ``off`` or
    when the build failed (``auto``)."""
    global _module, _failure
    asked = mode()
    if asked == "off":
        return None
    if _module is not None:
        return _module
    if _failure is None:
        try:
            _module = _build()
            switch.changed()  # layers that chose the PyTorch steps choose again
        except Exception as error:  # no compiler, no ninja, no Python headers, ...: the PyTorch path
            _failure = _reason(error)
            if asked == "auto":
                warnings.warn(
                    f"MoRAM's CPU routing kernel could not be built ({_failure}); MoRAM layers use the "
                    f"PyTorch path (same results, slower on the CPU). It needs a C++ compiler and "
                    f"ninja (pip install ninja); set {switch.PATH_VARIABLE}=no-cpu-kernel to skip it silently.",
                    RuntimeWarning, stacklevel=2)
    if _module is None and asked == "on":
        raise RuntimeError(f"{switch.source()} asks for MoRAM's CPU routing kernel, but it could not be built: "
                           f"{_failure} (it needs a C++ compiler and ninja; {switch.PATH_VARIABLE}=auto falls back "
                           "to the PyTorch steps)")
    return _module


def _reason(error: Exception) -> str:
    """One line of a failed build: the compiler's first error when there is one."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower() and not line.startswith("Error building")]
    return f"{type(error).__name__}: {(errors or lines or [''])[0][:300]}"


def _build():
    # torch logs "No CUDA runtime is found, using CUDA_HOME=..." when torch.utils.cpp_extension is first
    # imported on a machine with a CUDA toolkit but no GPU: this kernel is C++ for the CPU, and the note
    # only puzzled users of CPU machines
    with note_dropped("torch.utils.cpp_extension", "No CUDA runtime is found"):
        from torch.utils.cpp_extension import get_default_build_root
        from torch.utils.cpp_extension import load as load_extension

    name = f"moram_routing_{_machine_tag()}"
    root = Path(os.environ.get("TORCH_EXTENSIONS_DIR") or get_default_build_root())
    built = [*root.glob(f"{name}/{name}.*"), *root.glob(f"*/{name}/{name}.*")]  # torch adds py/cu folders
    if not any(path.suffix in (".so", ".pyd") for path in built):
        print(f"moram-avalanche: compiling MoRAM's CPU routing kernel (once for this machine, about a "
              f"minute; {switch.PATH_VARIABLE}=no-cpu-kernel skips it) ...", file=sys.stderr, flush=True)
    flags = ["-O3"] + (["-march=native"] if platform.machine().lower() in ("x86_64", "amd64") else [])
    return load_extension(name=name, sources=[str(SOURCE)], extra_cflags=flags, verbose=False)


def built():
    """The compiled module if :func:`load` has built it and :func:`mode` is not ``off``, else None.

    Never builds: what a forward pass asks.
    """
    return None if mode() == "off" else _module


def available(tensor: torch.Tensor) -> bool:
    """Whether the kernels apply to ``tensor`` (CPU, float32) and are built (never builds)."""
    return tensor.device.type == "cpu" and tensor.dtype == torch.float32 and built() is not None


def _built():
    module = built()
    if module is None:
        raise RuntimeError("MoRAM's CPU routing kernel is not built: call cpu_kernel.load() first "
                           f"(or {switch.source()} switches it off)")
    return module


def select(proj: torch.Tensor, k: int):
    """``(kept_proj [N, k], idx [N, k], norm [N, 1])``: the ``k`` largest entries of each row of
    ``proj`` (the set ``torch.topk`` keeps, in no particular order) and ``max(||p||, eps)``."""
    return tuple(_built().select(proj.contiguous(), int(k)))


def read_out(idx: torch.Tensor, coef: torch.Tensor, value_bank: torch.Tensor,
             bias: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``[N, d_out]`` rows ``bias + sum_j coef[n, j] * value_bank[idx[n, j]]``; zero terms skipped."""
    return _built().read_out(idx.contiguous(), coef.contiguous(), value_bank.contiguous(),
                           None if bias is None else bias.contiguous())


def route_backward(grad_out: torch.Tensor, value_bank: torch.Tensor, proj: torch.Tensor, routing,
                   temperature: float, threshold: Optional[float]) -> torch.Tensor:
    """``dL/dp`` ``[N, R]`` from ``dL/dy`` ``[N, d_out]`` and the saved routing state (the k
    products ``dL/dy . B_i`` per token only, instead of ``dL/dy B^T`` over the whole bank)."""
    return _built().route_backward(
        grad_out.contiguous(), value_bank.contiguous(), proj.contiguous(), routing.idx.contiguous(),
        routing.weights.contiguous(), routing.softmax.contiguous(), routing.kept_relevance.contiguous(),
        routing.kept_proj.contiguous(), routing.norm.contiguous(), float(temperature),
        0.0 if threshold is None else float(threshold), threshold is not None)


def __getattr__(name: str):
    """0.6's names this module no longer holds, until 0.8: ``choice()`` is :func:`mode`, and
    ``KERNEL_VARIABLE`` is the switch's (:data:`~moram_avalanche.layers.moram.paths.switch.KERNEL_VARIABLE`)."""
    moved = {"choice": ("mode()", mode), "KERNEL_VARIABLE": ("switch.KERNEL_VARIABLE", switch.KERNEL_VARIABLE)}
    if name not in moved:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    new, value = moved[name]
    warnings.warn(f"{__name__}.{name} is {new} since moram-avalanche 0.7 (the one switch, "
                  f"{switch.PATH_VARIABLE}, sets the kernel's mode); the old name goes in {REMOVED_IN}",
                  DeprecationWarning, stacklevel=2)
    return value


__all__ = ["SOURCE", "available", "built", "load", "mode", "read_out", "route_backward", "select"]
