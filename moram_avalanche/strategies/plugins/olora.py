"""OLoRAPlugin: O-LoRA's regularisers added to the loss of any strategy whose model holds task LoRAs."""

from __future__ import annotations

from avalanche.core import SupervisedPlugin

from ...algorithms.olora import OLORA_LAMBDA_L2, OLORA_LAMBDA_ORTH, OLORA_POWER, l2_loss, orthogonality_loss
from ...layers.base import find_layers
from ...layers.task_lora import TaskLoRALinear
from ...utils.checks import check_number


class OLoRAPlugin(SupervisedPlugin, supports_distributed=True):
    """Adds ``lambda_orth * L_orth + lambda_l2 * L2`` to ``strategy.loss`` before every backward pass.

    ``L_orth`` and ``L2`` are :func:`~moram_avalanche.algorithms.olora.orthogonality_loss` (the
    trainable LoRA of every :class:`~moram_avalanche.layers.task_lora.TaskLoRALinear` against
    its frozen ones, summed over layers) and :func:`~moram_avalanche.algorithms.olora.l2_loss`
    (the trainable LoRA's factors). Defaults: O-LoRA's lambdas (0.5, 0) and its code's ``p = 1``
    (:mod:`moram_avalanche.algorithms.olora`). The last values are kept in :attr:`last`.
    """

    def __init__(self, lambda_orth: float = OLORA_LAMBDA_ORTH, lambda_l2: float = OLORA_LAMBDA_L2,
                 power: int = OLORA_POWER) -> None:
        super().__init__()
        self.lambda_orth = float(check_number("lambda_orth", lambda_orth, low=0))
        self.lambda_l2 = float(check_number("lambda_l2", lambda_l2, low=0))
        if power not in (1, 2):
            raise ValueError(f"power must be 1 (O-LoRA's code) or 2 (its paper), got {power!r}")
        self.power = power
        self.last = {"orth": 0.0, "l2": 0.0}

    def regulariser(self, model):
        """``(L_orth, L2)`` of ``model``'s trainable task LoRAs (zeros when none trains)."""
        orth, l2 = None, None
        for layer in find_layers(model, TaskLoRALinear).values():
            if not layer.num_tasks or not layer.downs[-1].requires_grad:
                continue
            term = orthogonality_loss(layer.downs[-1], layer.old_downs(), self.power)
            norms = l2_loss([layer.downs[-1], layer.ups[-1]]).to(term.device)
            orth = term if orth is None else orth + term
            l2 = norms if l2 is None else l2 + norms
        return orth, l2

    def before_backward(self, strategy, **kwargs):
        orth, l2 = self.regulariser(strategy.model)
        if orth is None:
            return
        strategy.loss = strategy.loss + self.lambda_orth * orth + self.lambda_l2 * l2
        self.last = {"orth": float(orth.detach()), "l2": float(l2.detach())}


__all__ = ["OLoRAPlugin"]
