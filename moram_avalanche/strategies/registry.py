"""Strategy names -> strategy classes, for ``--strategy`` / ``--strategies`` and ``compare``.

The tables are the only place that knows strategies by name: :data:`STRATEGIES`, the package's
own, and :data:`~moram_avalanche.strategies.builtins.BUILTINS`, Avalanche's (``avalanche.naive``,
...; on CLIP through :class:`~moram_avalanche.models.classifier.CLIPClassifier`).
:func:`get_strategy` looks a name up in both. What the command line and the demo need from a
strategy, each declares itself (``needs``, :class:`~moram_avalanche.strategies.needs.StrategyNeeds`);
adding a strategy is one line here.
"""

from __future__ import annotations

from typing import Dict, Type, Union

from ..utils.names import lookup
from .base import CLIPStrategy
from .builtins import BUILTINS, BuiltinStrategy
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


def get_strategy(name: str) -> Union[Type[CLIPStrategy], BuiltinStrategy]:
    """The strategy registered as ``name`` (the package's or ``avalanche.*``); a clear error
    for unknown names. Either is called with ``model=``, ``tokenizer=`` and keyword options and
    carries ``needs``."""
    return lookup(all_strategies(), name, "strategy")


def all_strategies() -> Dict[str, Union[Type[CLIPStrategy], BuiltinStrategy]]:
    """Every registered name: the package's strategies, then Avalanche's."""
    return {**STRATEGIES, **BUILTINS}


def strategies_taking(reference: str) -> list:
    """The registered names whose strategy takes ``reference`` data ("images" or "sentences")."""
    return sorted(name for name, cls in all_strategies().items() if reference in cls.needs.references)


__all__ = ["STRATEGIES", "all_strategies", "get_strategy", "strategies_taking"]
