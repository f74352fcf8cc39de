"""The training objective of MoRAM's CLIP experiments (method reference, "training objective").

:func:`clip_continual_loss` is the release's loss for a batch of the current domain. A batch
that also holds replayed samples of earlier domains (a replay buffer) is scored with its two
terms separately: :func:`image_to_text_loss` scores every sample against its own domain's
classes, and :func:`text_to_image_loss` scores every class of the seen and current domains
against the batch's images. On a batch of the current domain alone the two add up to
:func:`clip_continual_loss` exactly (same operations).
"""

from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F

REDUCTIONS = ("mean", "sum")


def image_to_text_loss(
    image: torch.Tensor,
    texts: Sequence[torch.Tensor],
    groups: torch.Tensor,
    labels: torch.Tensor,
    logit_scale: torch.Tensor,
    *,
    label_smoothing: float = 0.0,
    reduction: str = "mean",
) -> torch.Tensor:
    """Cross-entropy of each image against the classes of its own domain.

    Args:
        image: ``[B, D]`` normalised image features.
        texts: one ``[C_g, D]`` matrix of normalised class embeddings per domain ``g``.
        groups: ``[B]`` the index in ``texts`` of each sample's domain.
        labels: ``[B]`` each sample's class within its domain (``0..C_g-1``).
        logit_scale: the scale ``exp(logit_scale)`` already applied.
        label_smoothing: spread over each sample's own domain's classes.
        reduction: "mean" over the batch or "sum" (a data-parallel shard sums; the caller
            divides by the global batch).
    """
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
    present = groups.unique().tolist()
    if len(present) == 1:
        text = texts[present[0]]
        return F.cross_entropy(logit_scale * image @ text.t(), labels, label_smoothing=label_smoothing,
                               reduction=reduction)
    total = image.new_zeros(())
    for group in present:
        rows = (groups == group).nonzero().flatten()
        total = total + F.cross_entropy(logit_scale * image[rows] @ texts[group].t(), labels[rows],
                                        label_smoothing=label_smoothing, reduction="sum")
    return total / image.shape[0] if reduction == "mean" else total


def text_to_image_loss(
    image: torch.Tensor,
    every_text: torch.Tensor,
    rows: torch.Tensor,
    logit_scale: torch.Tensor,
) -> torch.Tensor:
    """The release's text->image term: ``CE(scale * E f^T, M)``, mean over the rows of ``E``.

    ``E`` (``every_text``, ``[M, D]``) holds every class of the seen and current domains,
    ``rows[b]`` is the row of sample ``b``'s class in it, and ``M[c, b] = [rows_b == c]`` are
    (unnormalised) soft targets over the batch; a row without a positive in the batch
    contributes 0 but counts in the mean, as in the release.
    """
    classes = torch.arange(every_text.shape[0], device=rows.device)
    targets = (classes[:, None] == rows[None, :]).to(image.dtype)
    return F.cross_entropy(logit_scale * every_text @ image.t(), targets)


def clip_continual_loss(
    image: torch.Tensor,
    current_text: torch.Tensor,
    seen_text: torch.Tensor | None,
    labels: torch.Tensor,
    logit_scale: torch.Tensor,
    *,
    text_to_image: bool,
    label_smoothing: float = 0.0,
) -> torch.Tensor:
    """Image->text cross-entropy over the current classes, plus the text->image term.

    Args:
        image: ``[B, D]`` normalised image features.
        current_text: ``[C, D]`` normalised embeddings of the current task's classes.
        seen_text: ``[S, D]`` normalised embeddings of every class of earlier tasks (or None).
        labels: ``[B]`` local labels of the current task (``0..C-1``).
        logit_scale: the scale ``exp(logit_scale)`` already applied.
        text_to_image: add the text->image term (the release adds it whenever the vision
            encoder trains).
        label_smoothing: of the image->text term.

    The release computes image->text logits over ``[seen; current]`` with the seen columns
    set to -inf, and labels offset by ``S``: the same value as a cross-entropy over the
    current columns alone (computed here; label smoothing then spreads over the current
    classes only, where the release's -inf columns would make it infinite). The text->image
    term is ``CE(scale * E f^T, M)`` over ``E = [seen; current]`` (``S + C`` rows), with
    ``M[c, b] = [label_b + S == c]`` used as (unnormalised) soft targets over the batch and
    the mean taken over all ``S + C`` rows, as in the release.
    """
    loss = image_to_text_loss(image, [current_text], torch.zeros_like(labels), labels, logit_scale,
                              label_smoothing=label_smoothing)
    if text_to_image:
        every = current_text if seen_text is None else torch.cat([seen_text, current_text])
        offset = 0 if seen_text is None else seen_text.shape[0]
        loss = loss + text_to_image_loss(image, every, labels + offset, logit_scale)
    return loss


__all__ = ["REDUCTIONS", "clip_continual_loss", "image_to_text_loss", "text_to_image_loss"]
