"""Load a Hugging Face language model and its tokenizer by name or local folder, offline-friendly.

:func:`load_language_model` reads the model's config first and picks the class from it:
``AutoModelForSeq2SeqLM`` when ``config.is_encoder_decoder`` (T5), else
``AutoModelForCausalLM`` (LLaMA, Gemma, Mistral, Qwen2). Weights come from a local folder or
the Hugging Face cache; nothing is downloaded when ``HF_HUB_OFFLINE=1`` (or
``local_files_only=True``), and a model that cannot be found is a :class:`ModelNotFound`
naming what was looked for and how to get it.

A causal model's tokenizer gets a pad token (its EOS when it has none: LLaMA's tokenizer ships
without one, and batching needs one) and pads on the **left**: a decoder-only model generates
by continuing the last position of each row, so the prompts of a batch must end at the same
column; right padding would put pad tokens between a short prompt and its answer. Seq2seq
models keep their tokenizer as it is (the encoder reads padded inputs with an attention mask,
the decoder starts from its own start token).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional, Tuple

from ..utils.errors import UserError

#: ``dtype`` names accepted by :func:`load_language_model` (the paper's TRACE runs use bf16)
DTYPES = ("float32", "bfloat16", "float16")


class ModelNotFound(UserError, OSError):
    """A model's files are neither in the given folder nor in the Hugging Face cache."""


def _fix(name: str) -> str:
    return (f"download it once where there is a network (e.g. `huggingface-cli download {name}` or "
            f"`AutoModel.from_pretrained({name!r})`, which fills the Hugging Face cache, "
            f"HF_HOME={os.environ.get('HF_HOME', '~/.cache/huggingface')}), or pass the local folder "
            "that holds config.json, the weights (*.safetensors) and the tokenizer files; with "
            "HF_HUB_OFFLINE=1 nothing is fetched from the Hub")


def load_config(name_or_path: str, *, local_files_only: Optional[bool] = None):
    """The model's ``AutoConfig``; :class:`ModelNotFound` with the fix when it cannot be read."""
    from transformers import AutoConfig

    path = Path(name_or_path).expanduser()
    looks_local = path.is_absolute() or name_or_path.startswith((".", "~")) or path.exists()
    if looks_local and not (path / "config.json").is_file():
        raise ModelNotFound(f"no model folder at {path}: expected {path / 'config.json'} (and the "
                            f"weights and tokenizer files beside it); "
                            + ("the folder exists but holds no config.json" if path.is_dir()
                               else "the folder does not exist"))
    try:
        return AutoConfig.from_pretrained(str(path) if looks_local else name_or_path,
                                          local_files_only=_offline(local_files_only))
    except OSError as error:
        raise ModelNotFound(f"cannot find model {name_or_path!r} locally or in the Hugging Face "
                            f"cache ({error.__class__.__name__}); {_fix(name_or_path)}") from None


def _offline(local_files_only: Optional[bool]) -> bool:
    if local_files_only is not None:
        return bool(local_files_only)
    return os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on")


def load_language_model(name_or_path: str, *, dtype: str = "float32",
                        gradient_checkpointing: bool = False,
                        local_files_only: Optional[bool] = None) -> Tuple[object, object]:
    """``(model, tokenizer)`` of a seq2seq or causal language model, by Hub name or local folder.

    Args:
        name_or_path: a Hub name ("t5-large", "meta-llama/Llama-2-7b-chat-hf") resolved in the
            local cache, or a folder written by ``save_pretrained``.
        dtype: "float32", "bfloat16" (the paper's TRACE runs train in bf16) or "float16".
        gradient_checkpointing: recompute activations in the backward pass (less memory,
            about a third more time); the input embeddings then require grad so that the
            frozen model still passes gradients to the adapters.
        local_files_only: never touch the network (default: True when ``HF_HUB_OFFLINE`` is set).

    The model is in eval mode with every parameter trainable as loaded; inject adapters next
    (they freeze the base).
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    offline = _offline(local_files_only)
    config = load_config(name_or_path, local_files_only=offline)
    seq2seq = bool(getattr(config, "is_encoder_decoder", False))
    auto = AutoModelForSeq2SeqLM if seq2seq else AutoModelForCausalLM
    source = str(Path(name_or_path).expanduser()) if Path(name_or_path).expanduser().exists() else name_or_path
    try:
        model = auto.from_pretrained(source, dtype=getattr(torch, dtype), local_files_only=offline)
        tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=offline)
    except OSError as error:
        raise ModelNotFound(f"model {name_or_path!r}: its config was found but its weights or tokenizer "
                            f"files are missing ({error}); {_fix(name_or_path)}") from None
    if gradient_checkpointing:
        enable_gradient_checkpointing(model)
    prepare_tokenizer(tokenizer, seq2seq)
    model.eval()
    return model, tokenizer


def enable_gradient_checkpointing(model) -> None:
    """Recompute each block's activations in backward instead of keeping them (transformers'
    activation checkpointing), with the inputs' embeddings requiring grad so that the frozen first
    block still passes gradients to the adapters after it."""
    model.activation_checkpointing_enable()  # transformers 5 name of gradient_checkpointing_enable
    model.enable_input_require_grads()


def prepare_tokenizer(tokenizer, seq2seq: bool):
    """A causal model's tokenizer: pad token (EOS if none) and left padding (module docstring).

    Seq2seq tokenizers are returned unchanged. A causal tokenizer without pad and EOS tokens is
    a ValueError (nothing to pad with).
    """
    if seq2seq:
        return tokenizer
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise ValueError(f"the tokenizer of {getattr(tokenizer, 'name_or_path', '?')!r} has neither "
                             "a pad nor an EOS token: set tokenizer.pad_token before batching")
        tokenizer.pad_token = tokenizer.eos_token
    tokenizer.padding_side = "left"
    return tokenizer


__all__ = ["DTYPES", "ModelNotFound", "enable_gradient_checkpointing", "load_config", "load_language_model", "prepare_tokenizer"]
