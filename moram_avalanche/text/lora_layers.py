"""The LoRA-family baselines' layers as O-LoRA and the MoRAM release build them: scale and dropout.

Both build their LoRA baselines with ``LoraConfig(r=8, lora_alpha=32, lora_dropout=0.1)``
(O-LoRA ``src/run_uie_lora.py``, ``--lora_dim 8`` by default; the release's
``TRACE/training/main.py`` for SeqLoRA, O-LoRA and the other LoRA rows; reference
``language_models.md``): the update is scaled by ``lora_alpha / r = 4`` and the LoRA path reads
a dropped-out input (peft's ``lora_dropout``: ``B(A(dropout(x))) * scaling``), the frozen base the
clean one; old and new task LoRAs alike (O-LoRA's fork, ``src/peft/tuners/lora.py``,
``Linear.forward``). :class:`LoRALayerConfig` declares and checks those three options (its
defaults, :data:`OLORA_LORA_SETTING`, are those values).

:class:`DropoutLoRALinear` and :class:`DropoutTaskLoRALinear` add the dropout to the package's
:class:`~moram_avalanche.layers.lora.LoRALinear` and
:class:`~moram_avalanche.layers.task_lora.TaskLoRALinear` (whose scale is already a field); in
eval mode, or with ``dropout=0``, they compute exactly what those compute. Their state-dict keys
are the parents' (dropout holds no state), and they are instances of the parents, so growth,
O-LoRA's regulariser and checkpoints find them as they find the parents.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from types import MappingProxyType

import torch
from torch import nn
from torch.nn import functional as F

from ..layers.lora import LoRALinear
from ..layers.task_lora import TaskLoRALinear
from ..utils.checks import check_number, check_positive_int


@dataclass(frozen=True)
class LoRALayerConfig:
    """The LoRA rows' layer options (SeqLoRA, IncLoRA, O-LoRA and the rows built on them);
    defaults O-LoRA's and the release's ``LoraConfig(r=8, lora_alpha=32, lora_dropout=0.1)``
    (module docstring).

    Attributes:
        rank: r, the rank of each LoRA.
        scale: the factor on the update, ``lora_alpha / r`` (32 / 8 = 4).
        dropout: the probability of zeroing an input of the LoRA path (peft's ``lora_dropout``).

    Checked once, when it is made: a ValueError naming the option, what was given and O-LoRA's value.
    """

    rank: int = 8
    scale: float = 32 / 8
    dropout: float = 0.1

    def __post_init__(self) -> None:
        check_positive_int("rank", self.rank)
        check_number("scale", self.scale, hint=f"O-LoRA: lora_alpha / r = {LoRALayerConfig.scale:g}")
        check_lora_dropout(self.dropout)


def check_lora_dropout(dropout) -> float:
    """``dropout`` if it is a probability in ``[0, 1)``; else a ValueError naming O-LoRA's value."""
    return float(check_number("dropout", dropout, low=0, high=1, high_open=True,
                              hint=f"probability of zeroing an input of the LoRA path; O-LoRA: {LoRALayerConfig.dropout}"))


#: O-LoRA's and the release's LoRA (module docstring): the defaults of :class:`LoRALayerConfig`
OLORA_LORA_SETTING = LoRALayerConfig()
#: 0.6's name of :data:`OLORA_LORA_SETTING`, a read-only ``{"rank", "scale", "dropout"}`` view; goes in 0.8
OLORA_LORA = MappingProxyType(dataclasses.asdict(OLORA_LORA_SETTING))


def _low_rank(x: torch.Tensor, down: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    return F.linear(F.linear(x, down.to(x.dtype)), up.to(x.dtype))


class DropoutLoRALinear(LoRALinear):
    """:class:`~moram_avalanche.layers.lora.LoRALinear` whose update reads ``dropout(x)``
    (``W x + b + scale * U D dropout(x)``)."""

    def __init__(self, base: nn.Linear, rank: int, scale: float = 1.0, dropout: float = 0.0) -> None:
        super().__init__(base, rank, scale=scale)
        self.lora_dropout = nn.Dropout(check_lora_dropout(dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(x) + self.scale * _low_rank(self.lora_dropout(x), self.down, self.up)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, dropout={self.lora_dropout.p}"


class DropoutTaskLoRALinear(TaskLoRALinear):
    """:class:`~moram_avalanche.layers.task_lora.TaskLoRALinear` whose updates read ``dropout(x)``
    (``W x + b + scale * sum_t U_t D_t dropout(x)``, one dropout mask for every task's LoRA)."""

    def __init__(self, base: nn.Linear, rank: int = 8, scale: float = 1.0, dropout: float = 0.0) -> None:
        super().__init__(base, rank, scale=scale)
        self.lora_dropout = nn.Dropout(check_lora_dropout(dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.base(x)
        dropped = self.lora_dropout(x)
        for down, up in zip(self.downs, self.ups):
            out = out + self.scale * _low_rank(dropped, down, up)
        return out

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, dropout={self.lora_dropout.p}"


__all__ = ["DropoutLoRALinear", "DropoutTaskLoRALinear", "LoRALayerConfig", "OLORA_LORA", "OLORA_LORA_SETTING",
           "check_lora_dropout"]
