"""LwF and LwF-VR for CLIP: distil the previous model on the current domain's images."""

from __future__ import annotations

import torch

from ...algorithms.teacher import FrozenCLIP
from ...algorithms.virtual_vocab import virtual_vocabulary
from ...utils.checks import check_number, check_positive_int
from .plugins.distillation import LwFDistillation
from .zscl_finetune import ZSCLFineTune


class LwF(ZSCLFineTune):
    """LwF (Li & Hoiem, 2016) for CLIP, as the ZSCL paper's MTIL baseline runs it.

    Fine-tuning (:class:`ZSCLFineTune`, whose defaults apply) plus, every iteration, the
    two-way distillation of :class:`~moram_avalanche.strategies.clip.plugins.distillation.LwFDistillation`'s
    frozen teacher on a separate batch of
    the current domain's images; no weight ensembling, no L2 [ZSCL mtil/scripts/lwf.sh].
    Old domains' classes are not in the distilled logits (the ZSCL code's LwF, not classic
    LwF with old heads).

    Args (keyword-only, besides ZSCLFineTune's):
        temperature: 2 (``--T``); image_weight, text_weight: 1 and 1 (``--image_loss
            --text_loss``, no ``--weight_adjust``).
        distill_batch_size: images per distillation batch (None: ``train_mb_size``, as the
            reference).
        reference_tokens: None (the class prompts), or ``[N, L]`` token ids to distil over
            instead (what :class:`LwFVR` passes).

    Memory: one frozen teacher (weights only: eval mode, no grad), re-filled in place from
    the model at each experience start.
    """

    check_values = staticmethod(lambda options: check_distillation_options(options))

    def __init__(self, *, model, tokenizer, temperature: float = 2.0, image_weight: float = 1.0,
                 text_weight: float = 1.0, distill_batch_size: int | None = None,
                 reference_tokens: torch.Tensor | None = None, plugins=None, **kwargs):
        self.distillation = LwFDistillation(
            FrozenCLIP(model), reference_tokens, temperature=temperature, image_weight=image_weight,
            text_weight=text_weight, batch_size=distill_batch_size)
        super().__init__(model=model, tokenizer=tokenizer, plugins=[self.distillation, *(plugins or [])],
                         **kwargs)


def check_distillation_options(options) -> None:
    """Value checks of the distillation options (LwF, ZSCL) given in ``options``."""
    if "temperature" in options:
        check_number("temperature", options["temperature"], low=0, low_open=True, hint="ZSCL: 2")
    for name in ("image_weight", "text_weight", "l2_weight"):
        if name in options:
            check_number(name, options[name], low=0)
    if options.get("distill_batch_size") is not None:
        check_positive_int("distill_batch_size", options["distill_batch_size"])


def _check_virtual_vocabulary(options) -> None:
    for name in ("sentences", "words"):
        if name in options:
            check_positive_int(name, options[name])


class LwFVR(LwF):
    """LwF-VR (ZSCL paper): LwF distilled over random "virtual vocabulary" sentences.

    Identical to :class:`LwF` except that the texts are ``sentences`` random-token sentences of
    ``words`` tokens (1000 and 10 [ZSCL mtil/src/models/helpers.py ``virtual_vocab``]), drawn
    once per run from ``vocabulary_seed``
    (:func:`~moram_avalanche.algorithms.virtual_vocab.virtual_vocabulary`)
    and embedded by the teacher at each experience start [ZSCL mtil/scripts/lwf_vr.sh].
    """

    check_values = staticmethod(lambda options: _check_virtual_vocabulary(options))

    def __init__(self, *, model, tokenizer, sentences: int = 1000, words: int = 10,
                 vocabulary_seed: int = 0, **kwargs):
        if "reference_tokens" in kwargs:
            raise TypeError("LwFVR draws its own reference tokens; use LwF to pass yours")
        tokens = virtual_vocabulary(tokenizer, count=sentences, length=words, seed=vocabulary_seed)
        super().__init__(model=model, tokenizer=tokenizer, reference_tokens=tokens, **kwargs)


__all__ = ["LwF", "LwFVR", "check_distillation_options"]
