"""Compile MoRAM's three Triton kernels for NVIDIA GPUs without one, and report what a GPU would run.

Run as a script by tests/layers/moram/test_paths.py, in a process without ``TRITON_INTERPRET``
(with it, ``triton.jit`` makes interpreted functions). Two parts, for each target named on the
command line (default: 90 = Hopper, H100 / H200; 80 = Ampere):

1. The check: Triton's own compiler, to PTX and cubin, on each code path of the kernels'
   compile-time flags, in the pointer dtypes the GPU path launches (``--every``: every
   combination of flags, dtypes, bank widths and kept counts). A type or shape error that the
   interpreter lets through (it runs NumPy) fails here, as it would at the first launch on a GPU.
   One ``ok`` line per kernel and target; exit 1 on the first error.
2. The report: each kernel at the shapes that matter -- a CLIP ViT-B/16 tower layer (R = 160 atoms,
   k = 16, 64 x 197 tokens; d = 768 or 3072 changes the GEMMs around the kernels, not the kernels,
   which see only ``p`` ``[N, R]``) and LLaMA-3.2-1B decoding (R = 120, k = 4, 8 tokens); then the
   eval read-out (``route_read_out_kernel``, gated, ``y0`` added), which reads ``B`` ``[R, d_out]``, at
   LLaMA-3.2-1B decoding (8 tokens, R = 240 = 15 tasks x 16, k = 16 and 4, d_out = 2048, 8192 and
   512; ``p`` and ``y0`` read in place from one ``[N, d_out + R]`` GEMM output, as a planned call
   reads them: ``p`` at ``offset_p = d_out``) and the CLIP tower (d_out =
   768 and 3072) -- compiled
   as a launch of the GPU path compiles it (its block sizes and warps from
   :func:`~moram_avalanche.layers.moram.paths.triton.launch` and ``read_out_launch``, the alignment hints Triton's launcher
   derives: 16-byte-aligned pointers, integers divisible by 16), with what its cubin says
   (``cuobjdump``, shipped with Triton): SASS instructions per token row (the instructions one warp
   issues, a loop counted as many times as it runs -- ``k`` for a top-k loop --, division's slow
   path not counted, times the warps per program, over the rows per program; the read-out's times
   its column blocks: every program a row takes), registers per
   thread, spills, shared memory, barriers, and the theoretical occupancy, programs and waves on
   the target (132 SMs for sm_90, 108 for sm_80). ``--against REV`` reports the kernels of a
   git revision beside (the module and its launch rule read from that revision; the routing
   kernels only). ``--orders`` reports the kernels in both orders of their dense blocks beside each
   other (``slices``: ``[BLOCK_H, BLOCK_N, BLOCK_W]``, ``rows``: ``[BLOCK_N, BLOCK_H, BLOCK_W]``, the
   launch rule's ``rows_first`` overridden), where a line otherwise says ``now`` (the rule's order
   for the installed Triton: :func:`~moram_avalanche.layers.moram.paths.triton.rows_first`).

    python tests/layers/moram/compile_triton_for_gpu.py [90 80] [--every] [--against REV] [--orders]
"""

import ast
import importlib.util
import itertools
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple, Optional

os.environ.pop("TRITON_INTERPRET", None)

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from moram_avalanche.layers.moram.paths import triton as moram_triton
from moram_avalanche.layers.moram.paths import triton_kernels as triton_routing

ROOT = Path(__file__).resolve().parents[3]
KERNELS = "moram_avalanche/layers/moram/paths/triton_kernels.py"
LAUNCHER = "moram_avalanche/layers/moram/paths/triton.py"
TOOLS = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"

SCALARS = {"n_rows": "i32", "n_atoms": "i32", "n_out": "i32", "offset_p": "i32", "k": "i32", "inv_tau": "fp32", "delta": "fp32", "eps": "fp32"}
STORAGE = {"fp32": "*fp32", "bf16": "*bf16", "fp16": "*fp16", "fp64": "*fp64"}
ITEMSIZE = {"fp32": 4, "bf16": 2, "fp16": 2, "fp64": 8}
FLAGS = ("GATED", "KEEP_ALL", "WRITE_W", "SAVE", "WRITE_GRAD", "WRITE_COEF", "BASE")
FLOATS = ("inv_tau", "delta", "eps")


class Target(NamedTuple):
    """What bounds a program's residency on one SM (CUDA's occupancy rules for the architecture)."""

    sms: int
    registers: int = 65536
    threads: int = 2048
    blocks: int = 32
    shared: int = 228 * 1024  # per SM; each block also reserves 1 KiB
    register_unit: int = 256  # registers are allocated per warp in units of 256


TARGETS = {90: Target(sms=132), 80: Target(sms=108, shared=164 * 1024)}


class Workload(NamedTuple):
    name: str
    rows: int
    atoms: int
    k: int


WORKLOADS = (Workload("CLIP tower, 64 x 197 tokens", 64 * 197, 160, 16),
             Workload("LLaMA-1B decode, 8 tokens", 8, 120, 4))


class ReadOutWorkload(NamedTuple):
    name: str
    rows: int
    atoms: int
    k: int
    outputs: int


#: the read-out's shapes: LLaMA-3.2-1B decoding (q/o 2048, gate/up 8192 out of 2048, k/v 512), 15
#: tasks of 16 atoms; the CLIP ViT-B/16 tower (attention and c_proj 768, c_fc 3072)
READ_OUT_WORKLOADS = tuple(ReadOutWorkload(f"LLaMA-1B decode, 8 tokens, d_out = {outputs}", 8, 240, k, outputs)
                           for k in (16, 4) for outputs in (2048, 8192, 512)) + tuple(
    ReadOutWorkload(f"CLIP tower, 64 x 197 tokens, d_out = {outputs}", 64 * 197, 160, 16, outputs)
    for outputs in (768, 3072))


# ---------------------------------------------------------------- signatures and compiling
def signature(kernel, dtype):
    """Each non-constexpr argument's Triton type, by its name (the rest: the compute dtype's pointer)."""
    types = {}
    for param in kernel.params:
        name = param.name
        if param.is_constexpr:
            types[name] = "constexpr"
        elif name.startswith("stride"):
            types[name] = "i32"
        elif name in FLOATS and dtype == "fp64":
            types[name] = "i64"    # a float64 launch passes its floats' bits (paths/triton.py, _float_arguments)
        elif name in SCALARS:
            types[name] = SCALARS[name]
        elif name == "W":
            types[name] = "*fp32"  # the weights for the statistics: always float32
        elif name == "KEPT":
            types[name] = "*i16"   # the kept columns
        elif name == "NORM":
            types[name] = "*fp64" if dtype == "fp64" else "*fp32"  # the routing dtype
        else:
            types[name] = STORAGE[dtype]
    return types


def compile_kernel(kernel, dtype, flags, arch, num_warps=4, aligned=()):
    """Triton's compile of ``kernel`` for ``sm_<arch>``; ``aligned``: the arguments a launch hints as
    divisible by 16 (Triton's launcher does so for 16-byte-aligned tensors and such integers)."""
    constexprs = {name: value for name, value in flags.items() if name in kernel.arg_names}
    attrs = {(kernel.arg_names.index(name),): [["tt.divisibility", 16]] for name in aligned}
    source = ASTSource(kernel, signature(kernel, dtype), constexprs=constexprs, attrs=attrs)
    return triton.compile(source, target=GPUTarget("cuda", arch, 32), options={"num_warps": num_warps})


def blocks(launch):
    """The block sizes of a launch as the kernels' constexprs (``BLOCK_R`` for kernels that take it whole;
    ``BLOCK_O`` for the read-out's)."""
    sizes = dict(BLOCK_N=launch.block_n, BLOCK_H=launch.block_h, BLOCK_W=launch.block_w,
                 BLOCK_R=launch.block_h * launch.block_w, BLOCK_K=launch.block_k, ROWS_FIRST=launch.rows_first)
    if hasattr(launch, "block_o"):
        sizes["BLOCK_O"] = launch.block_o
    return sizes


def reads_out(kernel) -> bool:
    """Whether ``kernel`` is the read-out (it takes output columns, and never keeps every atom)."""
    return "BLOCK_O" in kernel.arg_names


def any_launch(kernel, rows, atoms, k, itemsize, outputs=2048):
    """The launch rule's launch of ``kernel`` (the read-out's on ``outputs`` columns)."""
    if reads_out(kernel):
        return moram_triton.read_out_launch(rows, atoms, k, itemsize, outputs)
    return moram_triton.launch(rows, atoms, k, itemsize)


def flag_names(kernel):
    return [name for name in FLAGS if name in kernel.arg_names]


def combinations(kernel, every: bool = False):
    """``(dtype, flags, num_warps)``: each code path (each combination of the flags, keeping every atom
    with the other flags all on or all off) in float32, bfloat16 and float64 at a 256-wide bank with
    k = 16, and the widest bank once; ``every``: every combination of the flags, in float16 too, at
    banks of 16, 120, 256, 1100 and 8192 atoms with k = 2, 4, 16, 5 and 2. The read-out (no
    ``KEEP_ALL``: it refuses ``k >= R``) at 1000 rows of 2048 output columns (its widest column
    block), and with ``every`` at each column block its launch rule gives: 1000 rows of 20 columns,
    8 (a decode step's) of 2048 and of 8192 too. Each with 32-bit offsets (``LONG_INDEX`` off, what
    every launch below 2 ** 31 entries takes), and each dtype's variant with every flag on, the
    read-out's too, with 64-bit ones (``every``: each variant both ways); those with 64-bit offsets
    in both block orders too (``ROWS_FIRST``: the launch rule's and the other, which another Triton
    takes; ``every``: each variant)."""
    names = flag_names(kernel)
    column_cases = ((1000, 20), (8, 2048), (8, 8192), (1000, 2048)) if every and reads_out(kernel) else ((1000, 2048),)
    dtypes = ("fp32", "bf16", "fp16", "fp64") if every else ("fp32", "bf16", "fp64")
    shapes = [(16, 2), (120, 4), (256, 16), (1100, 5), (8192, 2)] if every else [(256, 16)]
    variants = [(dtype, atoms, k, outputs, dict(zip(names, values)))
                for dtype, (atoms, k), outputs in itertools.product(dtypes, shapes, column_cases)
                for values in itertools.product((False, True), repeat=len(names))]
    if not every:
        variants = [variant for variant in variants if not variant[4].get("KEEP_ALL") or
                    len({value for name, value in variant[4].items() if name != "KEEP_ALL"}) == 1]
        variants.append(("fp32", 8192, 16, (1000, 2048), dict.fromkeys(names, True)))
        variants = [(*variant, False) for variant in variants] + [
            (dtype, 256, 16, (1000, 2048), dict(dict.fromkeys(names, True), KEEP_ALL=False), True) for dtype in dtypes]
    else:
        variants = [(*variant, wide) for variant in variants for wide in (False, True)]
    for dtype, atoms, k, (rows, outputs), flags, wide in variants:
        if "WRITE_GRAD" in names and not (flags["WRITE_GRAD"] or flags["WRITE_COEF"]):
            continue  # the backward always writes something
        keep_all = flags.get("KEEP_ALL", False)
        if keep_all:
            k = atoms
        launch = any_launch(kernel, rows, atoms, k, ITEMSIZE[dtype], outputs)
        launches = [launch]
        if every or wide:  # (without every, the variants with 64-bit offsets are those with every flag on)
            launches.append(launch._replace(rows_first=not launch.rows_first))  # the other order, as another Triton
        for each in launches:
            yield dtype, dict(flags, F64=dtype == "fp64", K=0 if keep_all else k, LONG_INDEX=wide, **blocks(each)), \
                each.num_warps


def check(arch, every):
    """Part 1: every variant of the three kernels to cubin; prints an ok line per kernel, False on an error."""
    for kernel in (triton_routing.route_forward_kernel, triton_routing.route_backward_kernel,
                   triton_routing.route_read_out_kernel):
        start, count = time.perf_counter(), 0
        for dtype, flags, warps in combinations(kernel, every):
            try:
                compiled = compile_kernel(kernel, dtype, flags, arch, warps)
            except Exception as error:
                while error.__cause__ is not None:  # the innermost of Triton's chained errors says what
                    error = error.__cause__
                print(f"FAIL {kernel.fn.__name__} sm_{arch} {dtype} {flags}: {type(error).__name__}: "
                      f"{str(error)[-800:]}")
                return False
            assert "cubin" in compiled.asm
            count += 1
        print(f"ok   {kernel.fn.__name__} sm_{arch}: {count} variants to cubin in {time.perf_counter() - start:.0f} s")
    return True


# ---------------------------------------------------------------- what the cubin says
def cuobjdump(cubin: bytes, *options):
    with tempfile.NamedTemporaryFile(suffix=".cubin") as file:
        file.write(cubin)
        file.flush()
        return subprocess.run([str(TOOLS / "cuobjdump"), *options, file.name], capture_output=True, text=True,
                              check=True).stdout


def sass(cubin: bytes):
    """``[(address, instruction)]`` of the kernel's SASS."""
    return [(int(address, 16), text.strip()) for address, text in
            re.findall(r"/\*([0-9a-f]{4,})\*/\s+([^;]*);", cuobjdump(cubin, "-sass"))]


def issued(instructions, trips: int) -> int:
    """Instructions one warp issues: up to the final ``EXIT`` (a slow path placed after it is not
    counted), an instruction inside a loop (a backward branch) ``trips`` times, ``NOP`` padding not."""
    last_exit = max(i for i, (_, text) in enumerate(instructions) if "EXIT" in text)
    body = instructions[:last_exit + 1]
    where = {address: i for i, (address, _) in enumerate(body)}
    weight = [1] * len(body)
    for i, (address, text) in enumerate(body):
        branch = re.search(r"\bBRA\b.*?0x([0-9a-f]+)\s*$", text)
        if branch and int(branch.group(1), 16) < address and int(branch.group(1), 16) in where:
            for j in range(where[int(branch.group(1), 16)], i + 1):
                weight[j] = trips
    return sum(w for w, (_, text) in zip(weight, body) if not text.startswith("NOP"))


def resources(cubin: bytes):
    usage = cuobjdump(cubin, "--dump-resource-usage")
    number = lambda field: int(re.search(fr"\b{field}:(\d+)", usage).group(1))  # noqa: E731
    return number("REG"), number("LOCAL") + number("STACK")


def occupancy(target: Target, registers: int, shared: int, warps: int):
    """``(resident programs per SM, fraction of the SM's warps)``."""
    per_warp = math.ceil(registers * 32 / target.register_unit) * target.register_unit
    by_registers = (target.registers // per_warp) // warps
    by_threads = target.threads // (32 * warps)
    by_shared = target.shared // (shared + 1024)
    programs = min(by_registers, by_threads, by_shared, target.blocks)
    return programs, programs * warps / (target.threads // 32)


# ---------------------------------------------------------------- the report
class Version(NamedTuple):
    """A version of the kernels: its module and launch rule ``(rows, atoms, k, itemsize) -> Launch``,
    and the block order that overrides the rule's (``--orders``; None: the rule's)."""

    name: str
    kernels: object
    launch: object
    rows_first: Optional[bool] = None


def old_version(revision: str, folder: Path) -> Version:
    """The kernels and launch rule of ``revision`` (its ``_launch(rows, atoms)``), read with git."""
    text = subprocess.run(["git", "-C", str(ROOT), "show", f"{revision}:{KERNELS}"], capture_output=True, text=True,
                          check=True).stdout
    path = folder / f"triton_kernels_{re.sub(r'[^A-Za-z0-9]', '_', revision)}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    launcher = subprocess.run(["git", "-C", str(ROOT), "show", f"{revision}:{LAUNCHER}"], capture_output=True,
                              text=True, check=True).stdout
    (function,) = [node for node in ast.parse(launcher).body
                   if isinstance(node, ast.FunctionDef) and node.name in ("_launch", "launch")]
    namespace = {}
    exec(compile(ast.Module([function], []), LAUNCHER, "exec"), namespace)

    def launch(rows, atoms, k, itemsize):
        grid, block_n, block_r, warps = namespace[function.name](rows, atoms)[:4]
        return moram_triton.Launch(grid, block_n, 1, block_r, block_r, warps)

    return Version(revision, module, launch)


def kernel_runs(version: Version, workload: Workload, dtype: str):
    """``(label, kernel, flags, launch, trips)`` of the three calls a layer makes: the training forward
    (the statistics' weights written, the kept set saved), the eval forward (gated) and the backward."""
    launch = version.launch(workload.rows, workload.atoms, workload.k, ITEMSIZE[dtype])
    common = dict(KEEP_ALL=False, F64=dtype == "fp64", K=workload.k, LONG_INDEX=False, **blocks(launch))
    kernels = version.kernels
    trips = workload.k  # a top-k loop runs k times
    yield "forward, train", kernels.route_forward_kernel, dict(common, GATED=False, WRITE_W=True, SAVE=True), launch, trips
    yield "forward, eval", kernels.route_forward_kernel, dict(common, GATED=True, WRITE_W=False, SAVE=False), launch, trips
    yield "backward", kernels.route_backward_kernel, dict(common, GATED=False, WRITE_GRAD=True, WRITE_COEF=True), \
        launch, trips


def aligned(kernel, workload: Workload, values=None):
    """The arguments a launch hints as divisible by 16: pointers (fresh, contiguous tensors), and the
    integers that are (the row counts, the bank's width, a contiguous row's stride). ``values``: the
    arguments' values where they are not these (a pointer's: its byte offset into its allocation)."""
    values = dict({"n_rows": workload.rows, "n_atoms": workload.atoms, "k": workload.k}, **(values or {}))
    names = []
    for param in kernel.params:
        if param.is_constexpr or param.name in ("inv_tau", "delta", "eps"):
            continue
        value = values.get(param.name, workload.atoms if param.name.startswith("stride") else 0)
        if value % 16 == 0:
            names.append(param.name)
    return names


def read_out_values(workload: ReadOutWorkload):
    """The read-out's arguments as a planned call gives them the stacked GEMM's output: ``y0`` and
    ``p`` in one ``[N, d_out + R]`` tensor (``P = Y0``, ``p`` at ``offset_p = d_out`` entries into
    it), ``B`` and ``y`` contiguous."""
    wide = workload.outputs + workload.atoms
    return {"n_out": workload.outputs, "offset_p": workload.outputs, "stride_p": wide, "stride_y0": wide,
            "stride_b": workload.outputs, "stride_y": workload.outputs}


def report_line(arch, target: Target, kernel, dtype, flags, launch, trips, hinted, programs_a_row=1):
    """What the cubin of one launch says, as one line (module docstring)."""
    compiled = compile_kernel(kernel, dtype, flags, arch, launch.num_warps, hinted)
    cubin = compiled.asm["cubin"]
    instructions = sass(cubin)
    per_row = issued(instructions, trips) * launch.num_warps / launch.block_n * programs_a_row
    registers, spilled = resources(cubin)
    shared = compiled.metadata.shared
    barriers = sum(text.startswith("BAR") for _, text in instructions)
    resident, fraction = occupancy(target, registers, shared, launch.num_warps)
    programs = math.prod(launch.grid)
    waves = programs / (resident * target.sms)
    columns = f" x {launch.block_o} columns" if hasattr(launch, "block_o") else ""
    return (f"{per_row:7.0f} instr/row  {registers:3d} regs  {spilled:3d} B spilled  {shared:5d} B shared  "
            f"{barriers:2d} bar  occupancy {fraction:4.0%} ({resident:2d} x {launch.num_warps} warps)  "
            f"{programs} programs ({waves:.2f} waves)  [{launch.block_n} x {launch.block_h * launch.block_w} "
            f"rows x atoms{columns}]")


def ordered(name: str, rows_first: bool) -> Version:
    """The kernels of this checkout with their launch rule's block order overridden (``--orders``)."""

    def launch(rows, atoms, k, itemsize):
        return moram_triton.launch(rows, atoms, k, itemsize)._replace(rows_first=rows_first)

    return Version(name, triton_routing, launch, rows_first)


def report(arch: int, versions, dtypes=("bf16", "fp16", "fp32")):
    target = TARGETS[arch]
    print(f"\nsm_{arch} ({target.sms} SMs): per token row, SASS instructions issued (all warps); registers a thread, "
          "spilled bytes, shared memory, barriers; occupancy; programs (waves)")
    for workload in WORKLOADS:
        print(f"  {workload.name}: R = {workload.atoms}, k = {workload.k}, N = {workload.rows}")
        for dtype in dtypes:
            for version in versions:
                for label, kernel, flags, launch, trips in kernel_runs(version, workload, dtype):
                    line = report_line(arch, target, kernel, dtype, flags, launch, trips, aligned(kernel, workload))
                    print(f"    {dtype} {version.name:>8} {label:<15} {line}")
    kernel = triton_routing.route_read_out_kernel
    print("  read-out (route_read_out_kernel: eval, gated, y0 added; instructions a row over all its column blocks)")
    for workload in READ_OUT_WORKLOADS:
        print(f"  {workload.name}: R = {workload.atoms}, k = {workload.k}, N = {workload.rows}")
        for dtype in dtypes:
            for version in versions:
                if version.kernels is not triton_routing:
                    continue  # (a revision's read-out is not reported: module docstring)
                launch = moram_triton.read_out_launch(workload.rows, workload.atoms, workload.k, ITEMSIZE[dtype],
                                                      workload.outputs)
                if version.rows_first is not None:
                    launch = launch._replace(rows_first=version.rows_first)
                flags = dict(GATED=True, BASE=True, K=workload.k, LONG_INDEX=False, **blocks(launch))
                hinted = aligned(kernel, workload, read_out_values(workload))
                line = report_line(arch, target, kernel, dtype, flags, launch, workload.k, hinted, launch.grid[1])
                print(f"    {dtype} {version.name:>8} {'read-out':<15} {line}")


def main(targets, every=False, against=None, orders=False):
    for arch in targets:
        if not check(arch, every):
            return 1
    with tempfile.TemporaryDirectory() as folder:
        versions = [Version("now", triton_routing, moram_triton.launch)]
        if orders:
            versions = [ordered("slices", False), ordered("rows", True)]
        if against:
            versions.insert(0, old_version(against, Path(folder)))
        for arch in targets:
            if arch in TARGETS:
                report(arch, versions)
    return 0


if __name__ == "__main__":
    arguments = sys.argv[1:]
    against = None
    if "--against" in arguments:
        at = arguments.index("--against")
        against = arguments[at + 1]
        del arguments[at:at + 2]
    flags = {"--every", "--orders"}
    sys.exit(main([int(arch) for arch in arguments if arch not in flags] or [90], "--every" in arguments, against,
                  "--orders" in arguments))
