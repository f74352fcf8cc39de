"""Load a Hugging Face language model and its tokenizer by name or local folder, offline-friendly.

:func:`load_language_model` reads the model's config first and picks the class from it:
``AutoModelForSeq2SeqLM`` when ``config.is_encoder_decoder`` (T5), else
``AutoModelForCausalLM`` (LLaMA, Gemma, Mistral, Qwen2). Weights come from a local folder or
the Hugging Face cache; nothing is downloaded when ``HF_HUB_OFFLINE=1`` (or
``local_files_only=True``), and a model that cannot be found is a :class:`ModelNotFound`
naming what was looked for and how to get it. Before any weight loads, the folder is checked to
be the model it claims to be (:mod:`~moram_avalanche.text.check`): a :class:`ModelRefused`
names the file and the fix otherwise.

A causal model's tokenizer gets a pad token (its EOS when it has none: LLaMA's tokenizer ships
without one, and batching needs one) and pads on the **left**: a decoder-only model generates
by continuing the last position of each row, so the prompts of a batch must end at the same
column; right padding would put pad tokens between a short prompt and its answer. Seq2seq
models keep their tokenizer as it is (the encoder reads padded inputs with an attention mask,
the decoder starts from its own start token).
"""

from __future__ import annotations

from typing import Optional, Tuple

from .check import (
    DTYPES,
    ModelNotFound,
    ModelRefused,
    check_language_model,
    fetch_fix,
    load_config,
    load_tokenizer,
    loading_problem,
    offline,
    quiet_transformers,
)


def load_language_model(name_or_path: str, *, dtype: str = "float32",
                        gradient_checkpointing: bool = False,
                        local_files_only: Optional[bool] = None) -> Tuple[object, object]:
    """``(model, tokenizer)`` of a seq2seq or causal language model, by Hub name or local folder.

    Args:
        name_or_path: a Hub name ("t5-large", "meta-llama/Llama-2-7b-chat-hf") resolved in the
            local cache, or a folder written by ``save_pretrained``.
        dtype: "float32" or "bfloat16" (the paper's TRACE runs train in bf16); "float16" is
            refused with the reason (:func:`~moram_avalanche.text.check.check_dtype`).
        gradient_checkpointing: recompute activations in the backward pass (less memory,
            about a third more time); the input embeddings then require grad so that the
            frozen model still passes gradients to the adapters.
        local_files_only: never touch the network (default: True when ``HF_HUB_OFFLINE`` is set).

    Everything that can be checked without the weights in memory is checked first
    (:func:`~moram_avalanche.text.check.check_language_model`: config, weights files and their
    fit, tokenizer); transformers' own loading report is then held to the same rule. The model is
    in eval mode with every parameter trainable as loaded; inject adapters next (they freeze
    the base).
    """
    import torch

    checked = check_language_model(name_or_path, dtype=dtype, local_files_only=local_files_only)
    local_only = offline(local_files_only)
    try:
        with quiet_transformers():
            model, info = checked.auto_class.from_pretrained(checked.source, dtype=getattr(torch, dtype),
                                                             local_files_only=local_only, output_loading_info=True)
        tokenizer = checked.tokenizer or load_tokenizer(checked.source, None, local_files_only=local_only)
    except OSError as error:
        raise ModelNotFound(f"model {name_or_path!r}: its config was found but its weights or tokenizer "
                            f"files are missing ({error}); {fetch_fix(name_or_path)}") from None
    problem = loading_problem(info, checked.config, f"the weights of {name_or_path}")
    if problem:
        raise ModelRefused(problem)
    if checked.folder is None:  # fetched from the Hub just now: the checks that needed the files
        from .check import check_tokenizer_fits

        check_tokenizer_fits(tokenizer, model.get_input_embeddings().num_embeddings, name_or_path, checked.seq2seq)
    if gradient_checkpointing:
        enable_gradient_checkpointing(model)
    prepare_tokenizer(tokenizer, checked.seq2seq)
    model.eval()
    return model, tokenizer


def enable_gradient_checkpointing(model) -> None:
    """Recompute each block's activations in backward instead of keeping them (transformers'
    activation checkpointing), with the inputs' embeddings requiring grad so that the frozen first
    block still passes gradients to the adapters after it."""
    enable = getattr(model, "activation_checkpointing_enable", None)  # transformers >= 5.2x's name
    (enable or model.gradient_checkpointing_enable)()  # the older name (e.g. 5.17, a GPU image's)
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


__all__ = ["DTYPES", "ModelNotFound", "ModelRefused", "enable_gradient_checkpointing", "load_config", "load_language_model",
           "prepare_tokenizer"]
