"""Strategy names -> strategy classes, for ``--strategy`` / ``--strategies`` and ``compare``.

The table is the only place that knows strategies by name. What the command line and the demo
need from a strategy, each class declares itself (``needs``,
:class:`~moram_avalanche.strategies.needs.StrategyNeeds`); adding a strategy is one line here.
"""

from __future__ import annotations

from typing import Dict, Type

from ..utils.names import lookup
from .base import CLIPStrategy
from .codyra import CoDyRA
from .finetune import FineTune
from .finetune_alone import FineTuneAlone
from .icarl import ICaRL
from .inflora import InfLoRA
from .lora_baselines import MoELoRA, SeqLoRA
from .lwf import LwF, LwFVR
from .moe_adapters import MoEAdapters
from .moram import ABLATION_STRATEGIES, MoRAM
from .rail import RAILDual, RAILPrimal
from .wiseft import WiSEFT
from .zeroshot import ZeroShot
from .zscl import ZSCL

#: ``--strategy`` name -> strategy class
STRATEGIES: Dict[str, Type[CLIPStrategy]] = {
    "moram": MoRAM, "finetune": FineTune, "zeroshot": ZeroShot, "wiseft": WiSEFT, "lwf": LwF,
    "lwf-vr": LwFVR, "zscl": ZSCL, "moe-adapters": MoEAdapters, "inflora": InfLoRA,
    "finetune-alone": FineTuneAlone,  # each domain from the pre-trained weights (upper bound)
    "rail-primal": RAILPrimal, "rail-dual": RAILDual, "codyra": CoDyRA, "icarl": ICaRL,
    # routing ablations of the MoRAM paper (moram.ROUTING_ABLATIONS)
    "seq-lora": SeqLoRA, "moe-lora": MoELoRA, **ABLATION_STRATEGIES,
}


def get_strategy(name: str) -> Type[CLIPStrategy]:
    """The strategy class registered as ``name``; a clear error for unknown names."""
    return lookup(STRATEGIES, name, "strategy")


def strategies_taking(reference: str) -> list:
    """The registered names whose strategy takes ``reference`` data ("images" or "sentences")."""
    return sorted(name for name, cls in STRATEGIES.items() if reference in cls.needs.references)


__all__ = ["STRATEGIES", "get_strategy", "strategies_taking"]
