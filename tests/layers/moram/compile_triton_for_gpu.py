"""Compile MoRAM's two Triton kernels for NVIDIA GPUs without one: Triton's own compiler, to PTX and cubin.

Run as a script by tests/layers/moram/test_paths.py, in a process without ``TRITON_INTERPRET``
(with it, ``triton.jit`` makes interpreted functions): each code path of the kernels'
compile-time flags, in the pointer dtypes the GPU path launches (``--every``: every combination
of flags, dtypes and bank widths), for the targets named on the command line (default: 90 =
Hopper, H100 / H200; 80 = Ampere). A type or shape error that the
interpreter lets through (it runs NumPy) fails here, as it would at the first launch on a GPU.
Prints one line per kernel and target and exits 1 on the first error.

    python tests/layers/moram/compile_triton_for_gpu.py [90 80] [--every]
"""

import itertools
import os
import sys
import time

os.environ.pop("TRITON_INTERPRET", None)

import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

from moram_avalanche.layers.moram.paths import triton_kernels as triton_routing

SCALARS = {"n_rows": "i32", "n_atoms": "i32", "k": "i32", "inv_tau": "fp32", "delta": "fp32", "eps": "fp32"}
POINTERS = {"fp32": "*fp32", "bf16": "*bf16", "fp16": "*fp16", "fp64": "*fp64"}


def signature(kernel, dtype, flags):
    types = {}
    for name in kernel.arg_names:
        if name in flags:
            types[name] = "constexpr"
        elif name.startswith("stride"):
            types[name] = "i32"
        elif name in SCALARS:
            types[name] = SCALARS[name]
        elif name == "W":
            types[name] = "*fp32"  # the weights for the statistics: always float32
        else:
            types[name] = POINTERS[dtype]
    return types


def combinations(kernel, every: bool = False):
    """The flag and dtype variants: each code path in float32, bfloat16 and float64 at a 256-wide
    bank, and the widest bank once (``every``: float16 too, and 16-, 256- and 4096-wide banks)."""
    writes = ("WRITE_W",) if "WRITE_W" in kernel.arg_names else ("WRITE_GRAD", "WRITE_COEF")
    dtypes, widths = (("fp32", "bf16", "fp16", "fp64"), (16, 256, 4096)) if every else (("fp32", "bf16", "fp64"), (256,))
    variants = list(itertools.product(dtypes, (False, True), (False, True), widths, *[(False, True)] * len(writes)))
    if not every:
        variants.append(("fp32", True, False, 4096) + (True,) * len(writes))
    for dtype, gated, keep_all, block_r, *write in variants:
        if not any(write) and len(writes) == 2:
            continue  # the backward always writes something
        flags = {"GATED": gated, "KEEP_ALL": keep_all, "F64": dtype == "fp64",
                 "BLOCK_N": max(1, min(64, 4096 // block_r)), "BLOCK_R": block_r, **dict(zip(writes, write))}
        yield dtype, flags


def main(targets, every=False):
    for arch in targets:
        for kernel in (triton_routing.route_forward_kernel, triton_routing.route_backward_kernel):
            start, count = time.perf_counter(), 0
            for dtype, flags in combinations(kernel, every):
                constexprs = {(kernel.arg_names.index(name),): value for name, value in flags.items()}
                source = ASTSource(kernel, signature(kernel, dtype, flags), constexprs=constexprs)
                try:
                    compiled = triton.compile(source, target=GPUTarget("cuda", arch, 32))
                except Exception as error:
                    print(f"FAIL {kernel.fn.__name__} sm_{arch} {dtype} {flags}: {type(error).__name__}: "
                          f"{str(error)[-800:]}")
                    return 1
                assert "cubin" in compiled.asm
                count += 1
            print(f"ok   {kernel.fn.__name__} sm_{arch}: {count} variants to cubin in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    every = "--every" in sys.argv
    sys.exit(main([int(arch) for arch in sys.argv[1:] if arch != "--every"] or [90], every))
