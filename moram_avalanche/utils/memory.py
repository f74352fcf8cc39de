"""Sizes checked before anything is built: what MoRAM's atom banks and training's own state will
take, and whether that fits in the memory of the device that is to hold them.

``--set atoms_per_task=1000000000`` would otherwise pass every check, write the run's records
and fail allocating hundreds of GB; :func:`check_fits` refuses it first, in one line.
torch is imported only to ask a CUDA device for its free memory.
"""

from __future__ import annotations

import math
import os
from typing import Dict, Iterable, Optional, Sequence, Tuple

#: bytes per atom outside the key / value rows: ``atom_task`` and ``atom_hits`` (int64) and
#: ``atom_mass`` (float32) [layers/moram.py MoRAMLinear.__init__]
ATOM_BOOKKEEPING_BYTES = 8 + 8 + 4
#: copies of a float32 trainable atom while training: the gradient and Adam(W)'s two moments
#: (:func:`training_state_bytes` gives every dtype's, master weights included)
TRAINING_COPIES = 3
#: bytes of a float32 element: master weights, their gradients and AdamW's moments beside them
FLOAT32_BYTES = 4


def training_state_bytes(trainable: int, param_bytes: int, *, master_weights: bool = True) -> Dict[str, int]:
    """Bytes training holds for ``trainable`` parameters of ``param_bytes`` each, beyond the
    parameters themselves, by part (sum the values for the total):

    * ``gradients``: one per parameter, in its dtype (backward writes them; accumulated there);
    * ``masters``: a float32 copy of each parameter held in 2 bytes or fewer, when
      ``master_weights`` (:class:`~moram_avalanche.algorithms.mixed_precision.MasterWeights`,
      DeepSpeed's bf16 mode), allocated when the optimizer is built;
    * ``step_gradients``: the float32 copy of those gradients each step makes (freed after it);
    * ``moments``: AdamW's two, float32 with master weights or float32 parameters, else in the
      parameters' dtype.

    bf16 with master weights: 2 + 4 + 4 + 8 = 18 bytes per trainable parameter; pure bf16
    (``master_weights=False``): 2 + 4 = 6; float32: 4 + 8 = 12.
    """
    trainable, param_bytes = _count("trainable", trainable), _count("param_bytes", param_bytes)
    masters = bool(master_weights) and param_bytes < FLOAT32_BYTES
    moment = FLOAT32_BYTES if masters else param_bytes
    return {"gradients": trainable * param_bytes,
            "masters": trainable * FLOAT32_BYTES if masters else 0,
            "step_gradients": trainable * FLOAT32_BYTES if masters else 0,
            "moments": 2 * trainable * moment}


def step_state_bytes(trainable: int, param_bytes: int, *, master_weights: bool = True) -> int:
    """The part of :func:`training_state_bytes` a training step allocates: all but the masters,
    which exist once the optimizer is built. What a check made between the two (a plugin's
    ``before_training_exp``) adds to its own size."""
    state = training_state_bytes(trainable, param_bytes, master_weights=master_weights)
    return sum(state.values()) - state["masters"]


def _count(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be an int >= 0, got {value!r}")
    return value


def atom_bank_bytes(shapes: Iterable[Tuple[int, int]], atoms_per_task: int, tasks: int, *,
                    dtype_bytes: int = 4, training: bool = True, master_weights: bool = True) -> int:
    """Bytes MoRAM's atom banks take after ``tasks`` tasks of ``atoms_per_task`` atoms each.

    Args:
        shapes: ``(d_in, d_out)`` of every adapted linear layer (``in_features``,
            ``out_features`` of the wrapped ``nn.Linear``).
        atoms_per_task: atoms each task appends to every layer (the paper's ``r``).
        tasks: number of tasks (experiences) trained.
        dtype_bytes: bytes per element of the banks (4: float32, 2: float16 / bfloat16).
        training: add what training holds for one task's trainable atoms
            (:func:`training_state_bytes`: their gradient and AdamW's moments, and with 2-byte
            banks and ``master_weights`` their float32 masters and step gradients) and the
            transient second bank :meth:`MoRAMLinear.expand` builds while it appends a task (the
            largest layer's).
        master_weights: the loop's float32 master copies of low-precision atoms (default on).

    Every atom of a layer holds a key row (``d_in``), a value row (``d_out``) and
    :data:`ATOM_BOOKKEEPING_BYTES` of counters. Activations are not counted.
    """
    atoms_per_task, tasks = _count("atoms_per_task", atoms_per_task), _count("tasks", tasks)
    dtype_bytes = _count("dtype_bytes", dtype_bytes)
    shapes = [tuple(s) for s in shapes]
    for shape in shapes:
        if len(shape) != 2 or any(isinstance(d, bool) or not isinstance(d, int) or d < 1 for d in shape):
            raise ValueError(f"shapes must be (d_in, d_out) pairs of positive ints, got {shape!r}")
    atoms = atoms_per_task * tasks
    total, largest = 0, 0
    for d_in, d_out in shapes:
        layer = atoms * ((d_in + d_out) * dtype_bytes + ATOM_BOOKKEEPING_BYTES)
        total += layer
        if training:
            total += sum(training_state_bytes(atoms_per_task * (d_in + d_out), dtype_bytes,
                                              master_weights=master_weights).values())
        largest = max(largest, layer)
    return total + (largest if training else 0)


def available_bytes(device) -> Optional[int]:
    """Memory free for new tensors on ``device`` (a torch device name: cpu, cuda, cuda:N, mps),
    or None when it cannot be told.

    CPU: ``psutil.virtual_memory().available`` when psutil is installed, else ``MemAvailable``
    of ``/proc/meminfo``, else free pages (``os.sysconf``). CUDA: ``torch.cuda.mem_get_info``.
    MPS: None (no reliable query).
    """
    kind, _, index = str(device).partition(":")
    if kind == "cpu":
        return _ram_available()
    if kind == "cuda":
        import torch

        if not torch.cuda.is_available():
            return None
        free, _ = torch.cuda.mem_get_info(int(index) if index else torch.cuda.current_device())
        return int(free)
    return None


def _ram_available() -> Optional[int]:
    try:
        import psutil
    except ImportError:
        psutil = None
    if psutil is not None:
        return int(psutil.virtual_memory().available)
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def format_bytes(size: float) -> str:
    """``1536`` -> ``"1.5 KiB"``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(size) < 1024 or unit == "PiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size} B"  # unreachable


def check_fits(size: int, device, what: str = "the atom banks", *, fix: str = "",
               available: Optional[int] = None, share: float = 0.9) -> int:
    """``size`` (bytes) if it fits in ``share`` of the memory free on ``device``; else a
    ValueError in one line: what needs how much, what is free, and ``fix`` (e.g. "lower
    --set atoms_per_task"). Where free memory cannot be told (MPS), nothing is refused.
    ``available`` overrides the query (tests)."""
    _count("size", size)
    if not 0 < share <= 1 or not math.isfinite(share):
        raise ValueError(f"share must be in (0, 1], got {share!r}")
    free = available_bytes(device) if available is None else available
    if free is None or size <= share * free:
        return size
    raise ValueError(f"{what} need {format_bytes(size)} but {device} has {format_bytes(free)} free; "
                     f"{fix or 'use fewer atoms per task or fewer tasks, or a device with more memory'}")


def check_atom_banks_fit(shapes: Sequence[Tuple[int, int]], atoms_per_task: int, tasks: int,
                         device, *, dtype_bytes: int = 4, what: str = "MoRAM's atom banks",
                         fix: str = "", available: Optional[int] = None, master_weights: bool = True) -> int:
    """:func:`atom_bank_bytes` then :func:`check_fits`; returns the bytes. The message names
    the atoms per task and the tasks it was computed for."""
    size = atom_bank_bytes(shapes, atoms_per_task, tasks, dtype_bytes=dtype_bytes, master_weights=master_weights)
    return check_fits(size, device, f"{what} ({atoms_per_task} atoms per task x {tasks} tasks x "
                      f"{len(shapes)} layers)", available=available,
                      fix=fix or "lower atoms_per_task (--set atoms_per_task=N; the paper's is 16) "
                                 "or run fewer tasks")


#: bytes per element of the float64 copies Avalanche's GEM makes for quadprog (``solve_quadprog``)
FLOAT64_BYTES = 8


def gem_memory_bytes(num_params: int, past_tasks: int, grad_bytes: int) -> Tuple[int, int]:
    """``(on the training device, on the host)``: the bytes Avalanche's GEM (0.6.0,
    ``training/plugins/gem.py``) holds for ``past_tasks`` earlier tasks of a model of
    ``num_params`` parameters whose gradients take ``grad_bytes`` each.

    On the device: ``G``, one flattened gradient of every parameter per past task
    (``before_training_iteration``), the memory gradient being flattened and the current one
    (``after_backward``): ``(past + 2) * P * grad_bytes``. On the host, when a projection is
    needed (``solve_quadprog``): ``G`` copied to the CPU and as float64, the current gradient
    likewise, the float64 solution and its float32 copy:
    ``past * P * (grad_bytes + 8) + P * (grad_bytes + 8 + 8 + 4)``.
    """
    num_params, past_tasks = _count("num_params", num_params), _count("past_tasks", past_tasks)
    grad_bytes = _count("grad_bytes", grad_bytes)
    device = (past_tasks + 2) * num_params * grad_bytes
    host = past_tasks * num_params * (grad_bytes + FLOAT64_BYTES) + num_params * (grad_bytes + 2 * FLOAT64_BYTES + 4)
    return device, host


__all__ = ["ATOM_BOOKKEEPING_BYTES", "FLOAT32_BYTES", "FLOAT64_BYTES", "gem_memory_bytes", "TRAINING_COPIES",
           "atom_bank_bytes", "available_bytes", "check_atom_banks_fit", "check_fits", "format_bytes",
           "step_state_bytes", "training_state_bytes"]
