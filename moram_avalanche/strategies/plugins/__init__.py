"""Avalanche plugins of the strategies: growth, distillation, weight-space, accounting.

Behaviour reusable across strategies lives here, as ``SupervisedPlugin`` hooks touching only
public strategy state; each strategy file is a thin ``CLIPStrategy`` subclass that adds them.
Growing adapters grow through one mechanism, :class:`~.growth.GrowthPlugin`.
"""

from .distillation import LwFDistillation, ReferenceDistillation, ZSCLDistillation
from .budget import IterationBudget
from .data_parallel import DataParallel
from .growth import GrowthPlugin
from .inflora import InfLoRAPlugin
from .load_balance import LoadBalancePlugin
from .memory import PeakMemory, memory_footprint
from .moe_adapters import MoEAdaptersPlugin
from .moram import MoRAMPlugin
from .timing import RunTime
from .weights import L2Anchor, WeightEnsemble, WiSEMerge

__all__ = ["DataParallel", "GrowthPlugin", "InfLoRAPlugin", "IterationBudget", "L2Anchor", "LoadBalancePlugin", "LwFDistillation",
           "MoEAdaptersPlugin", "MoRAMPlugin", "PeakMemory", "ReferenceDistillation", "RunTime",
           "WeightEnsemble", "WiSEMerge", "ZSCLDistillation", "memory_footprint"]
