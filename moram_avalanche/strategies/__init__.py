"""Continual-learning strategies (Avalanche), one module per method, selectable by name.

Two wings, one per model family, over what they share here: :class:`~.loop.ContinualLoop`, the
one loop harness, the options check (:mod:`.options`), what a strategy takes from the app
(:mod:`.needs`), the registry of names (:mod:`.registry`), the ranges of Avalanche's own
arguments (:mod:`.avalanche_ranges`), MoRAM's paper settings (:mod:`.moram_setting`) and the
plugins both families use (:mod:`.plugins`).

* :mod:`.clip` -- :class:`~.clip.loop.CLIPStrategy`, the CLIP loop, and a thin subclass per
  strategy (MoRAM and its routing ablations, the CLIP baselines, Avalanche's own strategies on
  CLIP), with the CLIP-only plugins (:mod:`.clip.plugins`);
* :mod:`.text` -- :class:`~.text.loop.TextStrategy`, the generative loop of language models, and
  a module per method (MoRAM, SeqFT, the LoRA family, O-LoRA, L2P, ...), with the text-only
  plugins (:mod:`.text.plugins`); imported when asked (it loads transformers' side).

Importing this package changes nothing outside it.
"""

from .clip.codyra import CoDyRA
from .clip.finetune import FineTune
from .clip.finetune_alone import FineTuneAlone
from .clip.icarl import ICaRL
from .clip.inflora import InfLoRA
from .clip.loop import CLIPStrategy
from .clip.lora_baselines import MoELoRA, SeqLoRA
from .clip.lwf import LwF, LwFVR
from .clip.moe_adapters import MoEAdapters
from .clip.moram import (
                         ROUTING_ABLATIONS,
                         MoRAM,
                         MoRAMExternalRouter,
                         MoRAMLoadBalance,
                         MoRAMSelfActivation,
                         MoRAMSelfTemperature,
                         MoRAMSelfThreshold,
                         MoRAMSelfTopK,
)
from .clip.plugins import CoDyRAPlugin, MoEAdaptersPlugin
from .clip.rail import RAIL, RAILDual, RAILPrimal
from .clip.wiseft import WiSEFT
from .clip.zeroshot import ZeroShot
from .clip.zscl import ZSCL
from .clip.zscl_finetune import ZSCLFineTune
from .moram_setting import MORAM, MoRAMSetting
from .needs import StrategyNeeds
from .plugins import GrowthPlugin, InfLoRAPlugin, LoadBalancePlugin, MoRAMPlugin
from .registry import STRATEGIES, get_strategy

__all__ = ["MORAM", "ROUTING_ABLATIONS", "STRATEGIES", "CLIPStrategy", "CoDyRA", "CoDyRAPlugin", "FineTune",
           "FineTuneAlone", "GrowthPlugin", "ICaRL", "InfLoRA", "InfLoRAPlugin", "LoadBalancePlugin", "LwF", "LwFVR",
           "MoEAdapters", "MoEAdaptersPlugin", "MoELoRA", "MoRAM", "MoRAMExternalRouter", "MoRAMLoadBalance",
           "MoRAMPlugin", "MoRAMSetting", "MoRAMSelfActivation", "MoRAMSelfTemperature", "MoRAMSelfThreshold",
           "MoRAMSelfTopK", "RAIL", "RAILDual", "RAILPrimal", "SeqLoRA", "StrategyNeeds", "WiSEFT", "ZSCL",
           "ZSCLFineTune", "ZeroShot", "get_strategy"]
