"""OLoRAPlugin: O-LoRA's regularisers added to the loss of any strategy whose model holds task LoRAs."""

from __future__ import annotations

from typing import Mapping, Union

from avalanche.core import SupervisedPlugin

from ....algorithms.olora import OLORA_LAMBDA_L2, OLORA_LAMBDA_ORTH, OLORA_POWER, l2_loss, orthogonality_loss
from ....layers.base import find_layers
from ....layers.task_lora import TaskLoRALinear
from ....utils.checks import check_number


class OLoRAPlugin(SupervisedPlugin, supports_distributed=True):
    """Adds ``lambda_orth * L_orth + lambda_l2 * L2`` to ``strategy.loss`` before every backward pass.

    ``L_orth`` and ``L2`` are :func:`~moram_avalanche.algorithms.olora.orthogonality_loss` (the
    trainable LoRA of every :class:`~moram_avalanche.layers.task_lora.TaskLoRALinear` against
    its frozen ones, summed over layers) and :func:`~moram_avalanche.algorithms.olora.l2_loss`
    (the trainable LoRA's factors). Defaults: O-LoRA's lambdas (0.5, 0) and its code's ``p = 1``
    (:mod:`moram_avalanche.algorithms.olora`). A lambda is one number or one per task name (the
    experience's ``task_name``; O-LoRA's long sequence, ``scripts/long.sh``): a task it does not
    name is refused when its training starts. The last values are kept in :attr:`last`.
    """

    def __init__(self, lambda_orth: Union[float, Mapping[str, float]] = OLORA_LAMBDA_ORTH,
                 lambda_l2: Union[float, Mapping[str, float]] = OLORA_LAMBDA_L2, power: int = OLORA_POWER) -> None:
        super().__init__()
        self.lambda_orth = _lambda("lambda_orth", lambda_orth)
        self.lambda_l2 = _lambda("lambda_l2", lambda_l2)
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

    def lambdas(self, task_name) -> tuple:
        """``(lambda_orth, lambda_l2)`` of the task named ``task_name``."""
        values = []
        for name, value in (("lambda_orth", self.lambda_orth), ("lambda_l2", self.lambda_l2)):
            if isinstance(value, dict):
                if task_name not in value:
                    raise ValueError(f"{name} gives values for tasks {sorted(value)}, not for {task_name!r}: "
                                     "give one for every task of the stream, or one number for all")
                value = value[task_name]
            values.append(value)
        return tuple(values)

    def before_training_exp(self, strategy, **kwargs):
        self.lambdas(_task_name(strategy))  # a task without lambdas: refused now

    def before_backward(self, strategy, **kwargs):
        orth, l2 = self.regulariser(strategy.model)
        if orth is None:
            return
        lambda_orth, lambda_l2 = self.lambdas(_task_name(strategy))
        strategy.loss = strategy.loss + lambda_orth * orth + lambda_l2 * l2
        self.last = {"orth": float(orth.detach()), "l2": float(l2.detach())}


def _task_name(strategy):
    return getattr(getattr(strategy, "experience", None), "task_name", None)


def _lambda(name: str, value):
    """A lambda as a float, or a dict of task names to floats; a ValueError for anything else."""
    if isinstance(value, Mapping):
        if not value or not all(isinstance(key, str) for key in value):
            raise ValueError(f"{name}: a mapping gives one value per task name, got {dict(value)!r}")
        return {key: float(check_number(f"{name}[{key!r}]", item, low=0)) for key, item in value.items()}
    return float(check_number(name, value, low=0))


__all__ = ["OLoRAPlugin"]
