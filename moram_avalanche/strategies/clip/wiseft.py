"""WiSE-FT: fine-tune each domain, then interpolate with the start (or zero-shot) weights."""

from __future__ import annotations

from ...algorithms.weight_copy import check_place
from ...utils.checks import check_number
from .plugins.weights import ANCHORS, WiSEMerge
from .zscl_finetune import ZSCLFineTune


class WiSEFT(ZSCLFineTune):
    """WiSE-FT (Wortsman et al., CVPR 2022) as ZSCL's MTIL baseline runs it.

    Fine-tuning (:class:`ZSCLFineTune`, whose defaults apply), then once at the end of every
    experience ``theta <- alpha * theta_finetuned + (1 - alpha) * theta_anchor``
    (:class:`~moram_avalanche.strategies.clip.plugins.weights.WiSEMerge`), the merged model being
    the next experience's start [ZSCL mtil/src/models/finetune.py, mtil/scripts/WiSE_finetune.sh].

    Args (keyword-only, besides ZSCLFineTune's):
        alpha: 0.8 (``--wise_ft_alpha 0.8``).
        anchor: "start" -- the model when the experience starts (``--wise_ft_model n``, the
            script's choice) -- or "zeroshot": ``model`` as passed here.
        weights_on: where the anchor copy lives: "cpu" (float32, default) or "model" (the
            model's device and dtype).
    """

    check_values = staticmethod(lambda options: _check_wise_options(options))

    def __init__(self, *, model, tokenizer, alpha: float = 0.8, anchor: str = "start",
                 weights_on: str = "cpu", plugins=None, **kwargs):
        self.wise_merge = WiSEMerge(alpha, anchor=anchor, on=weights_on,
                                    zeroshot=model if anchor == "zeroshot" else None)
        super().__init__(model=model, tokenizer=tokenizer, plugins=[self.wise_merge, *(plugins or [])],
                         **kwargs)


def _check_wise_options(options) -> None:
    if "alpha" in options:
        check_number("alpha", options["alpha"], low=0, high=1, hint="the fine-tuned weights' share; ZSCL: 0.8")
    if "anchor" in options and options["anchor"] not in ANCHORS:
        raise ValueError(f"anchor must be one of {ANCHORS}, got {options['anchor']!r}")
    if "weights_on" in options:
        check_place(options["weights_on"])


__all__ = ["WiSEFT"]
