"""TextHead: class-name prompts -> L2-normalised CLIP text embeddings, cached when frozen."""

from __future__ import annotations

from typing import Dict, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import nn


def context_length(model: nn.Module):
    """The number of tokens the text encoder of an open_clip model takes (None if unknown)."""
    for owner in (model, getattr(model, "text", None)):
        length = getattr(owner, "context_length", None)
        if isinstance(length, int):
            return length
    return None


def check_tokenizer(model: nn.Module, tokenizer) -> None:
    """A ValueError unless ``tokenizer`` makes token sequences as long as ``model`` reads.

    One probe sentence is tokenised. A tokenizer of another model (say open_clip's default
    77-token one with a 16-token text encoder) otherwise fails deep inside the text encoder,
    or -- when padding lengths happen to broadcast -- not at all.
    """
    if not callable(tokenizer):
        raise TypeError(f"tokenizer must be callable (texts -> token ids), got {type(tokenizer).__name__}")
    expected = context_length(model)
    if expected is None:
        return
    tokens = tokenizer(["a photo."])
    length = tokens.shape[-1] if hasattr(tokens, "shape") else None
    if length != expected:
        raise ValueError(
            f"the tokenizer makes sequences of {length} tokens but the model's text encoder "
            f"takes {expected} (model.context_length): use the model's own tokenizer, "
            "load_clip's fourth value or open_clip.get_tokenizer(<model name>)")


class TextHead:
    """Embeds prompts with a CLIP model's text encoder.

    ``embed(prompts)`` runs without gradient and caches the result per prompt list until
    :meth:`clear` (call it whenever the text encoder may have changed);
    ``embed(prompts, grad=True)`` runs with gradient and caches nothing.
    ``classifier(templates_per_class)`` averages the normalised embeddings of several
    templates per class and renormalises them (CLIP's prompt ensemble).
    """

    def __init__(self, model: nn.Module, tokenizer, batch_size: int = 256) -> None:
        check_tokenizer(model, tokenizer)
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self._cache: Dict[Tuple[str, ...], torch.Tensor] = {}

    def clear(self) -> None:
        self._cache.clear()

    def embed(self, prompts: Sequence[str], *, grad: bool = False) -> torch.Tensor:
        key = tuple(prompts)
        if not key:
            raise ValueError("no prompts to embed")
        if grad:
            return self._encode(key)
        if key not in self._cache:
            with torch.no_grad():
                self._cache[key] = self._encode(key)
        return self._cache[key]

    def ensemble(self, prompt_sets: Sequence[Sequence[str]]) -> torch.Tensor:
        """``[C, D]`` classifier from ``prompt_sets[t][c]`` (template t, class c), no gradient.

        All templates go through the text encoder together (``batch_size`` prompts a call),
        not one call per template: MTIL's Caltech101 set alone has 34 templates."""
        classes = {len(prompts) for prompts in prompt_sets}
        if len(classes) != 1:
            raise ValueError(f"every template needs one prompt per class, got lengths {sorted(classes)}")
        flat = self.embed([p for prompts in prompt_sets for p in prompts])
        return F.normalize(flat.view(len(prompt_sets), classes.pop(), -1).mean(0), dim=-1)

    def _encode(self, prompts: Tuple[str, ...]) -> torch.Tensor:
        device = next(self.model.parameters()).device
        chunks = []
        for start in range(0, len(prompts), self.batch_size):
            tokens = self.tokenizer(list(prompts[start:start + self.batch_size])).to(device)
            chunks.append(F.normalize(self.model.encode_text(tokens), dim=-1))
        return torch.cat(chunks)
