"""Fine-tuning each domain on its own, from the same pre-trained weights: the per-domain upper bound."""

from __future__ import annotations

from ...algorithms.weight_copy import check_place
from .plugins.weights import RestartFrom
from .zscl_finetune import ZSCLFineTune


class FineTuneAlone(ZSCLFineTune):
    """Every experience fine-tunes the *pre-trained* model (``model`` as passed here) on its
    domain alone: the per-domain upper bound of a stream, the "Fine-tune" row of the MoRAM
    paper's X-TAIL table (the RAIL lineage's "CLIP / Fine-tune" row).

    Row ``t`` of the accuracy matrix is the model fine-tuned on domain ``t`` alone, evaluated
    in the benchmark's label space (X-TAIL: all classes of all domains), so the **diagonal** is
    the upper bound per domain; the rest of the matrix (zero-shot-like Transfer, no
    "Average" or "Last" in a continual sense) is not meaningful for this strategy.

    The paper does not say how it fine-tuned; this is ZSCL's fine-tuning recipe
    (:class:`ZSCLFineTune`, whose defaults apply) restarted from the pre-trained weights at
    every experience (:class:`~moram_avalanche.strategies.clip.plugins.weights.RestartFrom`).

    Args (keyword-only, besides ZSCLFineTune's):
        weights_on: where the copy of the pre-trained weights lives ("cpu", default, or "model").
    """

    def __init__(self, *, model, tokenizer, weights_on: str = "cpu", plugins=None, **kwargs):
        self.restart = RestartFrom(model, on=check_place(weights_on))
        super().__init__(model=model, tokenizer=tokenizer, plugins=[self.restart, *(plugins or [])],
                         **kwargs)


__all__ = ["FineTuneAlone"]
