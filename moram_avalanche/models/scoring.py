"""CLIP's scoring: image features against class text embeddings, laid out in a stream's label space.

The one place that decides which prompts embed a domain's classes (:func:`class_embeddings`:
the training prompt; at evaluation the MTIL template ensemble in the "domain" space, one prompt
per class of every domain in the "all" space, :func:`evaluation_classifier`), how image
features meet them (:func:`scores`) and where the scores sit in the logits
(:func:`own_domain_logits`, :func:`masked_columns`). Used by
:class:`~moram_avalanche.models.classifier.CLIPClassifier` (CLIP as an Avalanche model, for
Avalanche's strategies) and :class:`~moram_avalanche.strategies.clip.loop.CLIPStrategy` (the
package's loop). The embeddings are cached per prompt list by the
:class:`~moram_avalanche.clip.head.TextHead` passed in (the caller decides which: the
classifier keeps one per train / eval mode, the strategy one).

Training logits have :attr:`~moram_avalanche.benchmarks.images.label_space.LabelSpace.width`
columns, with the columns a sample is not scored against set to ``mask_value`` -- Avalanche's
convention for units a model cannot predict (``IncrementalClassifier(masking=True,
mask_value=-1000)``, ``avalanche/models/dynamic_modules.py``): they drop out of a softmax and
of an arg-max, the shape stays fixed.
"""

from __future__ import annotations

from typing import Callable

import torch

from ..benchmarks.images.label_space import LabelSpace
from ..clip.head import TextHead

#: Avalanche's ``IncrementalClassifier`` default for masked units
MASK_VALUE = -1000.0


def scores(image: torch.Tensor, text: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """``[B, C]``: ``scale * image @ text^T`` (text cast to the image features' dtype)."""
    return scale * image @ text.t().to(image.dtype)


def class_embeddings(head: TextHead, space: LabelSpace, task: int, *, training: bool,
                     grad: bool = False) -> torch.Tensor:
    """``[C, D]`` class embeddings of domain ``task`` embedded by ``head``.

    Training: the domain's training prompts (with gradient when ``grad``, else cached by
    ``head``). Evaluation: the "domain" space averages the domain's evaluation templates
    (CLIP's prompt ensemble, :meth:`~moram_avalanche.clip.head.TextHead.ensemble`, also for a
    single template), the "all" space keeps its one prompt per class.
    """
    sets = space.prompt_sets(task, training)
    if training or space.kind == "all":
        return head.embed(sets[0], grad=grad)
    return head.ensemble(sets)


def evaluation_classifier(head: TextHead, space: LabelSpace, task: int) -> torch.Tensor:
    """The classifier an evaluation experience of domain ``task`` is scored against.

    "all": every class of every domain, in label order, embedded in one call of ``head``
    (``[width, D]``); "domain": the domain's own classes (:func:`class_embeddings`).
    """
    if space.kind == "all":
        return head.embed([p for t in range(len(space.domains)) for p in space.prompt_sets(t, False)[0]])
    return class_embeddings(head, space, task, training=False)


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
        parts.append(masked_columns(scores(features, text_of(task), scale), space.columns(task).start,
                                    space.width, mask_value))
        order.append(rows)
    if len(parts) == 1:
        return parts[0]
    return torch.cat(parts)[torch.argsort(torch.cat(order))]


__all__ = ["MASK_VALUE", "class_embeddings", "evaluation_classifier", "masked_columns", "own_domain_logits",
           "scores"]
