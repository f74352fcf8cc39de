"""MoRAM's layer as one package (pure torch): the paper's six steps over a growing bank of rank-1 atoms.

* :mod:`.layer` -- :class:`~.layer.MoRAMLinear`, a frozen ``nn.Linear`` plus its bank, whose
  forward reads as the paper's six steps (:class:`~.layer.MoRAMRouting`, shared with
  :class:`~.layer.MoRAMAtoms`, a bank without a base);
* :mod:`.bank` -- the bank as plain state: frozen atoms in buffers, the current task's in parameters;
* :mod:`.config` -- :class:`~.config.MoRAMLayerConfig`, the layer's options checked once, and the
  paper's settings of them, each written once;
* :mod:`.variants` -- the routing ablations that need differentiable routing;
* :mod:`.backward` -- the hand-written backward every path shares;
* :mod:`.paths` -- how the six steps run on each device: the reference, the CPU kernel, dense, Triton;
* :mod:`.naive` -- the method written the obvious way, for tests and speed comparisons.
"""

from .config import PAPER_CLIP, PAPER_CODEALPACA, PAPER_LLM, PAPER_TRACE, RELEASE_TRACE, MoRAMLayerConfig
from .layer import MoRAMAtoms, MoRAMLinear, MoRAMRouting, route, routing_options

__all__ = ["PAPER_CLIP", "PAPER_CODEALPACA", "PAPER_LLM", "PAPER_TRACE", "RELEASE_TRACE", "MoRAMAtoms",
           "MoRAMLayerConfig", "MoRAMLinear", "MoRAMRouting", "route", "routing_options"]
