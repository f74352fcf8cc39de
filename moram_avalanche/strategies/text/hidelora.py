"""HiDeLoRA (``hidelora``) as the TRACE-style language-model code runs it: SeqLoRA plus HiDeLoRA's
row-contrastive and L2 terms."""

from __future__ import annotations

from ...algorithms.hidelora import HIDELORA_LAMBDA_CONTRAST, HIDELORA_LAMBDA_L2, HIDELORA_TEMPERATURE
from .plugins.hidelora import HiDeLoRAPlugin, check_hidelora_options
from .seq_lora import TextSeqLoRA


class TextHiDeLoRA(TextSeqLoRA):
    """HiDeLoRA as the TRACE-style language-model code runs it (ZinYY/TreeLoRA and the MoRAM
    release, ``model/Regular/HideLoRA.py``; TRACE's row of the paper's ``tab:llm_cl``):
    :class:`TextSeqLoRA`'s one LoRA trained through the whole stream and used for every task,
    plus ``lambda_contrast * sum_layers CE(D D^T / temperature, I) + lambda_l2 * sum ||theta||_2``
    (:class:`~moram_avalanche.strategies.text.plugins.hidelora.HiDeLoRAPlugin`).

    That code has no task-specific LoRAs, no task-shared one and no task-identity inference: the
    HiDe-PET paper's hierarchical decomposition (ViTs) is not what produced the TRACE number;
    :mod:`moram_avalanche.algorithms.hidelora` says what differs.

    Args (besides TextSeqLoRA's: rank 8, scale 4, dropout 0.1, the code's
    ``LoraConfig(r=8, lora_alpha=32, lora_dropout=0.1)``): lambda_contrast (``lamda_1`` 0.5),
    lambda_l2 (``lamda_2`` 0), temperature (0.8).
    """

    #: the value checks of its own options (run once, by check_strategy_options; its LoRA layer's
    #: are :class:`TextSeqLoRA`'s check, run too)
    check_values = staticmethod(check_hidelora_options)

    def __init__(self, *, model, tokenizer=None, lambda_contrast: float = HIDELORA_LAMBDA_CONTRAST,
                 lambda_l2: float = HIDELORA_LAMBDA_L2, temperature: float = HIDELORA_TEMPERATURE, plugins=None,
                 **kwargs):
        self.hidelora_plugin = HiDeLoRAPlugin(lambda_contrast, lambda_l2, temperature)
        super().__init__(model=model, tokenizer=tokenizer, plugins=[self.hidelora_plugin, *(plugins or [])],
                         **kwargs)


#: 0.6's name of HiDeLoRA's value checks (:func:`~.plugins.hidelora.check_hidelora_options`); goes in 0.8
check_hidelora_strategy_options = check_hidelora_options


__all__ = ["TextHiDeLoRA", "check_hidelora_strategy_options"]
