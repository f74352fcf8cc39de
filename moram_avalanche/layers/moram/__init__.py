"""MoRAM's layer as one package (pure torch): the paper's six steps over a growing bank of rank-1 atoms.

* :mod:`.paths` -- how the six steps run on each device; :mod:`.paths.reference` states them, once,
  and computes them in plain PyTorch; the compiled CPU kernel (:mod:`.paths.cpu_kernel`), the GPU's
  dense path (:mod:`.paths.dense`) and its Triton kernels (:mod:`.paths.triton`,
  :mod:`.paths.triton_kernels`); one chooser (:mod:`.paths.choice`) and one switch
  (:mod:`.paths.switch`: ``MORAM_AVALANCHE_PATH``, ``use_path``);
* :mod:`.layer` -- :class:`~.layer.MoRAMLinear`, a frozen ``nn.Linear`` plus its bank, and the
  routing mixin :class:`~.layer.MoRAMRouting` it shares with :class:`~.layer.MoRAMAtoms`, a bank
  without a base: one forward reads here, then on the chosen path;
* :mod:`.bank` -- the bank as plain state: frozen atoms in buffers, the current task's in parameters;
* :mod:`.config` -- :class:`~.config.MoRAMLayerConfig`, the layer's options checked once, and the
  paper's settings of them, each written once;
* :mod:`.variants` -- the routing ablations that need differentiable routing;
* :mod:`.backward` -- the hand-written backward every path shares; :mod:`.dropped` -- a dropout on
  the atoms' input drawn again in that backward instead of kept (the language models' layer);
* :mod:`.naive` -- the method written the obvious way, what the tests check every path against.
"""

from .config import PAPER_CLIP, PAPER_CODEALPACA, PAPER_LLM, PAPER_TRACE, RELEASE_TRACE, MoRAMLayerConfig
from .layer import MoRAMAtoms, MoRAMLinear, MoRAMRouting, route, routing_options

__all__ = ["PAPER_CLIP", "PAPER_CODEALPACA", "PAPER_LLM", "PAPER_TRACE", "RELEASE_TRACE", "MoRAMAtoms",
           "MoRAMLayerConfig", "MoRAMLinear", "MoRAMRouting", "route", "routing_options"]
