"""MoRAM's routing fused by Triton: where it runs, and the three calls the GPU path can make.

The dense GPU path (:mod:`~moram_avalanche.layers.moram.paths.dense`) spends a dozen small kernels
on steps 2-5 (:mod:`~moram_avalanche.layers.moram.paths.reference` states them) in PyTorch (norm,
top-k, divisions, softmax, gate, scatter). Three Triton kernels
(:mod:`~moram_avalanche.layers.moram.paths.triton_kernels`) do them in one pass over each token's
``R`` projections:

* :func:`route_forward` -- ``p`` ``[N, R]`` -> ``c = w * p`` ``[N, R]`` (and ``w`` on request),
  and, when a backward will follow, the state it reads: the kept columns ``[N, k]`` (int16) and
  the norms ``[N]``, ``2k + 4`` bytes a token (float32 norms; ``2k + 8`` in float64) beside the ``2R`` of ``p`` in bfloat16;
* :func:`route_backward` -- ``(dL/dc, p, state)`` -> ``dL/dp`` (and ``c`` on request), without a
  second top-k;
* :func:`route_read_out` -- the eval forward's steps 2-6 after one GEMM that gave ``p`` and the
  base output ``y0 = W x + b`` together: ``(p, y0, B)`` -> ``y = y0 + c B``, one kernel, no dense
  ``c`` (a decode step's second and last kernel of the layer).

:func:`launch` chooses the routing's blocks and warps (one row per warp: the kernels' module
docstring says why), :func:`read_out_launch` the read-out's columns on top of them.

Triton is imported on first use only (a CPU-only install may not have it). :func:`usable` says
whether these calls can run on a tensor: a CUDA tensor with Triton installed, or any tensor
under ``TRITON_INTERPRET=1`` (Triton's interpreter, which the test suite uses on the CPU; it
must be set before Triton is first imported). Plain Python launchers, no custom operator: a
kernel launch traced by ``torch.compile`` stays in the graph (user-defined Triton kernels), and
eager calls pay no dispatcher overhead; nor, after the first launch of each class of arguments,
Triton's own launch's (its binding, specialisation and cache key: about 120 thousand instructions
a launch on this project's CPU, ``scripts/bench_call.py --launch dry --instructions``): an eager launch calls the compiled kernel's launcher itself
(:mod:`~moram_avalanche.layers.moram.paths.triton_launch`, :func:`kept_or_plain`).

A Triton launch runs on the *current* CUDA device and its current stream, whatever device its
tensors are on (``triton.runtime.jit``: ``driver.active.get_current_device()``). Every launch here
is therefore made on its tensors' device (:func:`on_device`): where this process sees several
GPUs and a tensor of ``cuda:1`` (``--device cuda:1``, one process) meets another current device,
that device is made current for the launch, so the kernel runs where its tensors are and on the
stream their producers ran on. One GPU, or none: nothing to do (one check of a flag a launch).
Under ``torch.compile`` nothing is asked either: Inductor (its default backend, and
``--compile-eval``'s) makes the graph's device current in the code it generates; the other
backends (``eager``, ``aot_eager``, ``cudagraphs``) launch a user-defined Triton kernel as it is,
so with several GPUs make the tensors' device current (``torch.cuda.set_device``) before calling
a model compiled with one of them.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import struct
from typing import Callable, NamedTuple, Optional, Tuple

import torch

from .reference import RELEVANCE_EPS, route_dtype
from .triton_launch import kept_or_plain

#: the widest bank a program holds in registers (atoms, rounded up to a power of two); a wider
#: one takes the PyTorch dense path (:func:`fits`). Below 2 ** 15: the kept columns are saved as
#: int16, and a packed key holds ``0xFFFF - column`` in 16 bits
MAX_ATOMS = 8192

#: the widest bank a warp holds one row of (32 entries a lane); a wider row spreads over warps
ROW_PER_WARP = 1024


_INSTALLED = importlib.util.find_spec("triton") is not None
_routing = None  # the kernels' module, imported on first use (it imports triton)
_SEVERAL_GPUS = None  # whether this process sees more than one CUDA device (asked at the first launch on one)


def installed() -> bool:
    """Whether Triton can be imported (never imports it)."""
    return _INSTALLED


#: the first Triton (major, minor) whose compiler keeps each token row of these kernels in its warp
#: (no shared memory, no barrier, in bfloat16 at the CLIP tower's shape): the sm_90 reports of
#: ``tests/layers/moram/compile_triton_for_gpu.py`` under Triton 3.6.0, 3.7.1, 3.8.0 and 3.9.0.
#: Triton 3.6 (torch 2.11's, a GPU image's) passes rows through shared memory, with barriers: the
#: bf16 eval read-out 1024 B and 121 barriers, 25% more instructions a row and 38% occupancy instead
#: of 50%; the float32 one 60% more instructions (docs/concepts/gpu-path.md, "Triton versions")
IN_WARP_SINCE = (3, 7)


def rows_stay_in_their_warp() -> Optional[bool]:
    """Whether the installed Triton keeps each row in its warp (:data:`IN_WARP_SINCE`); None where
    Triton is not installed or its version does not read as numbers."""
    if not _INSTALLED:
        return None
    from importlib.metadata import PackageNotFoundError, version

    try:
        return tuple(int(part) for part in version("triton").split(".")[:2]) >= IN_WARP_SINCE
    except (PackageNotFoundError, ValueError):
        return None


def _triton_takes_rows_first() -> bool:
    """Whether the installed Triton takes rows first where a row is several slices (:func:`rows_first`)."""
    return rows_stay_in_their_warp() is False


#: :func:`_triton_takes_rows_first`, read once, at import: a launch rule asked first inside a
#: ``torch.compile`` trace cannot read a package's metadata there (torch 2.11's Dynamo cannot trace
#: ``importlib.metadata``)
_ROWS_FIRST = _triton_takes_rows_first()


def rows_first(block_h: int) -> bool:
    """Whether the routing kernels take their dense blocks rows first, ``[BLOCK_N, BLOCK_H, BLOCK_W]``
    (their ``ROWS_FIRST``), rather than slices first, ``[BLOCK_H, BLOCK_N, BLOCK_W]``: where a row is
    several slices (``block_h > 1``: float32 and float64 rows, and rows that are not 16-byte aligned,
    as LLaMA-1B's 120 atoms in bfloat16) and the installed Triton is older than
    :data:`IN_WARP_SINCE`. By the sm_90 reports of both orders (``compile_triton_for_gpu.py 90
    --orders``; docs/concepts/gpu-path.md, "Triton versions"): under Triton 3.6 rows first takes
    fewer instructions a row and barriers wherever a row is several slices (the CLIP tower's float32
    eval forward 1,125 warp instructions a row and 11 barriers, against 1,553 and 138; LLaMA-1B's
    bfloat16 decode 380 against 510), and more where it is one (the tower's bfloat16 eval forward
    639 against 541); from 3.7 on slices first keeps each row in its warp, and rows first spreads it
    (the tower's float32 eval forward 1,355 against 1,022 under 3.9). The installed Triton is asked
    once, at import (:data:`_ROWS_FIRST`)."""
    return block_h > 1 and _ROWS_FIRST


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


def launch_index(device: torch.device) -> Optional[int]:
    """The CUDA device a launch on tensors of ``device`` makes current first (module docstring), or
    None where it launches as it is: a process that sees one GPU (asked first: one flag), off CUDA
    (the interpreter), a device without an index (the current one), and inside ``torch.compile``
    (module docstring). Asked once per launch on the long way (:func:`on_device`), and once per
    row count by the read-out a planned call binds (:class:`ReadOut`)."""
    global _SEVERAL_GPUS
    if _SEVERAL_GPUS is False or device.type != "cuda" or device.index is None or torch.compiler.is_compiling():
        return None
    if _SEVERAL_GPUS is None:
        _SEVERAL_GPUS = torch.cuda.device_count() > 1
    return device.index if _SEVERAL_GPUS else None


def launched_on(index: int, launcher: Callable, *args, **kwargs):
    """``launcher(*args, **kwargs)`` with CUDA device ``index`` current (:func:`launch_index`): made
    current only where another is, and the one before made current again after."""
    if torch.cuda.current_device() == index:
        return launcher(*args, **kwargs)
    with torch.cuda.device(index):
        return launcher(*args, **kwargs)


def on_device(device: torch.device, launcher: Callable) -> Callable:
    """``launcher`` itself, or, where a launch on tensors of ``device`` must make that device current
    first (:func:`launch_index`), ``launcher`` made to do so (:func:`launched_on`): what each launch
    on the long way calls (no arguments repacked where nothing is to be done)."""
    index = launch_index(device)
    return launcher if index is None else functools.partial(launched_on, index, launcher)


def _kernels():
    global _routing
    if _routing is None:
        from . import triton_kernels as triton_routing  # imports triton

        _routing = triton_routing
    return _routing


class Launch(NamedTuple):
    """How the routing kernels are launched on ``N`` rows of ``R`` projections with ``k`` kept (:func:`launch`)."""

    grid: Tuple[int]
    block_n: int  # token rows a program takes
    block_h: int  # a row's slices ...
    block_w: int  # ... of this many columns: BLOCK_R = BLOCK_H * BLOCK_W, the bank rounded up to a power of two
    block_k: int  # the kept set's slots: k rounded up (at least a row's lanes); the whole bank when all are kept
    num_warps: int
    rows_first: bool = False  # the dense blocks' order: [BLOCK_N, BLOCK_H, BLOCK_W] (rows_first), or slices first


def _power_of_two(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


def launch(num_rows: int, num_atoms: int, k: int, itemsize: int) -> Launch:
    """The launch of the routing kernels on ``num_rows`` tokens of ``num_atoms`` projections of ``itemsize``
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
    block_h = block_r // block_w
    return Launch((-(-num_rows // block_n),), block_n, block_h, block_w, block_k, warps, rows_first(block_h))


#: the most token rows the layer's GPU path reads out with :func:`route_read_out` (one kernel for
#: steps 2-6) where no backward follows; more rows take :func:`route_forward` and a GEMM. Each of
#: the read-out's programs routes its rows again for its column block and reads ``B`` at ``k``
#: gathered rows without tensor cores: at a decode step's few rows that is one kernel instead of
#: two and no dense ``c``; at the CLIP tower's 12,608 rows the sm_90 compile report counts 7.6x
#: (d_out 768) to 30x (3072) the routing kernel's bf16 instructions a row
#: (``tests/layers/moram/compile_triton_for_gpu.py``), more than the GEMM it saves. A first bound, to be set by a GPU's measurement (``scripts/gpu_check.sh``)
READ_OUT_ROWS = 64

#: the programs :func:`read_out_launch` aims for when it narrows its column blocks: about one
#: a streaming multiprocessor of an H100 / H200 (132; an A100 has 108)
READ_OUT_PROGRAMS = 128


class ReadOutLaunch(NamedTuple):
    """How :func:`route_read_out` is launched (:func:`read_out_launch`): the routing's blocks
    (:class:`Launch`) and ``block_o`` output columns a program, on a grid of (row blocks, column blocks)."""

    grid: Tuple[int, int]
    block_n: int
    block_h: int
    block_w: int
    block_k: int
    block_o: int  # output columns a program: a power of two
    num_warps: int
    rows_first: bool = False  # as :class:`Launch`'s


def read_out_launch(num_rows: int, num_atoms: int, k: int, itemsize: int, num_outputs: int) -> ReadOutLaunch:
    """The launch of :func:`route_read_out` on ``num_rows`` tokens of ``num_atoms`` projections
    (``k < num_atoms`` kept) and ``num_outputs`` output columns, all of ``itemsize`` bytes.

    The routing takes :func:`launch`'s blocks and warps as they are (each program routes its
    ``block_n`` rows again for its column block: a few hundred instructions a row, against ``k``
    gathered rows of ``B``). The column block ``block_o`` is at most one 16-byte load a thread a
    kept slot (``32 * num_warps * (16 / itemsize) / block_n`` columns: 256 in bfloat16 at four
    rows of four warps, 128 in float32, 64 in float64; the ``k`` slots' loads, which the compiler
    issues together, then take ``4k`` registers at most) and no wider than the output; it halves,
    down to 64 columns (a 128-byte line a row in bfloat16), while the grid has fewer than
    :data:`READ_OUT_PROGRAMS` programs -- a decode step's few rows then still spread over the GPU:
    LLaMA-3.2-1B's 8 rows, two programs of rows, take 2048 columns as 32 blocks of 64 (64 programs),
    8192 as 128 (256).
    """
    route = launch(num_rows, num_atoms, k, itemsize)
    widest = 32 * route.num_warps * (16 // itemsize) // route.block_n
    block_o = min(widest, max(16, _power_of_two(num_outputs)))
    blocks_of = lambda width: -(-num_outputs // width)  # noqa: E731
    while block_o > 64 and route.grid[0] * blocks_of(block_o) < READ_OUT_PROGRAMS:
        block_o //= 2
    return ReadOutLaunch((route.grid[0], blocks_of(block_o)), route.block_n, route.block_h, route.block_w,
                         route.block_k, block_o, route.num_warps, route.rows_first)


_BOUND = {}  # (the kernels' source, kernel, launch rule's arguments, constants) -> the kernel's bound launcher


def kept_kernel(name: str, bind: Callable, *args) -> Callable:
    """``bind(kernel, *args)``: the kernel ``name`` of :func:`_kernels` launched with its grid and
    compile-time constants bound (:func:`kept_or_plain`), made once per distinct
    ``args`` (at most 4096; then started again) and kept, so that a call on the long way repeating
    its shapes (a task's training steps, a decode step over a bank with trainable rows) pays one
    dictionary lookup for what working out the launch (:func:`launch`, :func:`read_out_launch`) and
    the binding cost (about 18 thousand instructions a call; issue "GPU path II"). The key holds where the kernels come from
    (``_kernels`` and the module it imported, as they are now: a test that replaces either gets
    launchers of its own); under ``torch.compile`` made at tracing (no cache in the graph; Triton's
    own ``kernel[grid]``, which the graph keeps). What is kept is what :class:`ReadOut` keeps per
    row count: a :class:`~moram_avalanche.layers.moram.paths.triton_launch.KeptLaunch`, which keeps
    the compiled kernel of each class of arguments it meets."""
    if torch.compiler.is_compiling():
        return bind(getattr(_kernels(), name), *args)
    key = (_kernels, _routing, name, *args)
    found = _BOUND.get(key)
    if found is None:
        if len(_BOUND) >= 4096:
            _BOUND.clear()
        found = _BOUND[key] = bind(getattr(_kernels(), name), *args)
    return found


#: the first element offset int32 cannot hold: a launch that can form it sets ``LONG_INDEX``
#: (:func:`long_index`; the kernels' module docstring, "Offsets")
LONG_OFFSET = 2 ** 31


def long_index(rows: int, row_stride: int, width: int) -> bool:
    """Whether a launch over ``rows`` rows ``row_stride`` entries apart (the largest row stride it
    passes), each read or written ``width`` entries from its start, forms an element offset of
    :data:`LONG_OFFSET` or more, where the kernels' int32 arithmetic would wrap: its last entry's,
    ``(rows - 1) * row_stride + width - 1``, or a row number (the norms' offsets; the programs' rows
    end at the next multiple of their power-of-two block, at most ``2 ** 31`` while ``rows`` is).
    The kernels then take their rows as int64 (``LONG_INDEX``)."""
    return (rows - 1) * row_stride + width > LONG_OFFSET or rows > LONG_OFFSET


def _float_arguments(dtype: torch.dtype, *numbers: float) -> tuple:
    """The kernels' float arguments for projections of ``dtype``: the numbers (Triton passes a Python
    float as float32, ``triton.runtime.jit.mangle_type``: exact enough for the float32 routing); for
    float64 the int64 of each number's float64 bits, which the kernels read back exactly
    (``triton_kernels._exact``; Triton passes such an int as int64, or as int32 for 0.0's bits)."""
    if dtype != torch.float64:
        return numbers
    return tuple(struct.unpack("<q", struct.pack("<d", float(number)))[0] for number in numbers)


def _row_major(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` itself where its last stride is 1 (any row stride: a view into a wider tensor), else a copy."""
    return tensor if tensor.stride(-1) == 1 else tensor.contiguous()


def route_forward(proj: torch.Tensor, k: int, temperature: float, threshold: Optional[float],
                  want_weights: bool = False, want_state: bool = False
                  ) -> Tuple[torch.Tensor, Optional[torch.Tensor], Tuple[torch.Tensor, ...]]:
    """Steps 2-5 on ``proj`` ``[N, R]``: ``(c [N, R] in proj's dtype, w [N, R] float32 or None, state)``.

    ``state`` (``want_state``: a backward will follow; else ``()``) is what :func:`route_backward`
    reads instead of selecting again: the kept columns ``[N, k]`` int16, largest first (``[N, 0]``
    where every atom is kept), and the norms ``max(||p||, eps)`` ``[N]`` in the routing dtype.
    ``proj`` may be a view with rows apart (the stacked GEMM's ``p``): only its last stride must be 1.
    """
    proj = _row_major(proj)
    rows, atoms = proj.shape
    device, dtype = proj.device, proj.dtype
    coef = torch.empty_like(proj)  # contiguous even for a view with rows apart (not dense)
    proj_stride, coef_stride = proj.stride()[0], coef.stride()[0]  # (each read once)
    weights, weights_stride = coef, coef_stride
    if want_weights:
        weights = torch.empty(rows, atoms, device=device, dtype=torch.float32)
        weights_stride = weights.stride()[0]
    kept_k = 0 if k >= atoms else int(k)  # (the kept columns: none where every atom is kept)
    inv_tau, delta, eps = _float_arguments(dtype, 1.0 / float(temperature),
                                           0.0 if threshold is None else float(threshold), RELEVANCE_EPS)
    state = ()
    if want_state:
        state = (torch.empty(rows, kept_k, device=device, dtype=torch.int16),
                 torch.empty(rows, device=device, dtype=route_dtype(dtype)))
    kept, norm = state or (coef, coef)
    # (coef and the weights are made here, rows R apart; the kept columns' rows, k apart, end within theirs)
    launcher = kept_kernel("route_forward_kernel", _bind_routing, rows, atoms, k, proj.element_size(),
                           threshold is not None, max(proj_stride, atoms),
                           (("WRITE_W", want_weights), ("SAVE", want_state)))
    on_device(device, launcher)(proj, coef, weights, kept, norm, rows, atoms, proj_stride, coef_stride, weights_stride,
                                inv_tau, delta, eps)
    return coef, (weights if want_weights else None), state


def _bind_routing(kernel, rows: int, atoms: int, k: int, itemsize: int, gated: bool, row_stride: int,
                  writes: Tuple[Tuple[str, bool], ...]) -> Callable:
    """:func:`route_forward`'s or :func:`route_backward`'s launcher: ``kernel[grid]`` of
    :func:`launch` with the compile-time constants bound (``writes``: the kernel's own flags, by
    name), ``LONG_INDEX`` (:func:`long_index`) decided from the largest row stride it passes,
    ``row_stride``: what :func:`kept_kernel` keeps."""
    grid, block_n, block_h, block_w, block_k, warps, order = launch(rows, atoms, k, itemsize)
    keep_all = k >= atoms
    return kept_or_plain(kernel, grid, K=0 if keep_all else int(k), **dict(writes), BLOCK_N=block_n,
                         BLOCK_H=block_h, BLOCK_W=block_w, BLOCK_K=block_k,
                         LONG_INDEX=long_index(rows, row_stride, atoms), ROWS_FIRST=order, num_warps=warps,
                         GATED=gated, KEEP_ALL=keep_all)


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
    inv_tau, delta, eps = _float_arguments(proj.dtype, 1.0 / float(temperature),
                                           0.0 if threshold is None else float(threshold), RELEVANCE_EPS)
    strides = (0 if grad_coef is None else grad_coef.stride()[0], proj.stride()[0],
               0 if grad_proj is None else grad_proj.stride()[0], 0 if coef is None else coef.stride()[0])
    launcher = kept_kernel("route_backward_kernel", _bind_routing, rows, atoms, k, proj.element_size(),
                           threshold is not None, max(strides),
                           (("WRITE_GRAD", grad_coef is not None), ("WRITE_COEF", want_coef)))
    on_device(proj.device, launcher)(
        anything if grad_coef is None else grad_coef, proj, kept, norm, anything if grad_proj is None else grad_proj,
        anything if coef is None else coef, rows, atoms, *strides, inv_tau, delta, eps)
    return grad_proj, coef


def _read_out_refusal(proj, base_out, values, k) -> Optional[str]:
    """Why :func:`route_read_out` cannot take these arguments (what to do instead), or None."""
    if proj.dim() != 2 or values.dim() != 2 or values.shape[0] != proj.shape[1]:
        return (f"route_read_out takes proj [N, R] and values [R, d_out], got {tuple(proj.shape)} and "
                f"{tuple(values.shape)}: pass the projections and the bank's values")
    if base_out is not None and base_out.shape != (proj.shape[0], values.shape[1]):
        return (f"route_read_out takes base_out [N, d_out] = {[proj.shape[0], values.shape[1]]}, got "
                f"{list(base_out.shape)}: pass W x + b for the same tokens, or None")
    dtypes = {proj.dtype, values.dtype} | ({base_out.dtype} if base_out is not None else set())
    if len(dtypes) != 1:
        return (f"route_read_out takes proj, base_out and values in one dtype, got {sorted(map(str, dtypes))}: "
                "cast them to the compute dtype first")
    if not 1 <= k < proj.shape[1]:
        return (f"route_read_out keeps 1 <= k < R atoms, got k = {k} of R = {proj.shape[1]}: where every atom "
                "is kept, use route_forward and then out.addmm_(c, values)")
    if not fits(proj.shape[1]):
        return (f"route_read_out holds a bank of at most {MAX_ATOMS} atoms, got {proj.shape[1]}: "
                "use the dense path's PyTorch router")
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (proj, base_out, values)):
        return ("route_read_out has no backward (it saves nothing): use route_forward with want_state=True "
                "and route_backward, or call it under torch.no_grad()")
    return None


def route_read_out(proj: torch.Tensor, base_out: Optional[torch.Tensor], values: torch.Tensor, k: int,
                   temperature: float, threshold: Optional[float]) -> torch.Tensor:
    """Steps 2-6 of the eval forward in one kernel: ``y = base_out + c B``, a new contiguous ``[N, d_out]``.

    Takes ``proj`` ``p = A x`` ``[N, R]``, ``base_out`` ``y0 = W x + b`` ``[N, d_out]`` (None: ``y = c B``,
    the atoms' term alone) and ``values`` ``B`` ``[R, d_out]``, all in one dtype (float32, bfloat16,
    float16 or float64); ``proj`` and ``base_out`` may have any row stride (their last stride 1), e.g.
    the two views ``full[:, d_out:]`` and ``full[:, :d_out]`` of one GEMM's
    ``full = x [W; A]^T + [b; 0]`` ``[N, d_out + R]``; ``values`` is read as given, contiguous.
    ``k`` (``1 <= k < R``), ``temperature`` and ``threshold`` (the gate ``delta``, None for none) are
    the layer's, as :func:`route_forward` takes them.

    Steps 2-5 are :func:`route_forward`'s arithmetic (float32 for 16- and 32-bit inputs, float64 for
    float64): the same kept set (ties to the lower column), the same ``c_i = w_i p_i``. Step 6 sums
    ``c_i B_i`` over each row's ``k`` kept atoms in that precision, then adds ``y0``, and rounds once
    to the dtype. What differs from the dense path (``route_forward``, then ``y0.addmm_(c, B)``): ``c``
    is not rounded to the dtype before its product, and an atom whose ``c_i`` is 0 (a closed gate)
    is not read (as the reference path's gated read-out skips it); a row whose gate closes on every
    atom comes back as ``y0`` exactly.

    Eval only: nothing is saved for a backward, and no weights are written for the activation
    statistics (recording, or a backward to follow: use :func:`route_forward`). Refused with a
    ValueError: ``k >= R``, a bank wider than :data:`MAX_ATOMS`, mixed dtypes, inputs that need a
    gradient. One user-defined Triton kernel, which ``torch.compile(fullgraph=True)`` keeps in its
    graph. Launch: :func:`read_out_launch`.
    """
    problem = _read_out_refusal(proj, base_out, values, k)
    if problem is not None:
        raise ValueError(problem)
    return run_read_out(proj, base_out, values, k, temperature, threshold)


def run_read_out(proj: torch.Tensor, base_out: Optional[torch.Tensor], values: torch.Tensor, k: int,
                 temperature: float, threshold: Optional[float]) -> torch.Tensor:
    """:func:`route_read_out` without its argument checks: for a caller that has made them (the
    layer's dense path, which takes it only where they hold: :data:`READ_OUT_ROWS`). Its launcher,
    ``LONG_INDEX`` included, is kept per shape and row strides (:func:`kept_kernel`), and each
    stride is read once: the long way's read-out (a bank with trainable rows) repeats them."""
    proj, values = _row_major(proj), (values if values.is_contiguous() else values.contiguous())
    base_out = None if base_out is None else _row_major(base_out)
    rows, atoms = proj.shape
    outputs = values.shape[1]
    device, dtype = proj.device, proj.dtype
    out = torch.empty(rows, outputs, device=device, dtype=dtype)
    # (out is made here, contiguous: its rows max(d_out, 1) apart, torch's contiguous row stride)
    proj_stride, values_stride, out_stride = proj.stride()[0], values.stride()[0], max(outputs, 1)
    base_stride = 0 if base_out is None else base_out.stride()[0]
    launcher = kept_kernel("route_read_out_kernel", _bind_read_out, rows, atoms, k, proj.element_size(), outputs,
                           threshold is not None, base_out is not None, max(proj_stride, base_stride, out_stride),
                           values_stride)
    inv_tau, delta, eps = _float_arguments(dtype, 1.0 / float(temperature),
                                           0.0 if threshold is None else float(threshold), RELEVANCE_EPS)
    on_device(device, launcher)(
        proj, out if base_out is None else base_out, values, out, rows, atoms, outputs, 0, proj_stride,
        base_stride, values_stride, out_stride, inv_tau, delta, eps)
    return out


def _bind_read_out(kernel, rows: int, atoms: int, k: int, itemsize: int, outputs: int, gated: bool, base: bool,
                   row_stride: int, values_stride: int) -> Callable:
    """:func:`run_read_out`'s launcher (:func:`read_out_launcher` of :func:`read_out_launch`), its
    int64 offsets (:func:`long_index`) decided from the largest row stride of ``proj``, ``base_out``
    and ``out`` and from the bank's (``values_stride``): what :func:`kept_kernel` keeps."""
    wide = long_index(rows, row_stride, max(atoms, outputs)) or long_index(atoms, values_stride, outputs)
    return read_out_launcher(read_out_launch(rows, atoms, k, itemsize, outputs), k, gated, base, wide, kernel)


def read_out_launcher(launch: ReadOutLaunch, k: int, gated: bool, base: bool, wide: bool = False,
                      kernel=None) -> Callable:
    """The read-out kernel (``kernel``; None: :func:`_kernels`'s) launched by ``launch`` with its
    compile-time constants (``k``, the gate, a base or none, the blocks, int64 offsets or not:
    ``wide``, :func:`long_index`) bound: it takes
    the 15 arguments that vary (``proj``, ``base_out`` (``out`` where none), ``values``, ``out``, the
    row, atom and output counts, where ``p`` starts in ``proj`` (entries), the four row strides,
    ``1 / tau``, ``delta`` (0 where none), the relevances' epsilon: the three as
    :func:`_float_arguments` gives them)."""
    grid, block_n, block_h, block_w, block_k, block_o, warps, order = launch
    kernel = _kernels().route_read_out_kernel if kernel is None else kernel
    return kept_or_plain(kernel, grid, K=int(k), GATED=gated, BASE=base, BLOCK_N=block_n, BLOCK_H=block_h,
                         BLOCK_W=block_w, BLOCK_K=block_k, BLOCK_O=block_o, LONG_INDEX=wide, ROWS_FIRST=order,
                         num_warps=warps)


class ReadOut:
    """:func:`run_read_out` over one frozen bank's ``values`` with ``k``, ``temperature`` and
    ``threshold`` bound once, onto a base's output or none (``base``): what a planned eval call
    repeats (:class:`~moram_avalanche.layers.moram.plan.EvalPlan`; issue "GPU path II", item 7: a
    call's host cost). It gives what :func:`run_read_out` gives: the same kernel on the same
    entries with the same arguments, those that do not change from call to call (the bank's size
    and stride, ``1 / tau``, the gate, the launch and its constants per row count:
    :func:`read_out_launcher`) worked out at construction and at a row count's first call. Two
    calls, for two kinds of first GEMM:

    * ``read_out(proj, base_out=None, shape=None)``: ``proj`` ``[N, R]`` and, with a base,
      ``base_out`` ``[N, d_out]`` (rows of unit column stride: two GEMMs' outputs);
    * :meth:`joined` ``(full, shape=None)``: the stacked GEMM's output ``[N, d_out + R]`` (``y0``
      then ``p``, :func:`~moram_avalanche.layers.moram.paths.dense.stacked_mixture`'s), read in
      place: no views of it made (about 2 us of host time a call on the CPU, where a split's two
      views are freed with the GEMM's output).

    ``shape``: the output's (the call's leading dimensions and ``d_out``; ``[N, d_out]`` where
    None), so that no reshape of it follows. The output is made from its sizes as separate integers
    (``new_empty(*shape)``): PyTorch's argument parser reads a ``torch.Size`` or a tuple of sizes
    more slowly (on this project's CPU, about 8 thousand instructions for ints, 11 thousand for a
    tuple, 16 thousand for a ``torch.Size``). The caller has made :func:`route_read_out`'s checks
    (the plan's first call took the long way, which made them).

    Row strides: ``out`` is made here (``d_out`` apart), the bank's are fixed; ``proj``'s,
    ``base_out``'s and ``full``'s are a call's, read at none (its host cost). Its callers pass
    fresh GEMM outputs (``R``, ``d_out`` and ``d_out + R`` apart), so a row count's launcher takes
    int64 offsets (:func:`long_index`) where rows ``d_out + R`` apart, or the bank, would need them:
    rows further apart than ``d_out + R`` take :func:`run_read_out`."""

    __slots__ = ("values", "k", "inverse_temperature", "threshold", "delta", "eps", "atoms", "outputs", "itemsize",
                 "values_stride", "base", "long_bank", "launchers")

    def __init__(self, values: torch.Tensor, k: int, temperature: float, threshold: Optional[float],
                 base: bool = True):
        self.values = values if values.is_contiguous() else values.contiguous()
        self.k, self.threshold = int(k), threshold
        # (the kernel's arguments, delta 0 where there is no gate: GATED says if it counts)
        self.inverse_temperature, self.delta, self.eps = _float_arguments(
            values.dtype, 1.0 / float(temperature), 0.0 if threshold is None else float(threshold), RELEVANCE_EPS)
        self.atoms, self.outputs = values.shape
        self.itemsize, self.values_stride, self.base = values.element_size(), self.values.stride(0), base
        self.long_bank = long_index(self.atoms, self.values_stride, self.outputs)
        self.launchers = {}  # row count -> its launcher (at most READ_OUT_ROWS of them)

    def launcher(self, rows: int) -> Callable:
        """The kernel's launcher for ``rows`` token rows (:func:`read_out_launcher`), made at their
        first call, made to run on the bank's device (:func:`on_device`: where this process sees several
        GPUs); int64 offsets where rows ``d_out + R`` apart or the bank need them (class docstring)."""
        launch = read_out_launch(rows, self.atoms, self.k, self.itemsize, self.outputs)
        wide = self.long_bank or long_index(rows, self.outputs + self.atoms, max(self.outputs, self.atoms))
        launcher = self.launchers[rows] = on_device(self.values.device, read_out_launcher(
            launch, self.k, self.threshold is not None, self.base, wide))
        return launcher

    def __call__(self, proj: torch.Tensor, base_out: Optional[torch.Tensor] = None,
                 shape: Optional[Tuple[int, ...]] = None) -> torch.Tensor:
        rows, outputs = proj.shape[0], self.outputs
        launcher = self.launchers.get(rows) or self.launcher(rows)
        out = proj.new_empty(rows, outputs) if shape is None else proj.new_empty(*shape)  # (sizes as ints: docstring)
        # (no base: the kernel reads none; run_read_out passes out and a stride of 0 in its place)
        base, base_stride = (out, 0) if base_out is None else (base_out, base_out.stride(0))
        launcher(proj, base, self.values, out, rows, self.atoms, outputs, 0, proj.stride(0), base_stride,
                 self.values_stride, outputs, self.inverse_temperature, self.delta, self.eps)
        return out

    def joined(self, full: torch.Tensor, shape: Optional[Tuple[int, ...]] = None) -> torch.Tensor:
        """The read-out onto the stacked GEMM's output ``full`` ``[N, d_out + R]`` (unit column
        stride): ``y0`` its first ``d_out`` columns, ``p`` the rest (class docstring)."""
        rows, outputs = full.shape[0], self.outputs
        launcher = self.launchers.get(rows) or self.launcher(rows)
        out = full.new_empty(rows, outputs) if shape is None else full.new_empty(*shape)  # (sizes as ints: docstring)
        stride = full.stride(0)
        launcher(full, full, self.values, out, rows, self.atoms, outputs, outputs, stride, stride,
                 self.values_stride, outputs, self.inverse_temperature, self.delta, self.eps)
        return out


__all__ = ["LONG_OFFSET", "Launch", "MAX_ATOMS", "READ_OUT_PROGRAMS", "READ_OUT_ROWS", "ROW_PER_WARP", "ReadOut", "ReadOutLaunch", "fits",
           "installed", "interpreting", "kept_kernel", "launch", "launch_index", "launched_on", "long_index", "on_device", "read_out_launch", "read_out_launcher", "route_backward",
           "route_forward", "route_read_out", "run_read_out", "usable", "why_not"]
