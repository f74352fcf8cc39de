"""IncLoRA (``inc-lora``): a new LoRA per task on every target linear, the earlier ones frozen."""

from __future__ import annotations

from ...layers.base import find_layers
from ...layers.replace import replace_linears
from ...layers.task_lora import TaskLoRALinear
from ...text.lora_layers import OLORA_LORA_SETTING as OLORA
from ...text.lora_layers import DropoutTaskLoRALinear, LoRALayerConfig
from ..needs import StrategyNeeds
from ..plugins.growth import GrowthPlugin
from .adapters import Targets, lora_targets, wrap
from .loop import TextStrategy
from .settings import given_config


class TextIncLoRA(TextStrategy):
    """IncLoRA: a new rank-``rank`` LoRA per task on every target linear, the earlier ones frozen
    (:class:`~moram_avalanche.layers.task_lora.TaskLoRALinear`, grown by a
    :class:`~moram_avalanche.strategies.plugins.growth.GrowthPlugin`).

    Args (besides TextStrategy's): rank (8), scale (4), dropout (0.1) -- O-LoRA's LoraConfig, as
    :class:`TextSeqLoRA` -- and target_modules (None: query and value).
    """

    needs = StrategyNeeds(fsdp=True)  # only adapters train: the weights can be sharded (--fsdp)
    #: the value checks of its own options (run once, by check_strategy_options): its layer's configuration
    check_values = staticmethod(lambda options: given_config(LoRALayerConfig, options))

    # defaults: O-LoRA's LoraConfig, written once (moram_avalanche.text.lora_layers.LoRALayerConfig)
    def __init__(self, *, model, tokenizer=None, rank: int = OLORA.rank, scale: float = OLORA.scale,
                 dropout: float = OLORA.dropout, target_modules: Targets = None, plugins=None, **kwargs):
        #: the layers' options, checked once (:class:`~moram_avalanche.text.lora_layers.LoRALayerConfig`)
        self.config = config = LoRALayerConfig(rank, scale, dropout)
        model = wrap(model, tokenizer)
        if not find_layers(model, TaskLoRALinear):
            names = lora_targets(model, target_modules)
            model.requires_grad_(False)
            replace_linears(model.model, names, lambda linear: DropoutTaskLoRALinear(
                linear, config.rank, scale=config.scale, dropout=config.dropout))
        self.growth_plugin = GrowthPlugin(TaskLoRALinear)
        super().__init__(model=model, tokenizer=tokenizer, plugins=[self.growth_plugin, *(plugins or [])],
                         **kwargs)


__all__ = ["TextIncLoRA"]
