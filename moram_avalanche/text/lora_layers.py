"""The LoRA-family baselines' layers as O-LoRA and the MoRAM release build them: scale and dropout.

Both build their LoRA baselines with ``LoraConfig(r=8, lora_alpha=32, lora_dropout=0.1)``
(O-LoRA ``src/run_uie_lora.py``, ``--lora_dim 8`` by default; the release's
``TRACE/training/main.py`` for SeqLoRA, O-LoRA and the other LoRA rows; reference
``language_models.md``): the update is scaled by ``lora_alpha / r = 4`` and the LoRA path reads
a dropped-out input (peft's ``lora_dropout``: ``B(A(dropout(x))) * scaling``), the frozen base the
clean one; old and new task LoRAs alike (O-LoRA's fork, ``src/peft/tuners/lora.py``,
``Linear.forward``). :data:`OLORA_LORA` holds those values.

:class:`DropoutLoRALinear` and :class:`DropoutTaskLoRALinear` add the dropout to the package's
:class:`~moram_avalanche.layers.lora.LoRALinear` and
:class:`~moram_avalanche.layers.task_lora.TaskLoRALinear` (whose scale is already a field); in
eval mode, or with ``dropout=0``, they compute exactly what those compute. Their state-dict keys
are the parents' (dropout holds no state), and they are instances of the parents, so growth,
O-LoRA's regulariser and checkpoints find them as they find the parents.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from ..layers.lora import LoRALinear
from ..layers.task_lora import TaskLoRALinear
from ..utils.checks import check_number

#: O-LoRA's and the release's LoRA: ``LoraConfig(r=8, lora_alpha=32, lora_dropout=0.1)``
OLORA_LORA = {"rank": 8, "scale": 32 / 8, "dropout": 0.1}


def check_lora_dropout(dropout) -> float:
    """``dropout`` if it is a probability in ``[0, 1)``; else a ValueError naming O-LoRA's value."""
    return float(check_number("dropout", dropout, low=0, high=1, high_open=True,
                              hint=f"probability of zeroing an input of the LoRA path; O-LoRA: {OLORA_LORA['dropout']}"))


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


__all__ = ["DropoutLoRALinear", "DropoutTaskLoRALinear", "OLORA_LORA", "check_lora_dropout"]
