"""HiDeLoRA's regulariser as the TRACE-style language-model code runs it, framework-free.

Source: ZinYY/TreeLoRA ``model/Regular/HideLoRA.py`` (the same file ships in the MoRAM release as
``TRACE/model/Regular/HideLoRA.py``), built by ``training/main.py`` with
``LoraConfig(r=8, lora_alpha=32, lora_dropout=0.1)`` and no ``r_sum``. Read from that code:

* one LoRA per target linear, trained through the whole stream (the new-task factors
  ``loranew_A/B``; the bank of earlier tasks, ``lora_A/B``, has ``r_sum = 0`` rows and is never
  filled, because the concatenation at save time is commented out in ``utils/my_peft/utils/
  save_and_load.py``), and the same single LoRA answers every task at test time
  (``inference/infer_part.py`` loads the round's adapter for every task): no task-identity
  inference, no prototypes;
* per step the loss is ``L_task + lamda_1 * sum_layers L_contrast + lamda_2 * sum ||theta||_2``
  with, per layer, ``M`` = the down-projection's rows (``[r_sum + r, d_in]``; here the ``r`` rows
  of the one LoRA) and ``L_contrast = CE(M M^T / 0.8, [0, 1, ..., rows - 1])`` (cross-entropy's
  mean over rows): each row must be more similar to itself than to the others;
  ``||theta||_2`` is the Frobenius norm of each trainable factor (``loranew_A`` and
  ``loranew_B``);
* ``lamda_1 = 0.5``, ``lamda_2 = 0`` (the class's defaults; ``training/params.py`` builds it
  without them; the MoRAM release reads ``--orth_lambda1`` 0.5 / ``--orth_lambda2`` 0).

What differs from the HiDe-PET paper (Wang et al., "HiDe-PET: Continual Learning via
Hierarchical Decomposition of Parameter-Efficient Tuning"; ivcylc/HiDe-PET, ViTs with a
classification head, README's HiDe-LoRA commands): it keeps task-specific LoRAs and a task-shared
one (``--lora_momentum``), infers the task at test time with a separately trained first-stage
model (``--trained_original_model``) and re-aligns the output layer on stored class statistics
(``--crct_epochs``). None of that is in the language-model code that produced the TRACE
numbers; this library follows the language-model code.

What the library's loop does otherwise, as for every text row: a fresh AdamW (weight decay 0 on
TRACE, so Adam) per task, where the code keeps one DeepSpeed Adam for the whole stream.
"""

from __future__ import annotations

from typing import Iterable

import torch
from torch.nn import functional as F

#: ``lamda_1`` of ``HideLoRA.__init__`` (the weight of the contrastive term)
HIDELORA_LAMBDA_CONTRAST = 0.5
#: ``lamda_2`` of ``HideLoRA.__init__`` (the weight of the L2 term)
HIDELORA_LAMBDA_L2 = 0.0
#: the temperature dividing ``M M^T`` in ``HideLoRA.train_one_task``
HIDELORA_TEMPERATURE = 0.8


def row_contrast_loss(down: torch.Tensor, temperature: float = HIDELORA_TEMPERATURE) -> torch.Tensor:
    """``CE(M M^T / temperature, arange(rows))`` for one layer's down-projection ``M`` ``[rows, d_in]``
    (mean over rows): row ``i``'s logits are its dot products with every row, its target itself."""
    if down.dim() != 2 or down.shape[0] == 0:
        raise ValueError(f"row_contrast_loss needs a [rows, d_in] matrix with rows >= 1, got {tuple(down.shape)}")
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature!r} (HiDeLoRA's code: {HIDELORA_TEMPERATURE})")
    similarity = down @ down.t() / temperature
    return F.cross_entropy(similarity.float(), torch.arange(down.shape[0], device=down.device))


def l2_norms(parameters: Iterable[torch.Tensor]) -> torch.Tensor:
    """``sum ||theta||_2`` (the Frobenius norm of each tensor; 0 for none)."""
    norms = [p.norm(p=2).float() for p in parameters]
    return torch.stack(norms).sum() if norms else torch.zeros(())


__all__ = ["HIDELORA_LAMBDA_CONTRAST", "HIDELORA_LAMBDA_L2", "HIDELORA_TEMPERATURE", "l2_norms", "row_contrast_loss"]
