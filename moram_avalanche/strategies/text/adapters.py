"""What the language-model adapter rows share: the model wrapped for the loop and the LoRA rows'
target linears per architecture (O-LoRA's query and value, as data).

Defaults: the LoRA rows use O-LoRA's ``LoraConfig(r=8, lora_alpha=32, lora_dropout=0.1)`` (rank
8, the update scaled by 32 / 8 = 4, dropout 0.1 on its input:
:class:`~moram_avalanche.text.lora_layers.LoRALayerConfig`, which checks them; the release's TRACE
baselines use the same), on the query and value projections (peft's default targets for T5 and
LLaMA, which O-LoRA's code keeps: :data:`LORA_TARGET_MODULES`; on TRACE the release's q, k, v, o,
set by the stream).
"""

from __future__ import annotations

from typing import Mapping, Sequence, Tuple, Union

from ...models.language_model import LanguageModel
from ...text.lora_layers import OLORA_LORA_SETTING, LoRALayerConfig
from ...utils.checks import check_positive_int
from .plugins.olora import Lambda, OLoRAConfig, check_lambda
from .settings import given_config

#: ``config.model_type`` -> the LoRA rows' targets: query and value (peft's
#: ``TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING``, the default O-LoRA's code keeps)
LORA_TARGET_MODULES: Mapping[str, Tuple[str, ...]] = {
    "t5": ("q", "v"), "mt5": ("q", "v"), "llama": ("q_proj", "v_proj"), "gemma": ("q_proj", "v_proj"),
    "gemma2": ("q_proj", "v_proj"), "mistral": ("q_proj", "v_proj"), "qwen2": ("q_proj", "v_proj"),
}
#: O-LoRA's LoRA rank, scale and dropout, as 0.6 named them (:data:`~moram_avalanche.text.lora_layers.OLORA_LORA_SETTING`)
OLORA_RANK = OLORA_LORA_SETTING.rank
OLORA_SCALE = OLORA_LORA_SETTING.scale
OLORA_DROPOUT = OLORA_LORA_SETTING.dropout

Targets = Union[str, Sequence[str], Mapping[str, Sequence[str]], None]


def wrap(model, tokenizer) -> LanguageModel:
    """``model`` as a :class:`LanguageModel` (a ``transformers`` model is wrapped with ``tokenizer``)."""
    return model if isinstance(model, LanguageModel) else LanguageModel(model, tokenizer)


def lora_targets(model: LanguageModel, targets: Targets, table=None, what: str = "LoRA") -> list:
    """Dotted names of the linears the LoRA rows wrap (``targets`` None: the model type's entry of
    ``table``, :data:`LORA_TARGET_MODULES` by default; ``what`` names the row in the error)."""
    from ...text.inject import model_type_of, target_names

    table = LORA_TARGET_MODULES if table is None else table
    if targets is None:
        model_type = model_type_of(model.model)
        if model_type not in table:
            raise ValueError(f"no {what} target modules known for model_type {model_type!r} (known: "
                             f"{', '.join(sorted(table))}); pass target_modules, e.g. ['q_proj', 'v_proj']")
        targets = list(table[model_type])
    return target_names(model.model, targets)


def check_text_adapter_options(options) -> None:
    """0.6's value check of the adapter options given in ``options``, by the settings that declare
    them: the LoRA rows' layer (:class:`~moram_avalanche.text.lora_layers.LoRALayerConfig`),
    O-LoRA's terms (:class:`~moram_avalanche.strategies.text.plugins.olora.OLoRAConfig`), MoRAM's
    ``atoms_per_task`` and ``new_value_scale``. The strategies check their own configurations
    (their ``check_values``); kept for callers of 0.6, goes in 0.8."""
    from ...text.inject import check_new_value_scale

    given_config(LoRALayerConfig, options)
    if "atoms_per_task" in options:
        check_positive_int("atoms_per_task", options["atoms_per_task"])
    if "new_value_scale" in options:
        check_new_value_scale(options["new_value_scale"])
    given_config(OLoRAConfig, options)


__all__ = ["LORA_TARGET_MODULES", "OLORA_DROPOUT", "OLORA_RANK", "OLORA_SCALE", "Lambda", "Targets",
           "check_lambda", "check_text_adapter_options", "lora_targets", "wrap"]
