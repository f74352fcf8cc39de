"""The CLIP strategies' own plugins: distillation and its teachers, exemplars, weight-space
merging, RAIL's analytic head, MoE-Adapters' and CoDyRA's task boundaries, the tower's compiled
evaluation."""

from .analytic import AnalyticHead
from .codyra import CoDyRAPlugin
from .compiled_eval import CompiledEvaluation
from .distillation import ExemplarDistillation, LwFDistillation, ReferenceDistillation, ZSCLDistillation
from .exemplars import ExemplarMemory
from .moe_adapters import MoEAdaptersPlugin
from .weights import L2Anchor, WeightEnsemble, WiSEMerge

__all__ = ["AnalyticHead", "CoDyRAPlugin", "CompiledEvaluation", "ExemplarDistillation", "ExemplarMemory", "L2Anchor", "LwFDistillation",
           "MoEAdaptersPlugin", "ReferenceDistillation", "WeightEnsemble", "WiSEMerge", "ZSCLDistillation"]
