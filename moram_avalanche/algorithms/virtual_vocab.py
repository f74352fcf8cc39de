"""Random-token "virtual vocabulary" sentences, the reference texts of LwF-VR."""

from __future__ import annotations

import torch


def virtual_vocabulary(tokenizer, *, count: int = 1000, length: int = 10, seed: int = 0) -> torch.Tensor:
    """``[count, L]`` token ids: ``SOT``, ``length`` random BPE tokens, ``EOT``, zero padding.

    ZSCL's ``virtual_vocab`` (``--ref-sentences random``: 1000 sentences of 10 tokens)
    [ZSCL mtil/src/models/helpers.py]. ``L`` is the tokenizer's context length; ``SOT`` and
    ``EOT`` are read from ``tokenizer([""])`` and must be the last two ids of CLIP's BPE
    vocabulary. Tokens are drawn uniformly from the ordinary tokens (``0 .. SOT - 1``);
    the reference draws from the whole vocabulary, so about 0.4 of its 1000 sentences also
    hold a ``SOT`` or ``EOT`` in the middle -- excluded here so that CLIP's text pooling at the
    ``EOT`` position is well defined. The sentences are a function of ``seed``, so a resumed
    run draws the same ones.
    """
    empty = tokenizer([""])
    if empty.dim() != 2 or empty.shape[1] < 2:
        raise ValueError(f"expected the tokenizer to return [N, context_length] ids, got {tuple(empty.shape)}")
    sot, eot, context = int(empty[0, 0]), int(empty[0, 1]), empty.shape[1]
    if eot != sot + 1 or bool(empty[0, 2:].any()):
        raise ValueError("virtual_vocabulary needs CLIP's BPE tokenizer (tokenizer(['']) = [SOT, EOT, 0, ...] "
                         f"with EOT = SOT + 1), got {empty[0, :4].tolist()}")
    if count < 1 or length < 1 or length + 2 > context:
        raise ValueError(f"need count >= 1 and 1 <= length <= {context - 2} (context length {context}), "
                         f"got count={count}, length={length}")
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.zeros(count, context, dtype=empty.dtype)
    tokens[:, 0] = sot
    tokens[:, 1:length + 1] = torch.randint(0, sot, (count, length), generator=generator)
    tokens[:, length + 1] = eot
    return tokens


__all__ = ["virtual_vocabulary"]
