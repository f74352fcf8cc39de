"""OLoRAPlugin: O-LoRA's regularisers added to the loss of any strategy whose model holds task
LoRAs, and their options (:class:`OLoRAConfig`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Union

from avalanche.core import SupervisedPlugin

from ....algorithms.olora import OLORA_LAMBDA_L2, OLORA_LAMBDA_ORTH, OLORA_POWER, l2_loss, orthogonality_loss
from ....layers.base import find_layers
from ....layers.task_lora import TaskLoRALinear
from ....utils.checks import check_number

#: a lambda of O-LoRA: one value, or one per task name (``scripts/long.sh``)
Lambda = Union[float, Mapping[str, float]]


def check_lambda(name: str, value) -> None:
    """An O-LoRA lambda: a number >= 0, or a mapping of task names to such numbers."""
    hint = "O-LoRA: 0.5 (orthogonality), 0 (L2); or one per task, e.g. {'mnli': 0.5, 'cb': 0.5}"
    if isinstance(value, Mapping):
        if not value or not all(isinstance(key, str) for key in value):
            raise ValueError(f"{name}: a mapping gives one value per task name, got {dict(value)!r} ({hint})")
        for key, item in value.items():
            check_number(f"{name}[{key!r}]", item, low=0, hint=hint)
        return
    check_number(name, value, low=0, hint=hint)


@dataclass(frozen=True)
class OLoRAConfig:
    """O-LoRA's regularisers' options (defaults O-LoRA's, cited in :mod:`moram_avalanche.algorithms.olora`).

    Attributes:
        lambda_orth: the orthogonality term's weight (0.5), one value or one per task name.
        lambda_l2: the L2 term's weight (0), one value or one per task name.
        power: the exponent of the orthogonality term (1: the code's absolute values; 2: the
            paper's squares).

    Checked once, when it is made: a ValueError naming the option, what was given and O-LoRA's value.
    """

    lambda_orth: Lambda = OLORA_LAMBDA_ORTH
    lambda_l2: Lambda = OLORA_LAMBDA_L2
    power: int = OLORA_POWER

    def __post_init__(self) -> None:
        check_lambda("lambda_orth", self.lambda_orth)
        check_lambda("lambda_l2", self.lambda_l2)
        if self.power not in (1, 2):
            raise ValueError(f"power must be 1 (O-LoRA's code) or 2 (its paper), got {self.power!r}")


class OLoRAPlugin(SupervisedPlugin, supports_distributed=True):
    """Adds ``lambda_orth * L_orth + lambda_l2 * L2`` to ``strategy.loss`` before every backward pass.

    ``L_orth`` and ``L2`` are :func:`~moram_avalanche.algorithms.olora.orthogonality_loss` (the
    trainable LoRA of every :class:`~moram_avalanche.layers.task_lora.TaskLoRALinear` against
    its frozen ones, summed over layers) and :func:`~moram_avalanche.algorithms.olora.l2_loss`
    (the trainable LoRA's factors). Defaults: O-LoRA's lambdas (0.5, 0) and its code's ``p = 1``
    (:mod:`moram_avalanche.algorithms.olora`). A lambda is one number or one per task name (the
    experience's ``task_name``; O-LoRA's long sequence, ``scripts/long.sh``): a task it does not
    name is refused when its training starts. The last values are kept in :attr:`last`.

    Its options are checked once, as an :class:`OLoRAConfig` (:attr:`config`).
    """

    def __init__(self, lambda_orth: Lambda = OLORA_LAMBDA_ORTH, lambda_l2: Lambda = OLORA_LAMBDA_L2,
                 power: int = OLORA_POWER) -> None:
        super().__init__()
        #: the options, checked once
        self.config = OLoRAConfig(lambda_orth, lambda_l2, power)
        self.lambda_orth = _as_floats(self.config.lambda_orth)
        self.lambda_l2 = _as_floats(self.config.lambda_l2)
        self.power = self.config.power
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


def _as_floats(value):
    """A checked lambda as a float, or a dict of task names to floats."""
    return {key: float(item) for key, item in value.items()} if isinstance(value, Mapping) else float(value)


__all__ = ["Lambda", "OLoRAConfig", "OLoRAPlugin", "check_lambda"]
