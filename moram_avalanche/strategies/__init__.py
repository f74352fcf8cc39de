"""CLIP continual-learning strategies (Avalanche), selectable by name."""

from ..registry import lookup
from ..checkpoint import enable_avalanche_checkpointing
from .base import CLIPStrategy
from .finetune import FineTune
from .moram import MoRAM, MoRAMPlugin, moram_layers
from .zeroshot import ZeroShot

enable_avalanche_checkpointing()  # Avalanche's save_checkpoint under torch 2.15 (guide, section 5)

#: ``--strategy`` name -> strategy class
STRATEGIES = {"moram": MoRAM, "finetune": FineTune, "zeroshot": ZeroShot}


def get_strategy(name: str):
    """The strategy class registered as ``name``; a clear error for unknown names."""
    return lookup(STRATEGIES, name, "strategy")


__all__ = ["CLIPStrategy", "FineTune", "MoRAM", "MoRAMPlugin", "ZeroShot", "STRATEGIES",
           "get_strategy", "moram_layers"]
