"""Strategy names -> strategy classes, for ``--strategy`` / ``--strategies`` and ``compare``.

The tables are the only place that knows strategies by name: :data:`STRATEGIES`, the package's
own, and :data:`~moram_avalanche.strategies.clip.builtins.BUILTINS`, Avalanche's (``avalanche.naive``,
...; on CLIP through :class:`~moram_avalanche.models.classifier.CLIPClassifier`).
:func:`get_strategy` looks a name up in both. What the command line and the demo need from a
strategy, each declares itself (``needs``, :class:`~moram_avalanche.strategies.needs.StrategyNeeds`);
adding a strategy is one line here.
"""

from __future__ import annotations

from typing import Dict, Type, Union

from ..utils.names import lookup
from .clip.builtins import BUILTINS, BuiltinStrategy
from .clip.codyra import CoDyRA
from .clip.finetune import FineTune
from .clip.finetune_alone import FineTuneAlone
from .clip.icarl import ICaRL
from .clip.inflora import InfLoRA
from .clip.loop import CLIPStrategy
from .clip.lora_baselines import MoELoRA, SeqLoRA
from .clip.lwf import LwF, LwFVR
from .clip.moe_adapters import MoEAdapters
from .clip.moram import ABLATION_STRATEGIES, MoRAM
from .clip.rail import RAILDual, RAILPrimal
from .clip.wiseft import WiSEFT
from .clip.zeroshot import ZeroShot
from .clip.zscl import ZSCL

#: ``--strategy`` name -> strategy class
STRATEGIES: Dict[str, Type[CLIPStrategy]] = {
    "moram": MoRAM, "finetune": FineTune, "zeroshot": ZeroShot, "wiseft": WiSEFT, "lwf": LwF,
    "lwf-vr": LwFVR, "zscl": ZSCL, "moe-adapters": MoEAdapters, "inflora": InfLoRA,
    "finetune-alone": FineTuneAlone,  # each domain from the pre-trained weights (upper bound)
    "rail-primal": RAILPrimal, "rail-dual": RAILDual, "codyra": CoDyRA, "icarl": ICaRL,
    # routing ablations of the MoRAM paper (moram.ROUTING_ABLATIONS)
    "seq-lora": SeqLoRA, "moe-lora": MoELoRA, **ABLATION_STRATEGIES,
}


def get_strategy(name: str, family: str = "clip") -> Union[Type[CLIPStrategy], BuiltinStrategy]:
    """The strategy registered as ``name`` for the model ``family`` (default ``"clip"``: the
    package's CLIP strategies or ``avalanche.*``; ``"text"``: the language-model strategies,
    :data:`FAMILIES`); a clear error for unknown names. Either is called with ``model=``,
    ``tokenizer=`` and keyword options and carries ``needs``."""
    return lookup(lookup(FAMILIES, family, "model family")(), name, "strategy")


def package_text_strategies() -> dict:
    """The package's own language-model strategies, by name (imported when asked: it loads
    transformers' side)."""
    from .text.dualprompt import TextDualPrompt
    from .text.finetune import TextFineTune
    from .text.hidelora import TextHiDeLoRA
    from .text.icl import TextICL
    from .text.inc_lora import TextIncLoRA
    from .text.inflora import TextInfLoRA
    from .text.l2p import TextL2P
    from .text.lfpt5 import TextLFPT5
    from .text.lori import TextLoRID, TextLoRIS
    from .text.moram import TextMoRAM, TextMoRAMLoadBalance, TextMoRAMReplay
    from .text.mtl import TextMTL
    from .text.ogd import TextOGD
    from .text.olora import TextOLoRA
    from .text.sapt import TextSAPT
    from .text.seq_lora import TextSeqLoRA
    from .text.treelora import TextTreeLoRA


    return {"moram": TextMoRAM, "moram-replay": TextMoRAMReplay, "moram-load-balance": TextMoRAMLoadBalance,
            "finetune": TextFineTune, "seq-lora": TextSeqLoRA, "inc-lora": TextIncLoRA, "o-lora": TextOLoRA,
            "hidelora": TextHiDeLoRA, "ogd": TextOGD, "treelora": TextTreeLoRA, "mtl": TextMTL, "lfpt5": TextLFPT5,
            "inf-lora": TextInfLoRA, "icl": TextICL, "l2p": TextL2P, "dualprompt": TextDualPrompt,
            "sapt": TextSAPT, "lori-d": TextLoRID, "lori-s": TextLoRIS}




def text_strategies() -> dict:
    """The language-model family's table: the package's language-model strategies
    (:func:`package_text_strategies`), then Avalanche's on the text loop (``avalanche.ewc``, ...,
    :data:`~moram_avalanche.strategies.text.builtins.TEXT_BUILTINS`)."""
    from .text.builtins import TEXT_BUILTINS

    return {**package_text_strategies(), **TEXT_BUILTINS}


def all_strategies() -> Dict[str, Union[Type[CLIPStrategy], BuiltinStrategy]]:
    """Every registered name: the package's strategies, then Avalanche's."""
    return {**STRATEGIES, **BUILTINS}


#: model family -> its strategy table (a benchmark declares its family in its registered entry,
#: :func:`moram_avalanche.benchmarks.benchmark_family`); a family enters here, by registration
FAMILIES = {"clip": all_strategies, "text": text_strategies}


def strategies_taking(reference: str) -> list:
    """The registered names whose strategy takes ``reference`` data ("images" or "sentences")."""
    return sorted(name for name, cls in all_strategies().items() if reference in cls.needs.references)


def sharding_strategies(family: str) -> list:
    """The registered names of ``family`` whose strategy trains with sharded weights (``needs.fsdp``)."""
    return sorted(name for name, cls in FAMILIES[family]().items() if cls.needs.fsdp)


__all__ = ["FAMILIES", "STRATEGIES", "all_strategies", "get_strategy", "package_text_strategies", "sharding_strategies",
           "strategies_taking", "text_strategies"]
