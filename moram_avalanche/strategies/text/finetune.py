"""SeqFT (``finetune``): every weight of the language model trains on each task in turn."""

from __future__ import annotations

from ...layers.base import find_layers
from .adapters import wrap
from .loop import TextStrategy


class TextFineTune(TextStrategy):
    """SeqFT: every weight of the model trains on each task in turn (no adapters)."""

    def __init__(self, *, model, tokenizer=None, **kwargs):
        model = wrap(model, tokenizer)
        if find_layers(model):
            raise ValueError("TextFineTune trains the model's own weights: give a model without adapters")
        model.requires_grad_(True)
        super().__init__(model=model, tokenizer=tokenizer, **kwargs)



__all__ = ["TextFineTune"]
