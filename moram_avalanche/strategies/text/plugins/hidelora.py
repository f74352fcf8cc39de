"""HiDeLoRAPlugin: HiDeLoRA's row-contrastive and L2 terms added to the loss of a LoRA strategy."""

from __future__ import annotations

from avalanche.core import SupervisedPlugin

from ....algorithms.hidelora import (
    HIDELORA_LAMBDA_CONTRAST,
    HIDELORA_LAMBDA_L2,
    HIDELORA_TEMPERATURE,
    l2_norms,
    row_contrast_loss,
)
from ....layers.base import find_layers
from ....layers.lora import LoRALinear
from ....utils.checks import check_number


def check_hidelora_options(options) -> None:
    """Value checks of HiDeLoRA's own options given in ``options`` (one line each, naming the option)."""
    if "lambda_contrast" in options:
        check_number("lambda_contrast", options["lambda_contrast"], low=0,
                     hint=f"HiDeLoRA's code: lamda_1 = {HIDELORA_LAMBDA_CONTRAST:g}")
    if "lambda_l2" in options:
        check_number("lambda_l2", options["lambda_l2"], low=0, hint=f"HiDeLoRA's code: lamda_2 = {HIDELORA_LAMBDA_L2:g}")
    if "temperature" in options:
        check_number("temperature", options["temperature"], low=0, low_open=True,
                     hint=f"HiDeLoRA's code divides M M^T by {HIDELORA_TEMPERATURE:g}")


class HiDeLoRAPlugin(SupervisedPlugin, supports_distributed=True):
    """Adds ``lambda_contrast * sum_layers CE(D D^T / temperature, I) + lambda_l2 * sum ||theta||_2``
    to ``strategy.loss`` before every backward pass (:mod:`moram_avalanche.algorithms.hidelora`).

    The layers are the model's :class:`~moram_avalanche.layers.lora.LoRALinear` whose
    down-projection ``D`` trains; ``theta`` are their trainable factors (``D`` and ``U``). Every
    task, the first included (the code's empty bank of earlier tasks still matches every layer).
    The last values are kept in :attr:`last`.
    """

    def __init__(self, lambda_contrast: float = HIDELORA_LAMBDA_CONTRAST, lambda_l2: float = HIDELORA_LAMBDA_L2,
                 temperature: float = HIDELORA_TEMPERATURE) -> None:
        super().__init__()
        check_hidelora_options({"lambda_contrast": lambda_contrast, "lambda_l2": lambda_l2,
                                "temperature": temperature})
        self.lambda_contrast = float(lambda_contrast)
        self.lambda_l2 = float(lambda_l2)
        self.temperature = float(temperature)
        self.last = {"contrast": 0.0, "l2": 0.0}

    def regulariser(self, model):
        """``(sum of the layers' contrastive terms, sum of their trainable factors' norms)``; ``(None,
        None)`` when no LoRA trains."""
        contrast, l2 = None, None
        for layer in find_layers(model, LoRALinear).values():
            if not layer.down.requires_grad:
                continue
            term = row_contrast_loss(layer.down, self.temperature)
            norms = l2_norms([p for p in (layer.down, layer.up) if p.requires_grad]).to(term.device)
            contrast = term if contrast is None else contrast + term.to(contrast.device)
            l2 = norms if l2 is None else l2 + norms.to(l2.device)
        return contrast, l2

    def before_backward(self, strategy, **kwargs):
        contrast, l2 = self.regulariser(strategy.model)
        if contrast is None:
            return
        strategy.loss = strategy.loss + (self.lambda_contrast * contrast + self.lambda_l2 * l2).to(strategy.loss.dtype)
        self.last = {"contrast": float(contrast.detach()), "l2": float(l2.detach())}


__all__ = ["HiDeLoRAPlugin", "check_hidelora_options"]
