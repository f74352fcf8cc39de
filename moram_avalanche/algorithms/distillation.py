"""The distillation losses of LwF and ZSCL for CLIP [ZSCL mtil/src/models/helpers.py, finetune.py]."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def distillation(teacher_logits: torch.Tensor, student_logits: torch.Tensor,
                 temperature: float = 2.0) -> torch.Tensor:
    """Soft-target cross-entropy, row-wise, scaled by ``T^2``.

    ``T^2 * mean_i CE(softmax(t_i / T), s_i / T)`` with ``CE(p, q) = -sum_j p_j log softmax(q)_j``:
    ZSCL's ``distillation(t, s, T)`` (T = 2 by default, ``--T`` in ZSCL's ``args.py``). Only
    the student logits carry gradient.
    """
    if teacher_logits.shape != student_logits.shape or teacher_logits.dim() != 2:
        raise ValueError(f"expected two [N, C] logit matrices of one shape, got "
                         f"{tuple(teacher_logits.shape)} and {tuple(student_logits.shape)}")
    targets = F.softmax(teacher_logits.detach() / temperature, dim=1)
    return F.cross_entropy(student_logits / temperature, targets) * temperature ** 2


def two_way_distillation(teacher_logits: torch.Tensor, student_logits: torch.Tensor, *,
                         temperature: float = 2.0, image_weight: float = 1.0,
                         text_weight: float = 1.0) -> torch.Tensor:
    """Distillation over the rows and over the columns of ``[images, texts]`` logits.

    ``image_weight * KD(t, s) + text_weight * KD(t^T, s^T)``: each image's distribution over
    the texts (ZSCL's ``--image_loss``) plus each text's distribution over the images of the
    batch (``--text_loss``), weights 1 and 1 in ZSCL.sh, lwf.sh and lwf_vr.sh [ZSCL
    mtil/src/models/finetune.py, mtil/scripts].
    """
    loss = teacher_logits.new_zeros((), dtype=torch.float32)
    if image_weight:
        loss = loss + image_weight * distillation(teacher_logits, student_logits, temperature)
    if text_weight:
        loss = loss + text_weight * distillation(teacher_logits.t(), student_logits.t(), temperature)
    return loss


__all__ = ["distillation", "two_way_distillation"]
