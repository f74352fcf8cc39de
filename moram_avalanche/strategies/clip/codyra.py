"""CoDyRA (continual dynamic rank-selective LoRA) on the shared CLIP loop."""

from __future__ import annotations

from typing import Sequence

from ...algorithms.rank_selection import DENSE_FRACTION, KAPPA_STEPS, MAX_KAPPA
from ...clip.inject import TARGET_PATHS, inject_gated_lora
from ...clip.towers import ENCODERS
from ...layers.base import find_layers
from ...layers.gated_lora import GatedLoRALinear
from .loop import CLIPStrategy
from .plugins.codyra import CoDyRAPlugin


class CoDyRA(CLIPStrategy):
    """CoDyRA as its official code runs it on X-TAIL [Artificer-AI-Lab/CoDyRA ``runner_codyra.sh``,
    ``main.py``, ``models/codyra.py``, ``loralib/codyra.py``; commit c1691e4].

    Every target linear gets a gated LoRA (:class:`~moram_avalanche.layers.gated_lora.GatedLoRALinear`);
    per task the factors and gates train on the shared loop, the gates are soft-thresholded on a
    rising schedule in the second half of the task (rank selection,
    :class:`~moram_avalanche.strategies.clip.plugins.codyra.CoDyRAPlugin`), and the surviving
    components merge into the weights after it. Evaluation uses the merged weights.

    Args (keyword-only, besides CLIPStrategy's), with the release's values:
        rank: 16 (``RANK=16``). encoders: both (``TARGET_ENCODER=all``). targets: q, k, v,
            out, c_fc, c_proj (``qkvoinout``).
        max_kappa: 0.005 (``MAX_KAPPA``). kappa_steps: 50 (``--lambda_num`` default).
        dense_fraction: 0.5 (``DENSE_ITERS``).
        lr 5e-4 (``LR``), iterations 500 (``ITERATIONS``), batch 64, AdamW betas (0.9, 0.9999),
        weight decay 0, warm-up 0, label smoothing 0 (``main.py`` defaults), cosine schedule;
        loss: image->text over the current classes plus text->image over seen + current
        classes (``train_model``) -- CLIPStrategy's defaults.
    """

    def __init__(self, *, model, tokenizer, rank: int = 16, encoders: Sequence[str] = ENCODERS,
                 targets: Sequence[str] = tuple(TARGET_PATHS), max_kappa: float = MAX_KAPPA,
                 kappa_steps: int = KAPPA_STEPS, dense_fraction: float = DENSE_FRACTION,
                 iterations: int = 500, lr: float = 5e-4, train_mb_size: int = 64, plugins=None, **kwargs):
        self.codyra_plugin = CoDyRAPlugin(max_kappa, kappa_steps, dense_fraction)  # checks first
        if not find_layers(model, GatedLoRALinear):
            inject_gated_lora(model, encoders, targets, rank=rank)
        super().__init__(model=model, tokenizer=tokenizer, iterations=iterations, lr=lr,
                         train_mb_size=train_mb_size, plugins=[self.codyra_plugin, *(plugins or [])], **kwargs)


__all__ = ["CoDyRA"]
