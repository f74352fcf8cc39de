"""Soft prompts: trainable vectors put in front of a language model's input embeddings.

A **prefix** is an ``nn.Module`` with ``forward(embeds, mask) -> (embeds, mask)``: it receives the
token embeddings ``[B, T, H]`` of the (cut, padded) prompts and their attention mask ``[B, T]``
(1: a token, 0: padding) and returns ``[B, P + T, H]`` embeddings with ``P`` prompt vectors in
front of every row and the mask extended by ``P`` ones. Attached to
:class:`~moram_avalanche.models.language_model.LanguageModel` as its ``prefix`` attribute (None:
no prefix, nothing changes), it is applied by the wrapper's loss, answer logits, greedy
generation and sampling, which then call the model with ``inputs_embeds`` (prompt tuning, Lester
et al., EMNLP 2021): a seq2seq model's encoder input; a causal model's input right before the
prompt's first token. The wrapper takes care of padding (a causal model's left padding stays on
the left of the prompt vectors, so positions count from the first prompt vector) and of the
answer tokens (a prefix sees the prompt only, never the answer it is trained on).

* :class:`PromptPrefix` -- the base: a subclass returns the ``[B, P, H]`` vectors of each row
  (:meth:`PromptPrefix.prompts`); the base prepends them (:func:`prepend`), cast to the
  embeddings' dtype.
* :class:`SoftPrompt` -- one ``[P, H]`` parameter shared by every row (prompt tuning; what LFPT5
  trains per task).

Built on it: L2P's pool (:class:`~moram_avalanche.text.prompt_pool.PromptPool`) and DualPrompt's
G- and E-prompts (:class:`~moram_avalanche.text.dual_prompt.DualPromptPrefix`).
"""

from __future__ import annotations

from typing import Tuple

import torch
from torch import nn


def prepend(prompts: torch.Tensor, embeds: torch.Tensor, mask: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """``[B, P, H]`` ``prompts`` in front of ``[B, T, H]`` ``embeds`` (cast to their dtype), and
    ``mask`` ``[B, T]`` with ``P`` ones in front."""
    if prompts.dim() != 3 or embeds.dim() != 3 or prompts.shape[0] != embeds.shape[0] \
            or prompts.shape[2] != embeds.shape[2]:
        raise ValueError(f"prompts [B, P, H] must match the embeddings [B, T, H], got {tuple(prompts.shape)} "
                         f"and {tuple(embeds.shape)}: build the prefix with the model's hidden size")
    if mask.shape != embeds.shape[:2]:
        raise ValueError(f"the attention mask must be [B, T] = {tuple(embeds.shape[:2])}, got {tuple(mask.shape)}")
    ones = torch.ones(mask.shape[0], prompts.shape[1], dtype=mask.dtype, device=mask.device)
    return torch.cat([prompts.to(embeds.dtype), embeds], dim=1), torch.cat([ones, mask], dim=1)


class PromptPrefix(nn.Module):
    """A module that puts prompt vectors in front of a batch's input embeddings (module docstring).

    Subclasses implement :meth:`prompts`; ``forward(embeds, mask)`` returns the longer embeddings
    and mask."""

    def prompts(self, embeds: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The ``[B, P, H]`` vectors put in front of each row (they may depend on the row)."""
        raise NotImplementedError(f"{type(self).__name__} must implement prompts(embeds, mask)")

    def forward(self, embeds: torch.Tensor, mask: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        return prepend(self.prompts(embeds, mask), embeds, mask)


def check_shape(length, dim) -> None:
    """A one-line error unless ``length`` (prompt vectors) and ``dim`` (hidden size) are positive ints."""
    for name, value in (("prompt length", length), ("hidden size", dim)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"a soft prompt's {name} must be a positive int, got {value!r}")


class SoftPrompt(PromptPrefix):
    """``length`` trainable vectors of size ``dim`` (the model's hidden size), the same for every
    row; initialised from ``init`` (``[length, dim]``, e.g. rows of the embedding table, as prompt
    tuning and LFPT5 do) or N(0, 1) scaled by ``scale``."""

    def __init__(self, length: int, dim: int, *, init: torch.Tensor = None, scale: float = 1.0) -> None:
        super().__init__()
        check_shape(length, dim)
        if init is None:
            init = torch.randn(length, dim) * scale
        elif tuple(init.shape) != (length, dim):
            raise ValueError(f"a soft prompt's init must be [length, dim] = [{length}, {dim}], got {tuple(init.shape)}")
        self.weight = nn.Parameter(init.detach().clone().float())

    def prompts(self, embeds: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.weight.unsqueeze(0).expand(embeds.shape[0], -1, -1)

    def extra_repr(self) -> str:
        return f"length={self.weight.shape[0]}, dim={self.weight.shape[1]}"


__all__ = ["PromptPrefix", "SoftPrompt", "check_shape", "prepend"]
