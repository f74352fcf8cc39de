"""The training objective of MoRAM's CLIP experiments (method reference, "training objective")."""

from __future__ import annotations

import torch
import torch.nn.functional as F


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
    loss = F.cross_entropy(logit_scale * image @ current_text.t(), labels,
                           label_smoothing=label_smoothing)
    if text_to_image:
        every = current_text if seen_text is None else torch.cat([seen_text, current_text])
        offset = 0 if seen_text is None else seen_text.shape[0]
        classes = torch.arange(every.shape[0], device=labels.device)
        targets = (classes[:, None] == (labels + offset)[None, :]).to(image.dtype)
        loss = loss + F.cross_entropy(logit_scale * every @ image.t(), targets)
    return loss


__all__ = ["clip_continual_loss"]
