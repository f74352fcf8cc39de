"""Everything that knows transformers and peft: language models for MoRAM.

* :mod:`.load` -- a seq2seq or causal LM and its tokenizer by Hub name or local folder,
  offline-friendly (:func:`load_language_model`);
* :mod:`.targets` -- MoRAM's target modules per architecture, as data;
* :mod:`.layer` -- the MoRAM layer with dropout on the atoms' input (the release's LM variant);
* :mod:`.lora_layers` -- the LoRA baselines' layers with O-LoRA's dropout on the update's input, and their
  options (:class:`LoRALayerConfig`);
* :mod:`.inject` -- put it on a model's targets without peft; grow / freeze per task;
* :mod:`.blocks` -- a model's transformer blocks (what FSDP gathers one at a time);
* :mod:`.peft_layer` -- the peft tuner layer: ``base_layer`` and one bank per named adapter;
* :mod:`.peft_method` -- MoRAM as a peft method (:class:`MoRAMConfig`, registered on import);
* :mod:`.soft_prompt` -- prompt vectors in front of the input embeddings (:class:`PromptPrefix`, :class:`SoftPrompt`);
  :mod:`.prompt_pool` (L2P's pool) and :mod:`.dual_prompt` (DualPrompt's prompts) build on it;
* :mod:`.trainer` -- ``transformers.Trainer`` across tasks (:func:`start_task`, :class:`MoRAMTaskCallback`);
* :mod:`.host_notes` -- imported first: the host libraries' import-time notes that are noise here, dropped.

The method's math stays in :mod:`moram_avalanche.layers`; no Avalanche, no open_clip here.
"""

from . import host_notes  # noqa: F401 -- first: drops bitsandbytes' import-time note before peft imports it
from .blocks import transformer_blocks
from .check import ModelRefused, check_dtype, check_language_model
from .inject import (
                     PAPER_LLM_OPTIONS,
                     RELEASE_NEW_VALUE_SCALE,
                     add_task,
                     freeze_task,
                     inject_moram,
                     moram_layers,
                     target_names,
)
from .layer import PAPER_DROPOUT, DropoutBalancedMoRAMLinear, DropoutMoRAMLinear
from .load import DTYPES, ModelNotFound, load_language_model, prepare_tokenizer
from .lora_layers import OLORA_LORA, OLORA_LORA_SETTING, DropoutLoRALinear, DropoutTaskLoRALinear, LoRALayerConfig
from .peft_method import MERGE_REFUSED, MoRAMConfig, MoRAMModel, MoRAMPeftType, MoRAMTunerLayer, register_moram
from .soft_prompt import PromptPrefix, SoftPrompt
from .targets import MORAM_TARGET_MODULES, RELEASE_TARGET_MODULES, SELF_ATTENTION_PATTERNS, target_modules
from .trainer import MoRAMTaskCallback, start_task

__all__ = ["DTYPES", "DropoutBalancedMoRAMLinear", "DropoutLoRALinear", "DropoutMoRAMLinear", "DropoutTaskLoRALinear", "LoRALayerConfig", "OLORA_LORA", "OLORA_LORA_SETTING",
           "RELEASE_NEW_VALUE_SCALE", "RELEASE_TARGET_MODULES", "MERGE_REFUSED", "MORAM_TARGET_MODULES", "ModelNotFound", "ModelRefused",
           "MoRAMConfig", "MoRAMModel", "MoRAMPeftType", "PromptPrefix", "SoftPrompt", "MoRAMTaskCallback", "MoRAMTunerLayer", "PAPER_DROPOUT",
           "PAPER_LLM_OPTIONS", "SELF_ATTENTION_PATTERNS", "add_task", "check_dtype", "check_language_model", "freeze_task", "inject_moram",
           "load_language_model", "moram_layers", "prepare_tokenizer", "register_moram", "start_task",
           "target_modules", "target_names", "transformer_blocks"]
