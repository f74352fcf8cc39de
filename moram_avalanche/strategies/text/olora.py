"""O-LoRA (``o-lora``; Wang et al., 2023): IncLoRA plus O-LoRA's orthogonality and L2 terms
(:mod:`moram_avalanche.algorithms.olora`; one value, or one per task by name: the long
sequences' ``scripts/long.sh``)."""

from __future__ import annotations

from ...algorithms.olora import OLORA_LAMBDA_L2, OLORA_LAMBDA_ORTH, OLORA_POWER
from .inc_lora import TextIncLoRA
from .plugins.olora import Lambda, OLoRAConfig, OLoRAPlugin
from .settings import given_config


class TextOLoRA(TextIncLoRA):
    """O-LoRA (Wang et al., 2023): IncLoRA plus ``lambda_orth * L_orth + lambda_l2 * L2`` on the
    new LoRA (:class:`~moram_avalanche.strategies.text.plugins.olora.OLoRAPlugin`).

    Args (besides TextIncLoRA's): lambda_orth (0.5), lambda_l2 (0) -- each one value, or one per
    task name (the long sequences' per-task values of O-LoRA's ``scripts/long.sh``,
    :data:`~moram_avalanche.algorithms.olora.OLORA_LONG_LAMBDAS`) -- and power (1: the code's
    absolute values; 2: the paper's squares) -- :mod:`moram_avalanche.algorithms.olora`; checked
    once, as the plugin's :class:`~moram_avalanche.strategies.text.plugins.olora.OLoRAConfig`.
    """

    #: the value checks of its own options (run once, by check_strategy_options): its terms' configuration
    check_values = staticmethod(lambda options: given_config(OLoRAConfig, options))

    def __init__(self, *, model, tokenizer=None, lambda_orth: Lambda = OLORA_LAMBDA_ORTH,
                 lambda_l2: Lambda = OLORA_LAMBDA_L2, power: int = OLORA_POWER, plugins=None, **kwargs):
        self.olora_plugin = OLoRAPlugin(lambda_orth, lambda_l2, power)
        super().__init__(model=model, tokenizer=tokenizer, plugins=[self.olora_plugin, *(plugins or [])],
                         **kwargs)


__all__ = ["TextOLoRA"]
