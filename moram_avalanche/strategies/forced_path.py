"""A forced MoRAM path checked where a run starts, before any weight loads.

The one switch (:mod:`~moram_avalanche.layers.moram.paths.switch`: ``MORAM_AVALANCHE_PATH``, or
``use_path``) may force a path; the chooser refuses a forced path that cannot run on the tensors
it meets (:func:`~moram_avalanche.layers.moram.paths.choice.mixture_for`), but only at a MoRAM
layer's first call, after the model loaded and the run folder's record was written. This module
asks the same questions of the run's device up front: the setting is one of the switch's,
``triton`` has Triton on that device (CUDA, or Triton's interpreter on the CPU), and ``cpu-kernel``
runs on the CPU with its compiled kernel built (built here, at the explicit build point the run
would reach next, :func:`~moram_avalanche.layers.moram.paths.cpu_kernel.load`).
"""

from __future__ import annotations

from typing import Optional

#: what a refusal advises besides its own fix
UNFORCE = "or unset MORAM_AVALANCHE_PATH (auto picks the path each device can run)"


def forced_path_problem(device) -> Optional[str]:
    """Why the path the switch forces cannot run MoRAM's layers on ``device`` (with the fix), or
    None when it can, or when nothing is forced (``auto``, ``no-cpu-kernel``). An unknown setting
    is the switch's ValueError."""
    import torch

    from ..layers.moram.paths import cpu_kernel
    from ..layers.moram.paths import triton as moram_triton
    from ..layers.moram.paths.switch import requested, source

    name = requested()
    kind = torch.device(device).type
    if name == "triton":
        reason = moram_triton.why_not(torch.empty(0, device=device))
        return f"MoRAM path 'triton' ({source()}) cannot run on device {device}: {reason}; {UNFORCE}" if reason else None
    if name == "cpu-kernel":
        if kind != "cpu":
            return (f"MoRAM path 'cpu-kernel' ({source()}) cannot run on device {device}: it runs on CPU tensors; "
                    f"run on --device cpu, {UNFORCE}")
        try:
            cpu_kernel.load()
        except RuntimeError as error:  # it cannot be built here: the loader says why and how to fix it
            return str(error)
    return None


def check_forced_path(device) -> None:
    """A one-line ValueError when the forced MoRAM path cannot run on ``device``
    (:func:`forced_path_problem`)."""
    problem = forced_path_problem(device)
    if problem:
        raise ValueError(" ".join(problem.split()))


__all__ = ["UNFORCE", "check_forced_path", "forced_path_problem"]
