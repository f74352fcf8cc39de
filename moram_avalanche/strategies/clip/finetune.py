"""FineTune: every CLIP weight trained on each domain in turn (the forgetting baseline)."""

from __future__ import annotations

from .loop import CLIPStrategy


class FineTune(CLIPStrategy):
    """Sequential full fine-tuning on the shared CLIP loop.

    Trains all CLIP parameters except ``logit_scale`` (ZSCL's ``--train-mode whole``), with
    ZSCL's fine-tuning learning rate 1e-5 by default (baselines reference, sections 1.1 and 1.6);
    the rest of the loop (AdamW, cosine schedule, loss) is CLIPStrategy's.
    """

    def __init__(self, *, model, tokenizer, lr: float = 1e-5, **kwargs):
        model.requires_grad_(True)
        model.logit_scale.requires_grad_(False)
        if getattr(model, "logit_bias", None) is not None:
            model.logit_bias.requires_grad_(False)
        super().__init__(model=model, tokenizer=tokenizer, lr=lr, **kwargs)


__all__ = ["FineTune"]
