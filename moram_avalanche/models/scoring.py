"""Image features against class embeddings, laid out in a stream's label space.

Shared by :class:`~moram_avalanche.models.classifier.CLIPClassifier` (CLIP as an Avalanche
model) and :class:`~moram_avalanche.strategies.base.CLIPStrategy` (the package's loop): both
give logits of :attr:`~moram_avalanche.benchmarks.label_space.LabelSpace.width` columns, with
the columns a sample is not scored against set to ``mask_value`` -- Avalanche's convention for
units a model cannot predict (``IncrementalClassifier(masking=True, mask_value=-1000)``,
``avalanche/models/dynamic_modules.py``): they drop out of a softmax and of an arg-max, the
shape stays fixed.
"""

from __future__ import annotations

from typing import Callable

import torch

from ..benchmarks.label_space import LabelSpace

#: Avalanche's ``IncrementalClassifier`` default for masked units
MASK_VALUE = -1000.0


def masked_columns(scores: torch.Tensor, start: int, width: int, mask_value: float) -> torch.Tensor:
    """``scores`` ``[B, C]`` placed at columns ``start .. start + C`` of ``width``, the rest masked."""
    rows, count = scores.shape
    left = scores.new_full((rows, start), mask_value)
    right = scores.new_full((rows, width - start - count), mask_value)
    return torch.cat([left, scores, right], dim=1)


def own_domain_logits(image: torch.Tensor, tasks: torch.Tensor, text_of: Callable[[int], torch.Tensor],
                      scale: torch.Tensor, space: LabelSpace, *,
                      mask_value: float = MASK_VALUE) -> torch.Tensor:
    """``[B, space.width]``: each image scored against its own domain's classes, masked elsewhere.

    Args:
        image: ``[B, D]`` normalised image features.
        tasks: ``[B]`` each sample's domain (its task label).
        text_of: domain index -> ``[C_d, D]`` normalised class embeddings.
        scale: ``exp(logit_scale)``.
    """
    present = tasks.unique().tolist()
    parts, order = [], []
    for task in present:
        rows = (tasks == task).nonzero().flatten() if len(present) > 1 else None
        features = image if rows is None else image[rows]
        scores = scale * features @ text_of(task).t().to(features.dtype)
        parts.append(masked_columns(scores, space.columns(task).start, space.width, mask_value))
        order.append(rows)
    if len(parts) == 1:
        return parts[0]
    return torch.cat(parts)[torch.argsort(torch.cat(order))]


__all__ = ["MASK_VALUE", "masked_columns", "own_domain_logits"]
