"""A method's settings as data, checked once: the one way a strategy's ``check_values`` reads them.

Each language-model method declares its settings as a frozen dataclass whose ``__post_init__``
checks every field (in the manner of
:class:`~moram_avalanche.layers.moram.config.MoRAMLayerConfig`, itself peft's ``LoraConfig``
style), with its defaults the paper's: the LoRA rows' layer
(:class:`~moram_avalanche.text.lora_layers.LoRALayerConfig`), O-LoRA's terms
(:class:`~moram_avalanche.strategies.text.plugins.olora.OLoRAConfig`), SAPT
(:class:`~moram_avalanche.strategies.text.sapt.SAPTConfig`), L2P
(:class:`~moram_avalanche.text.prompt_pool.L2PConfig`), DualPrompt
(:class:`~moram_avalanche.text.dual_prompt.DualPromptConfig`), LFPT5's prompt and plugin
(:class:`~moram_avalanche.text.lfpt5_prompt.LFPT5PromptConfig`,
:class:`~moram_avalanche.strategies.text.plugins.lfpt5.LFPT5PluginConfig`).

A strategy builds its configuration once, in ``__init__``, and hands its checked values on; its
``check_values`` (run by :func:`~moram_avalanche.strategies.options.check_strategy_options`
before anything is built) builds the same dataclass from the options it is given
(:func:`given_config`): one list of checks, no second.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Type, TypeVar

Config = TypeVar("Config")


def given_config(config_class: Type[Config], options: Mapping[str, Any]) -> Config:
    """``config_class`` (a dataclass) built from the entries of ``options`` it declares, its
    defaults for the others: its ``__post_init__`` checks them (a ValueError naming the option).
    Options it does not declare are left to whoever declares them."""
    names = {field.name for field in dataclasses.fields(config_class)}
    return config_class(**{name: value for name, value in options.items() if name in names})


__all__ = ["given_config"]
