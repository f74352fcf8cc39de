"""CLIP continual-learning strategies (Avalanche), selectable by name."""

from ..checkpoint import enable_avalanche_checkpointing
from ..registry import lookup
from .base import CLIPStrategy
from .finetune import FineTune
from .lwf import LwF, LwFVR
from .moe_adapters import MoEAdapters, MoEAdaptersPlugin
from .moram import MoRAM, MoRAMPlugin, moram_layers
from .schedule import MOE_FEWSHOT_MTIL_LR, ZSCL_MTIL_LR, DomainLR
from .wiseft import WiSEFT
from .zeroshot import ZeroShot
from .zscl import ZSCL
from .zscl_finetune import ZSCLFineTune

enable_avalanche_checkpointing()  # Avalanche's save_checkpoint under torch 2.15 (guide, section 5)

#: ``--strategy`` name -> strategy class
STRATEGIES = {"moram": MoRAM, "finetune": FineTune, "zeroshot": ZeroShot, "wiseft": WiSEFT,
              "lwf": LwF, "lwf-vr": LwFVR, "zscl": ZSCL,
              "moe-adapters": MoEAdapters}


def get_strategy(name: str):
    """The strategy class registered as ``name``; a clear error for unknown names."""
    return lookup(STRATEGIES, name, "strategy")


__all__ = [
    "MOE_FEWSHOT_MTIL_LR",
    "STRATEGIES",
    "ZSCL",
    "ZSCL_MTIL_LR",
    "CLIPStrategy",
    "DomainLR",
    "FineTune",
    "LwF",
    "LwFVR",
    "MoEAdapters",
    "MoEAdaptersPlugin",
    "MoRAM",
    "MoRAMPlugin",
    "WiSEFT",
    "ZSCLFineTune",
    "ZeroShot",
    "get_strategy",
    "moram_layers",
]
