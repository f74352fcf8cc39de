"""Which linear layers MoRAM wraps in each language-model architecture, as data.

:data:`MORAM_TARGET_MODULES` maps a Hugging Face ``config.model_type`` to the names of the
target modules, in peft's table convention (``peft.utils.constants``'s
``TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING``): a name matches every module whose
dotted name is that name or ends with ``"." + name``. The defaults are the MoRAM paper's
classification setting, "MoRAM on the query and key projections of the attention layers"
(paper Sec. 4, LLM settings; reference ``language_models.md``).

T5: the names ``q`` and ``k`` match the self-attention of encoder and decoder
(``SelfAttention.q``) **and** the decoder's cross-attention (``EncDecAttention.q``). We keep
both, deliberately: the paper says "the attention layers" without excluding cross-attention,
and the MoRAM release (``TRACE/training/main.py``, built on O-LoRA's code and a peft fork)
selects T5 targets by module name exactly like peft, whose own T5 default ``["q", "v"]`` also
hits both kinds of attention. ``self_attention_only`` in :func:`target_modules` gives the other
reading (a regular expression that peft accepts as ``target_modules``).

On TRACE the release adapts more: its runs pass no ``--moram_target_modules``
(``TRACE/runner_moram.sh``), so its peft fork's defaults apply (``TRACE/utils/my_peft/utils/
other.py``, ``TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING``): the query, key, value and
output projections of LLaMA, Gemma, Gemma 2, Mistral and Qwen, for MoRAM and for its LoRA-family
baselines (``LoraConfig`` without ``target_modules``) alike: :data:`RELEASE_TARGET_MODULES`,
what ``--benchmark trace`` gives every adapter strategy (a ``target_modules`` mapping of
``model_type`` to names, resolved by :func:`resolve_targets`).

A second architecture enters by adding a row here (or passing ``target_modules``), never by a
branch in the injection code.
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Sequence, Tuple, Union

#: ``config.model_type`` -> MoRAM's target module names (query and key projections)
MORAM_TARGET_MODULES: Mapping[str, Tuple[str, ...]] = {
    "t5": ("q", "k"),
    "mt5": ("q", "k"),
    "llama": ("q_proj", "k_proj"),
    "gemma": ("q_proj", "k_proj"),
    "gemma2": ("q_proj", "k_proj"),
    "mistral": ("q_proj", "k_proj"),
    "qwen2": ("q_proj", "k_proj"),
}

#: ``config.model_type`` -> the MoRAM release's default targets (its peft fork's
#: ``utils/my_peft/utils/other.py``), which its TRACE runs use for MoRAM and the LoRA baselines
RELEASE_TARGET_MODULES: Mapping[str, Tuple[str, ...]] = {
    "t5": ("q", "v"),
    "mt5": ("q", "v"),
    "llama": ("q_proj", "k_proj", "v_proj", "o_proj"),
    "gemma": ("q_proj", "k_proj", "v_proj", "o_proj"),
    "gemma2": ("q_proj", "k_proj", "v_proj", "o_proj"),
    "mistral": ("q_proj", "k_proj", "v_proj", "o_proj"),
    "qwen2": ("q_proj", "k_proj", "v_proj", "o_proj"),
    "qwen3": ("q_proj", "k_proj", "v_proj", "o_proj"),
}

#: ``config.model_type`` -> every linear layer of a block (attention and MLP): the CodeAlpaca
#: setting, "MoRAM on all linear layers" (paper, appendix, CodeAlpaca; reference ``language_models.md``)
ALL_LINEAR_TARGET_MODULES: Mapping[str, Tuple[str, ...]] = {
    model_type: ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
    for model_type in ("llama", "gemma", "gemma2", "mistral", "qwen2", "qwen3")
}

#: ``config.model_type`` -> the regular expression of the self-attention-only reading (T5
#: family: ``SelfAttention.q|k``, leaving ``EncDecAttention`` out)
SELF_ATTENTION_PATTERNS: Mapping[str, str] = {
    "t5": r".*\.SelfAttention\.(q|k)",
    "mt5": r".*\.SelfAttention\.(q|k)",
}


def target_modules(model_type: str, self_attention_only: bool = False) -> Union[List[str], str]:
    """MoRAM's target modules for ``model_type`` (a list of names, or peft's regex form).

    ``self_attention_only`` leaves T5's cross-attention out (see the module docstring); for
    decoder-only models it changes nothing (they have no cross-attention). Unknown types are a
    ValueError that lists the known ones and says to pass ``target_modules`` explicitly.
    """
    if model_type not in MORAM_TARGET_MODULES:
        raise ValueError(
            f"no MoRAM target modules known for model_type {model_type!r} (known: "
            f"{', '.join(sorted(MORAM_TARGET_MODULES))}); pass target_modules explicitly, e.g. the "
            "names of the attention's query and key linears (['q_proj', 'k_proj'] in most decoders)")
    if self_attention_only and model_type in SELF_ATTENTION_PATTERNS:
        return SELF_ATTENTION_PATTERNS[model_type]
    return list(MORAM_TARGET_MODULES[model_type])


def resolve_targets(targets: Union[str, Sequence[str], Mapping[str, Sequence[str]]],
                    model_type: str) -> Union[str, List[str]]:
    """``targets`` for a model of ``model_type``: a mapping (``model_type`` -> names, as
    :data:`RELEASE_TARGET_MODULES`) gives that type's row; names or a regular expression are
    returned as they are. A mapping without the type is a ValueError naming the known ones."""
    if not isinstance(targets, Mapping):
        return targets if isinstance(targets, str) else list(targets)
    if model_type not in targets:
        raise ValueError(f"target_modules gives names for model types {sorted(targets)}, not for "
                         f"{model_type!r}: add a row for it or pass the module names, e.g. "
                         "['q_proj', 'k_proj', 'v_proj', 'o_proj']")
    return list(targets[model_type])


def matches(name: str, targets: Union[str, List[str], Tuple[str, ...]]) -> bool:
    """Whether the dotted module ``name`` is a target, with peft's matching rules.

    A string is a regular expression that must match the whole name; a list of names matches
    a module named exactly so or ending with ``"." + name`` (peft ``check_target_module_exists``).
    """
    import re

    if isinstance(targets, str):
        return re.fullmatch(targets, name) is not None
    return any(name == target or name.endswith("." + target) for target in targets)


def as_table() -> Dict[str, List[str]]:
    """:data:`MORAM_TARGET_MODULES` as peft's ``target_module_mapping`` (lists)."""
    return {model_type: list(names) for model_type, names in MORAM_TARGET_MODULES.items()}


__all__ = ["ALL_LINEAR_TARGET_MODULES", "MORAM_TARGET_MODULES", "RELEASE_TARGET_MODULES", "SELF_ATTENTION_PATTERNS", "as_table", "matches",
           "resolve_targets", "target_modules"]
