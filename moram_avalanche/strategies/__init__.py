"""CLIP continual-learning strategies (Avalanche), selectable by name."""

from ..checkpoint import enable_avalanche_checkpointing
from ..registry import lookup
from .base import CLIPStrategy
from .finetune import FineTune
from .inflora import InfLoRA, InfLoRAPlugin, lora_layers
from .lwf import LwF, LwFVR
from .moe_adapters import MoEAdapters, MoEAdaptersPlugin
from .moe_lora import MoELoRA, MoELoRAPlugin
from .moram import MoRAM, MoRAMPlugin, moram_layers
from .moram_ablations import (ABLATION_STRATEGIES, ROUTING_ABLATIONS, LoadBalancePlugin,
                              MoRAMExternalRouter, MoRAMLoadBalance, MoRAMSelfActivation,
                              MoRAMSelfTemperature, MoRAMSelfThreshold, MoRAMSelfTopK)
from .schedule import MOE_FEWSHOT_MTIL_LR, MOE_FULLSHOT_MTIL_LR, ZSCL_MTIL_LR, DomainLR
from .seq_lora import SeqLoRA
from .wiseft import WiSEFT
from .zeroshot import ZeroShot
from .zscl import ZSCL
from .zscl_finetune import ZSCLFineTune

enable_avalanche_checkpointing()  # Avalanche's save_checkpoint under torch 2.15 (guide, section 5)

#: ``--strategy`` name -> strategy class
STRATEGIES = {"moram": MoRAM, "finetune": FineTune, "zeroshot": ZeroShot, "wiseft": WiSEFT,
              "lwf": LwF, "lwf-vr": LwFVR, "zscl": ZSCL, "moe-adapters": MoEAdapters,
              "inflora": InfLoRA,
              # routing ablations of the MoRAM paper (moram_ablations.ROUTING_ABLATIONS)
              "seq-lora": SeqLoRA, "moe-lora": MoELoRA, **ABLATION_STRATEGIES}


def get_strategy(name: str):
    """The strategy class registered as ``name``; a clear error for unknown names."""
    return lookup(STRATEGIES, name, "strategy")


__all__ = [
    "MOE_FEWSHOT_MTIL_LR",
    "MOE_FULLSHOT_MTIL_LR",
    "ROUTING_ABLATIONS",
    "STRATEGIES",
    "ZSCL",
    "ZSCL_MTIL_LR",
    "CLIPStrategy",
    "DomainLR",
    "FineTune",
    "InfLoRA",
    "InfLoRAPlugin",
    "LwF",
    "LoadBalancePlugin",
    "LwFVR",
    "MoEAdapters",
    "MoEAdaptersPlugin",
    "MoELoRA",
    "MoELoRAPlugin",
    "MoRAM",
    "MoRAMExternalRouter",
    "MoRAMLoadBalance",
    "MoRAMPlugin",
    "MoRAMSelfActivation",
    "MoRAMSelfTemperature",
    "MoRAMSelfThreshold",
    "MoRAMSelfTopK",
    "SeqLoRA",
    "WiSEFT",
    "ZSCLFineTune",
    "ZeroShot",
    "get_strategy",
    "lora_layers",
    "moram_layers",
]
