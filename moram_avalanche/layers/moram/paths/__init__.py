"""How a MoRAM layer runs the paper's six steps (stated once, in :mod:`.reference`) on each device.

Four paths compute the same numbers (the test suite checks each, outputs and every gradient,
against the naive reference, :mod:`moram_avalanche.layers.moram.naive`):

==============  =============================================================================
``reference``   Plain PyTorch, gathered ``[N, k]`` routing and an ``embedding_bag`` read-out that
                skips the eval gate's zero terms (:mod:`.reference`). The CPU's path until the
                compiled kernel is built. On a GPU the skipping's boolean indexing waits for the
                device in every call.
``cpu-kernel``  The same, with the compiled C++ kernels for the top-k, the gated read-out and the
                router's backward (CPU, float32; :mod:`.cpu_kernel`, built by ``cpu_kernel.load()``).
``dense``       No host synchronisation: routing by PyTorch into dense ``[N, R]`` coefficients, one
                GEMM read-out, in the compute dtype (:mod:`.dense`).
``triton``      The same GEMMs; steps 2-5 in one Triton kernel each way (:mod:`.triton`, kernels in
                :mod:`.triton_kernels`, imported on first use).
==============  =============================================================================

One chooser (:mod:`.choice`: :func:`~.choice.path_name` once per layer, device and dtype, kept
by the layer; :func:`~.choice.kernels_for` per step on ``cpu-kernel``) and one switch
(:mod:`.switch`: the environment variable ``MORAM_AVALANCHE_PATH``, or ``with use_path("dense"): ...``
in one thread), which forces a path or says ``no-cpu-kernel`` (``auto`` without the compiled CPU
kernel).
"""

from .choice import kernels_for, mixture_for, path_name
from .switch import PATH_VARIABLE, PATHS, SETTINGS, use_path

__all__ = ["PATHS", "PATH_VARIABLE", "SETTINGS", "kernels_for", "mixture_for", "path_name", "use_path"]
