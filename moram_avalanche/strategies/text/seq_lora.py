"""SeqLoRA (``seq-lora``): one LoRA per target linear of a language model, trained through the whole stream."""

from __future__ import annotations

from ...layers.base import find_layers
from ...layers.lora import LoRALinear
from ...layers.replace import replace_linears
from ...text.lora_layers import OLORA_LORA_SETTING as OLORA
from ...text.lora_layers import DropoutLoRALinear, LoRALayerConfig
from ..needs import StrategyNeeds
from .adapters import Targets, lora_targets, wrap
from .loop import TextStrategy
from .settings import given_config


class TextSeqLoRA(TextStrategy):
    """SeqLoRA: one rank-``rank`` LoRA per target linear, trained through the whole stream.

    Args (besides TextStrategy's): rank (8), scale (4 = lora_alpha / r) and dropout (0.1): O-LoRA's
    and the release's ``LoraConfig(r=8, lora_alpha=32, lora_dropout=0.1)``; target_modules (None:
    the query and value projections, :data:`LORA_TARGET_MODULES`; names, a regular expression or a
    mapping of ``model_type`` to names).
    """

    needs = StrategyNeeds(fsdp=True)  # only adapters train: the weights can be sharded (--fsdp)
    #: the value checks of its own options (run once, by check_strategy_options): its layer's configuration
    check_values = staticmethod(lambda options: given_config(LoRALayerConfig, options))

    # defaults: O-LoRA's LoraConfig, written once (moram_avalanche.text.lora_layers.LoRALayerConfig)
    def __init__(self, *, model, tokenizer=None, rank: int = OLORA.rank, scale: float = OLORA.scale,
                 dropout: float = OLORA.dropout, target_modules: Targets = None, **kwargs):
        #: the layers' options, checked once (:class:`~moram_avalanche.text.lora_layers.LoRALayerConfig`)
        self.config = config = LoRALayerConfig(rank, scale, dropout)
        model = wrap(model, tokenizer)
        if not find_layers(model, LoRALinear):
            names = lora_targets(model, target_modules)
            model.requires_grad_(False)
            replace_linears(model.model, names, lambda linear: DropoutLoRALinear(linear, config.rank, scale=config.scale,
                                                                                  dropout=config.dropout))
        super().__init__(model=model, tokenizer=tokenizer, **kwargs)


__all__ = ["TextSeqLoRA"]
