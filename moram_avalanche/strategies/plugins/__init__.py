"""Avalanche plugins both model families use: growth, budget, schedule, accounting, data parallelism.

Behaviour reusable across strategies lives in a plugin, as ``SupervisedPlugin`` hooks touching
only public strategy state; growing adapters grow through one mechanism,
:class:`~.growth.GrowthPlugin`. The hooks the run path calls beside Avalanche's (what a plugin
prepares before a run and adds to its folder) are declared once, :class:`~.run_hooks.RunHooks`.
A family's own plugins live in its wing (:mod:`moram_avalanche.strategies.clip.plugins`,
:mod:`moram_avalanche.strategies.text.plugins`).
"""

from ...utils.moved import moved_name
from .base_casts import KeepBaseCasts
from .budget import IterationBudget
from .data_parallel import DataParallel
from .divergence import StopOnDivergence, TrainingDiverged
from .growth import GrowthPlugin
from .inflora import InfLoRAPlugin
from .load_balance import LoadBalancePlugin
from .memory import PeakMemory, memory_footprint
from .moram import MoRAMPlugin
from .progress import TrainingProgress
from .run_hooks import PluginRunHooks, RunHooks
from .schedule import IterationSchedule
from .timing import RunTime


def __getattr__(name):  # 0.6's names of this room now in a wing, for one version (utils/moved.py)
    return moved_name(__name__, name)


__all__ = ["DataParallel", "GrowthPlugin", "InfLoRAPlugin", "IterationBudget", "IterationSchedule",
           "KeepBaseCasts", "LoadBalancePlugin", "MoRAMPlugin", "PeakMemory", "PluginRunHooks", "RunHooks", "RunTime",
           "StopOnDivergence", "TrainingDiverged", "TrainingProgress", "memory_footprint"]
