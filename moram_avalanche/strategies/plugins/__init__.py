"""Avalanche plugins of the strategies: growth, distillation, weight-space, accounting.

Behaviour reusable across strategies lives here, as ``SupervisedPlugin`` hooks touching only
public strategy state; each strategy file is a thin ``CLIPStrategy`` subclass that adds them.
Growing adapters grow through one mechanism, :class:`~.growth.GrowthPlugin`.
"""

from .analytic import AnalyticHead
from .budget import IterationBudget
from .codyra import CoDyRAPlugin
from .data_parallel import DataParallel
from .divergence import StopOnDivergence, TrainingDiverged
from .distillation import ExemplarDistillation, LwFDistillation, ReferenceDistillation, ZSCLDistillation
from .exemplars import ExemplarMemory
from .growth import GrowthPlugin
from .inflora import InfLoRAPlugin
from .load_balance import LoadBalancePlugin
from .memory import PeakMemory, memory_footprint
from .moe_adapters import MoEAdaptersPlugin
from .moram import MoRAMPlugin
from .progress import TrainingProgress
from .schedule import IterationSchedule
from .timing import RunTime
from .weights import L2Anchor, WeightEnsemble, WiSEMerge

__all__ = ["StopOnDivergence", "TrainingDiverged", "AnalyticHead", "CoDyRAPlugin", "DataParallel", "ExemplarDistillation", "ExemplarMemory", "GrowthPlugin",
           "InfLoRAPlugin", "IterationBudget", "IterationSchedule", "L2Anchor", "LoadBalancePlugin", "LwFDistillation",
           "MoEAdaptersPlugin", "MoRAMPlugin", "PeakMemory", "ReferenceDistillation", "RunTime", "TrainingProgress",
           "WeightEnsemble", "WiSEMerge", "ZSCLDistillation", "memory_footprint"]
