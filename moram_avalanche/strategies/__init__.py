"""CLIP continual-learning strategies (Avalanche), one file each, selectable by name.

:class:`~.base.CLIPStrategy` is the shared CLIP loop; every strategy is a thin subclass that
adds its plugins (:mod:`.plugins`). :mod:`.registry` maps ``--strategy`` names to classes.
Importing this package changes nothing outside it.
"""

from .base import CLIPStrategy
from .codyra import CoDyRA
from .finetune import FineTune
from .finetune_alone import FineTuneAlone
from .icarl import ICaRL
from .inflora import InfLoRA
from .lora_baselines import MoELoRA, SeqLoRA
from .lwf import LwF, LwFVR
from .moe_adapters import MoEAdapters
from .moram import (ROUTING_ABLATIONS, MoRAM, MoRAMExternalRouter, MoRAMLoadBalance, MoRAMSelfActivation,
                    MoRAMSelfTemperature, MoRAMSelfThreshold, MoRAMSelfTopK)
from .moram_setting import MORAM, MoRAMSetting
from .needs import StrategyNeeds
from .plugins import CoDyRAPlugin, GrowthPlugin, InfLoRAPlugin, LoadBalancePlugin, MoEAdaptersPlugin, MoRAMPlugin
from .rail import RAIL, RAILDual, RAILPrimal
from .registry import STRATEGIES, get_strategy
from .wiseft import WiSEFT
from .zeroshot import ZeroShot
from .zscl import ZSCL
from .zscl_finetune import ZSCLFineTune

__all__ = ["MORAM", "ROUTING_ABLATIONS", "STRATEGIES", "CLIPStrategy", "CoDyRA", "CoDyRAPlugin", "FineTune", "FineTuneAlone",
           "GrowthPlugin", "ICaRL", "InfLoRA",
           "InfLoRAPlugin", "LoadBalancePlugin", "LwF", "LwFVR", "MoEAdapters", "MoEAdaptersPlugin",
           "MoELoRA", "MoRAM", "MoRAMExternalRouter", "MoRAMLoadBalance", "MoRAMPlugin", "MoRAMSetting",
           "MoRAMSelfActivation", "MoRAMSelfTemperature", "MoRAMSelfThreshold", "MoRAMSelfTopK",
           "RAIL", "RAILDual", "RAILPrimal", "SeqLoRA", "StrategyNeeds", "WiSEFT", "ZSCL", "ZSCLFineTune", "ZeroShot", "get_strategy"]
