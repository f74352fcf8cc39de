"""The transformer blocks of a Hugging Face model: what FSDP gathers one at a time.

A ``transformers`` model class declares, in ``_no_split_modules``, the class names of the
modules that must stay whole on one device (what ``device_map="auto"`` never splits, the
``PreTrainedModel`` docs): its decoder / encoder layers (``LlamaDecoderLayer``, ``T5Block``,
``GemmaDecoderLayer``, ...). :func:`transformer_blocks` finds them by those names, so no
architecture is listed here. :data:`FORWARD_METHODS` are the methods that must gather the
sharded weights as ``forward`` does.
"""

from __future__ import annotations

from typing import List

from torch import nn

#: a ``transformers`` model's methods besides ``forward`` that run its parts directly: ``generate``
#: (a seq2seq model's calls its encoder itself: transformers 5, ``GenerationMixin._prepare_text_encoder_decoder_kwargs_for_generation``)
FORWARD_METHODS = ("generate",)


def transformer_blocks(model: nn.Module) -> List[nn.Module]:
    """The modules of ``model`` whose class its ``_no_split_modules`` names, in module order.

    A ValueError when the model declares none, or none of them is in the model.
    """
    names = set(getattr(model, "_no_split_modules", None) or ())
    if not names:
        raise ValueError(f"{type(model).__name__} declares no _no_split_modules (the transformer blocks a "
                         "Hugging Face model keeps whole): sharding its weights (--fsdp) needs them; run "
                         "without --fsdp")
    blocks = [module for module in model.modules() if type(module).__name__ in names]
    if not blocks:
        raise ValueError(f"{type(model).__name__} holds no module of its _no_split_modules {sorted(names)}: "
                         "cannot find its transformer blocks to shard (--fsdp)")
    return blocks


__all__ = ["FORWARD_METHODS", "transformer_blocks"]
