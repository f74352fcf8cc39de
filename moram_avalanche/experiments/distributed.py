"""Start the processes of a data-parallel run (``torchrun``) for the command line.

``torchrun --nproc_per_node N -m moram_avalanche run ...`` (or ``compare``) starts N copies of
the command with ``RANK`` / ``LOCAL_RANK`` / ``WORLD_SIZE`` set. :func:`start_processes` then
initialises the process group through Avalanche's ``DistributedHelper.init_distributed``
(gloo on CPU, NCCL on CUDA; it also seeds every process alike) and gives each process its
device (``cuda:<LOCAL_RANK>`` on GPUs). What the processes do together is in
:mod:`moram_avalanche.algorithms.data_parallel` and the
:class:`~moram_avalanche.strategies.plugins.data_parallel.DataParallel` plugin; rank 0 alone
writes logs, results and checkpoints. Without torchrun nothing changes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, List

import torch

from ..algorithms.data_parallel import is_main_process, world_size
from ..strategies.plugins.data_parallel import DataParallel
from ..utils.devices import resolve_device

#: the environment torchrun sets for each process
TORCHRUN_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE")


@dataclass(frozen=True)
class Processes:
    """This process's place in the run."""

    device: str
    world: int
    main: bool

    def plugins(self) -> List:
        """The plugins a strategy needs here: :class:`DataParallel` with several processes."""
        return [DataParallel()] if self.world > 1 else []

    def check(self, name: str, needs) -> None:
        """Refuse, before anything runs, a strategy that does not train data-parallel here."""
        if self.world > 1 and not needs.data_parallel:
            raise ValueError(f"{name} does not train data-parallel (see its documentation); run it "
                             "in one process (without torchrun)")

    def loggers(self, make: Callable[[], List]) -> List:
        """``make()`` on rank 0, nothing elsewhere (Avalanche's loggers refuse other ranks)."""
        return make() if self.main else []


def under_torchrun() -> bool:
    return all(name in os.environ for name in TORCHRUN_VARIABLES)


def start_processes(seed: int, device: str) -> Processes:
    """Join the torchrun process group when there is one; this process's device and role.

    ``device`` is the one asked for on the command line ("cpu", "cuda", "auto"); under torchrun a CUDA
    device becomes ``cuda:<LOCAL_RANK>``.
    """
    device = resolve_device(device, "--device")  # "auto" -> "cuda" or "cpu"
    if not under_torchrun():
        return Processes(device=device, world=1, main=True)
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        from avalanche.distributed import DistributedHelper

        use_cuda = torch.device(device).type == "cuda"
        if use_cuda and not torch.cuda.is_available():
            raise ValueError(f"--device {device} under torchrun, but CUDA is not available here")
        DistributedHelper.init_distributed(random_seed=seed, backend="nccl" if use_cuda else "gloo",
                                           use_cuda=use_cuda)
    if torch.device(device).type == "cuda":
        device = f"cuda:{int(os.environ['LOCAL_RANK'])}"
        torch.cuda.set_device(device)
    return Processes(device=device, world=world_size(), main=is_main_process())


__all__ = ["TORCHRUN_VARIABLES", "Processes", "start_processes", "under_torchrun"]
