"""How a MoRAM layer runs its six steps on each device: one chooser (:mod:`.choice`) over the
reference path and the CPU's compiled kernels (:mod:`.cpu`, :mod:`.cpu_kernel`), the GPU's dense
path (:mod:`.dense`) and its routing fused by Triton (:mod:`.triton`, kernels in
:mod:`.triton_kernels`)."""
