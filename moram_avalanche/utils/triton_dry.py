"""A Triton driver that compiles for an NVIDIA GPU and launches nothing: Triton's launches measured and recorded without a GPU.

``with dry_driver() as launches:`` makes Triton's active driver (``triton.runtime.driver``) one
that says it is device 0 of an sm_90 GPU (``arch``) whose current stream is ``stream``. A kernel's
first launch then compiles it for real, to PTX and a cubin (Triton's compiler and the ``ptxas`` it
ships: no GPU needed), "loads" the cubin as a new integer handle, and every launch hands its
launcher's arguments to a :class:`DryLauncher`, which appends a :class:`Launched` to
``launches`` (``record=False``: drops them) and calls the launch hooks as Triton's C launcher
does, instead of launching. What runs before the launcher is Triton's and this project's own
Python, as on a GPU: ``scripts/bench_call.py --launch dry`` times it,
``tests/layers/moram/triton_launch_check.py`` compares what two ways of launching pass.

Tensors stay where they are (the CPU): only their addresses, dtypes and strides reach a launcher.
Triton must be imported without its interpreter (``TRITON_INTERPRET`` unset: it makes
``triton.jit`` give interpreted functions, which launch nothing through a driver). Not for use
beside a real GPU's launches in one process: the driver is the process's.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from typing import Iterator, List, NamedTuple, Optional


class Launched(NamedTuple):
    """One launch as its launcher received it: ``run(grid..., stream, function, packed_metadata,
    launch_metadata, enter_hook, exit_hook, *args)`` (Triton 3.4 to 3.9)."""

    grid: tuple
    stream: int
    function: int
    packed_metadata: object
    launch_metadata: object
    enter_hook: object
    exit_hook: object
    args: tuple


class DryLauncher:
    """A compiled kernel's launcher (``driver.launcher_cls``) that records and runs nothing."""

    def __init__(self, src, metadata):
        self.src, self.metadata = src, metadata

    def __call__(self, grid_0, grid_1, grid_2, stream, function, packed_metadata, launch_metadata, enter_hook,
                 exit_hook, *args):
        if enter_hook is not None:  # (as Triton's launcher: a hook that is not None is called with the metadata)
            enter_hook(launch_metadata)
        if _ACTIVE.launches is not None:
            _ACTIVE.launches.append(Launched((grid_0, grid_1, grid_2), stream, function, packed_metadata,
                                             launch_metadata, enter_hook, exit_hook, args))
        if exit_hook is not None:
            exit_hook(launch_metadata)


class _Utils:
    """What a compiled kernel asks of the driver's utilities when it is first launched."""

    handles = itertools.count(1)

    def load_binary(self, name, binary, shared, device):
        # (module, function, registers, spills, most threads a block): a new function handle a kernel
        return next(self.handles), next(self.handles), 32, 0, 1024

    def unload_module(self, module):
        pass

    def get_device_properties(self, device):
        return {"max_shared_mem": 232448, "multiprocessor_count": 132, "max_num_regs": 65536, "warpSize": 32}


class DryDriver:
    """Triton's driver interface as ``JITFunction.run`` and a compiled kernel use it (module docstring)."""

    def __init__(self, arch: int, stream: int, record: bool):
        self.arch, self.current_stream = arch, stream
        self.launches: Optional[List[Launched]] = [] if record else None
        self.utils = _Utils()
        self.launcher_cls = DryLauncher

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device) -> int:
        return self.current_stream

    def get_device_capability(self, device):
        return divmod(self.arch, 10)

    def get_current_target(self):
        from triton.backends.compiler import GPUTarget

        return GPUTarget("cuda", self.arch, 32)

    def get_active_torch_device(self):
        import torch

        return torch.device("cpu")

    def map_python_to_cpp_type(self, ty: str) -> str:
        return ty

    def __getattr__(self, name):
        raise AttributeError(f"the dry Triton driver has no {name!r}: it compiles and records launches, nothing more")


_ACTIVE: Optional[DryDriver] = None


@contextlib.contextmanager
def dry_driver(arch: int = 90, stream: int = 7, record: bool = True) -> Iterator[Optional[List[Launched]]]:
    """Triton's driver made a :class:`DryDriver` inside the block (module docstring); yields the list
    its launches are appended to (None where ``record`` is False). Refused under Triton's interpreter."""
    global _ACTIVE
    if os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "on", "yes"):
        raise RuntimeError("the dry Triton driver needs Triton's compiler: unset TRITON_INTERPRET before Triton "
                           "is first imported (run it in a process of its own)")
    from triton.runtime import driver

    before, dry = _ACTIVE, DryDriver(arch, stream, record)
    driver.set_active(dry)
    _ACTIVE = dry
    try:
        yield dry.launches
    finally:
        _ACTIVE = before
        driver.set_active(before)  # (None: Triton's own default again, made when next asked for)


__all__ = ["DryDriver", "DryLauncher", "Launched", "dry_driver"]
