"""What the language-model adapter rows share: the model wrapped for the loop, the LoRA rows'
target linears per architecture (O-LoRA's query and value, as data) and the value checks of the
adapter options (rank, scale, dropout, O-LoRA's lambdas).

Defaults: the LoRA rows use O-LoRA's ``LoraConfig(r=8, lora_alpha=32, lora_dropout=0.1)`` (rank
8, the update scaled by 32 / 8 = 4, dropout 0.1 on its input:
:data:`~moram_avalanche.text.lora_layers.OLORA_LORA`; the release's TRACE baselines use the same),
on the query and value projections (peft's default targets for T5 and LLaMA, which O-LoRA's code
keeps: :data:`LORA_TARGET_MODULES`; on TRACE the release's q, k, v, o, set by the stream).
"""

from __future__ import annotations

from typing import Mapping, Sequence, Tuple, Union

from ...models.language_model import LanguageModel
from ...text.lora_layers import OLORA_LORA, check_lora_dropout
from ...utils.checks import check_number, check_positive_int

#: ``config.model_type`` -> the LoRA rows' targets: query and value (peft's
#: ``TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING``, the default O-LoRA's code keeps)
LORA_TARGET_MODULES: Mapping[str, Tuple[str, ...]] = {
    "t5": ("q", "v"), "mt5": ("q", "v"), "llama": ("q_proj", "v_proj"), "gemma": ("q_proj", "v_proj"),
    "gemma2": ("q_proj", "v_proj"), "mistral": ("q_proj", "v_proj"), "qwen2": ("q_proj", "v_proj"),
}
#: O-LoRA's LoRA rank for T5 (``--lora_dim 8``), scale (``lora_alpha / r`` = 32 / 8) and dropout
OLORA_RANK = OLORA_LORA["rank"]
OLORA_SCALE = OLORA_LORA["scale"]
OLORA_DROPOUT = OLORA_LORA["dropout"]
#: a lambda of O-LoRA: one value, or one per task name (``scripts/long.sh``)
Lambda = Union[float, Mapping[str, float]]

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
    """Value checks of the adapter options given in ``options``."""
    from ...text.inject import check_new_value_scale

    for name in ("rank", "atoms_per_task"):
        if name in options:
            check_positive_int(name, options[name])
    if "new_value_scale" in options:
        check_new_value_scale(options["new_value_scale"])
    if "scale" in options:
        check_number("scale", options["scale"], hint=f"O-LoRA: lora_alpha / r = {OLORA_SCALE:g}")
    if "dropout" in options:
        check_lora_dropout(options["dropout"])
    for name in ("lambda_orth", "lambda_l2"):
        if name in options:
            check_lambda(name, options[name])
    if "power" in options and options["power"] not in (1, 2):
        raise ValueError(f"power must be 1 (O-LoRA's code) or 2 (its paper), got {options['power']!r}")



def check_lambda(name: str, value) -> None:
    """An O-LoRA lambda: a number >= 0, or a mapping of task names to such numbers."""
    hint = "O-LoRA: 0.5 (orthogonality), 0 (L2); or one per task, e.g. {'mnli': 0.5, 'cb': 0.5}"
    if isinstance(value, Mapping):
        if not value or not all(isinstance(key, str) for key in value):
            raise ValueError(f"{name}: a mapping gives one value per task name, got {dict(value)!r} ({hint})")
        for key, item in value.items():
            check_number(f"{name}[{key!r}]", item, low=0, hint=hint)
        return
    check_number(name, value, low=0, hint=hint)


__all__ = ["LORA_TARGET_MODULES", "OLORA_DROPOUT", "OLORA_RANK", "OLORA_SCALE", "Lambda", "Targets",
           "check_lambda", "check_text_adapter_options", "lora_targets", "wrap"]
