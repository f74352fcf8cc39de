"""TaskLoRALinear: a frozen ``nn.Linear`` plus one LoRA per task, the older ones frozen.

The layer of IncLoRA and O-LoRA (Wang et al., 2023, "Orthogonal Subspace Learning for Language
Model Continual Learning", Sec. 3: one new low-rank update per task, the earlier ones kept and
frozen; its ``IncLoRA`` baseline is the same without the orthogonality term):

    y = W x + b + scale * sum_t U_t (D_t x)

with ``D_t`` ``[rank, d_in]`` Kaiming-uniform and ``U_t`` ``[d_out, rank]`` zero when task ``t``
starts (LoRA's initialisation, as :class:`~moram_avalanche.layers.lora.LoRALinear`), so the
layer computes what it computed before. A :class:`~moram_avalanche.layers.base.GrowingAdapter`:
:meth:`expand` freezes every LoRA and appends the task's new one, :meth:`freeze` freezes it
after the task; a state of any number of tasks loads into a freshly built layer. Declared state:
``downs`` and ``ups`` (``downs.0``, ``ups.0``, ...). Pure torch.
"""

from __future__ import annotations

import math
from typing import List

import torch
from torch import nn

from ..utils.checks import check_positive_int
from .base import GrowingAdapter, LinearWrapper


class TaskLoRALinear(LinearWrapper, GrowingAdapter):
    """``W x + b + scale * sum_t U_t D_t x`` over a frozen base, one LoRA per task (module docstring).

    Args:
        base: the pre-trained linear; frozen and kept as ``self.base``.
        rank: the rank of each task's LoRA (O-LoRA's T5 runs: 8).
        scale: the factor of the updates (peft: ``alpha / r``; 1 here unless stated).
    """

    STATE_KEYS = ("downs", "ups")

    def __init__(self, base: nn.Linear, rank: int = 8, scale: float = 1.0) -> None:
        super().__init__(base)
        check_positive_int("rank", rank)
        self.rank, self.scale = rank, float(scale)
        self.downs = nn.ParameterList()
        self.ups = nn.ParameterList()

    @property
    def num_tasks(self) -> int:
        return len(self.downs)

    def _append(self) -> None:
        like = self.template
        down = nn.Parameter(like.new_empty(self.rank, self.in_features))
        nn.init.kaiming_uniform_(down, a=math.sqrt(5))
        self.downs.append(down)
        self.ups.append(nn.Parameter(like.new_zeros(self.out_features, self.rank)))

    def expand(self) -> int:
        """Freeze every LoRA and append this task's (trainable); returns the number of LoRAs."""
        for parameter in [*self.downs, *self.ups]:
            parameter.requires_grad_(False)
        self._append()
        return self.num_tasks

    def freeze(self) -> None:
        for parameter in [*self.downs, *self.ups]:
            parameter.requires_grad_(False)

    def old_downs(self) -> List[torch.Tensor]:
        """The down-projections of the frozen LoRAs (every LoRA but a trainable last one)."""
        last_trains = self.num_tasks and self.downs[-1].requires_grad
        return list(self.downs[:-1] if last_trains else self.downs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.base(x)
        for down, up in zip(self.downs, self.ups):
            update = nn.functional.linear(nn.functional.linear(x, down.to(x.dtype)), up.to(x.dtype))
            out = out + self.scale * update
        return out

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        count = len({key[len(prefix):].split(".")[1] for key in state_dict
                     if key.startswith(prefix + "downs.")})
        while self.num_tasks < count:  # a checkpoint of more tasks: make room, frozen
            self._append()
        self.freeze()
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, rank={self.rank}, "
                f"tasks={self.num_tasks}, scale={self.scale}")


__all__ = ["TaskLoRALinear"]
