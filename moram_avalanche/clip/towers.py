"""Where open_clip keeps its encoders and their residual blocks.

open_clip's ``CLIP`` keeps the image tower at ``model.visual`` and the text transformer at
``model.transformer``; ``CustomTextCLIP`` keeps the text tower at ``model.text``. A residual
block is any module with an ``attn`` and an ``mlp.c_fc`` (``ResidualAttentionBlock``).
Every injection of the package finds its blocks here (:func:`blocks`), under the dotted
names ``model.named_modules()`` gives them.
"""

from __future__ import annotations

from typing import List, NamedTuple, Sequence

from torch import nn

from ..utils.names import check_names

#: the two towers an adapter can go into
ENCODERS = ("visual", "text")


class Block(NamedTuple):
    """A residual block of an open_clip encoder."""

    name: str  # dotted name from the model's root
    module: nn.Module
    encoder: str  # "visual" or "text"


def encoder_module(model: nn.Module, encoder: str) -> nn.Module:
    """The module holding an encoder's transformer: ``model.visual`` or the text tower."""
    if encoder == "visual":
        if not hasattr(model, "visual"):
            raise ValueError(f"{type(model).__name__} has no `visual` tower: is it an open_clip model?")
        return model.visual
    if encoder == "text":
        for name in ("text", "transformer"):
            if isinstance(getattr(model, name, None), nn.Module):
                return getattr(model, name)
        raise ValueError(
            f"{type(model).__name__} has neither `text` nor `transformer`: is it an open_clip model?"
        )
    raise ValueError(f"unknown encoder {encoder!r}; expected one of {ENCODERS}")


def is_residual_block(module: nn.Module) -> bool:
    """A transformer block: a module with ``attn`` and ``mlp.c_fc``."""
    return hasattr(module, "attn") and hasattr(getattr(module, "mlp", None), "c_fc")


def blocks(model: nn.Module, encoders: str | Sequence[str] = ENCODERS, *,
           required: bool = True) -> List[Block]:
    """The residual blocks of ``encoders`` (in that order, then model order), with their names.

    With ``required`` an encoder without transformer blocks (a ResNet or Hugging Face tower)
    is a ValueError: the adapters of this package support ViT-style open_clip towers.
    """
    name_of = {module: name for name, module in model.named_modules()}
    found = []
    for encoder in check_names(encoders, ENCODERS, "encoder"):
        root = encoder_module(model, encoder)
        inside = [(name, module) for name, module in root.named_modules() if is_residual_block(module)]
        if required and not inside:
            raise ValueError(
                f"the {encoder} encoder of {type(model).__name__} has no transformer residual "
                "blocks (a ResNet or Hugging Face tower?); the adapters of this package support "
                "ViT-style open_clip towers"
            )
        root_name = name_of[root]
        found.extend(Block(".".join(part for part in (root_name, name) if part), module, encoder)
                     for name, module in inside)
    return found


def text_parameters(model: nn.Module) -> List[nn.Parameter]:
    """The parameters of the text side: everything but the vision tower and the logit scale/bias.

    Their ``requires_grad`` says whether text embeddings can change while training (then they
    are computed with gradient and not cached).
    """
    skip = {id(p) for p in encoder_module(model, "visual").parameters()}
    skip |= {id(getattr(model, n)) for n in ("logit_scale", "logit_bias")
             if getattr(model, n, None) is not None}
    return [p for p in model.parameters() if id(p) not in skip]


__all__ = ["ENCODERS", "Block", "blocks", "encoder_module", "is_residual_block", "text_parameters"]
