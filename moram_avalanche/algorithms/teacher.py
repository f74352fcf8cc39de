"""FrozenCLIP: a frozen copy of a CLIP model that answers distillation queries without gradient."""

from __future__ import annotations

import copy
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn


class FrozenCLIP:
    """A private, frozen copy of ``model`` (the teacher of LwF and ZSCL).

    The copy has ``requires_grad=False`` everywhere, stays in eval mode and is only run under
    ``torch.no_grad()``, so it holds its weights and nothing else: no gradients, no optimizer
    state, no activations kept for backward (the reference likewise keeps ``ref_model`` in
    eval mode and queries it under ``no_grad`` [ZSCL mtil/src/models/finetune.py]). It is not a
    submodule of the trained model, so it is neither trained nor checkpointed with it.
    """

    def __init__(self, model: nn.Module) -> None:
        self.model = copy.deepcopy(model).eval().requires_grad_(False)

    @property
    def nbytes(self) -> int:
        tensors = [*self.model.parameters(), *self.model.buffers()]
        return sum(t.numel() * t.element_size() for t in tensors)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def to(self, device) -> FrozenCLIP:
        self.model.to(device)
        return self

    @torch.no_grad()
    def copy_from(self, model: nn.Module) -> None:
        """Take ``model``'s current weights (in place: no second copy is allocated)."""
        self.model.load_state_dict(model.state_dict())
        self.model.eval()

    @torch.no_grad()
    def encode_image(self, images: torch.Tensor) -> torch.Tensor:
        """``[B, D]`` L2-normalised image features."""
        return F.normalize(self.model.encode_image(images), dim=-1)

    @torch.no_grad()
    def encode_tokens(self, tokens: torch.Tensor, batch_size: int = 256) -> torch.Tensor:
        """``[N, D]`` L2-normalised text features of token ids ``[N, L]``, ``batch_size`` at a time."""
        chunks = [F.normalize(self.model.encode_text(tokens[i:i + batch_size].to(self.device)), dim=-1)
                  for i in range(0, len(tokens), batch_size)]
        return torch.cat(chunks)

    def encode_text(self, texts: Sequence[str], tokenizer, batch_size: int = 256) -> torch.Tensor:
        """``[N, D]`` L2-normalised text features of sentences (tokenized ``batch_size`` at a time)."""
        texts = list(texts)
        if not texts:
            raise ValueError("no sentences to embed")
        chunks = [self.encode_tokens(tokenizer(texts[i:i + batch_size]), batch_size)
                  for i in range(0, len(texts), batch_size)]
        return torch.cat(chunks)


__all__ = ["FrozenCLIP"]
