"""MoRAM's layer with dropout on the atoms' input: the release's language-model variant.

The MoRAM release applies dropout to the input of the atoms only (its layer in
``TRACE/utils/my_peft/tuners/moram.py``: "dropout on the input", then the routing and the
read-out on the dropped input; the frozen ``W x`` sees the clean input), with ``p = 0.1`` in
the paper's classification setting (paper Sec. 4, LLM settings: "dropout 0.1"; reference
``language_models.md``). This module adds exactly that to
:class:`~moram_avalanche.layers.moram.layer.MoRAMLinear`, whose six steps stay the only
implementation of the method:

    y = W x + b + sum_i w_i(d) (A_i . d) B_i,   d = dropout(x)  (d = x in eval mode or p = 0)

computed as ``base(x) + MoRAMLinear.mixture(d)`` with the base left out of the mixture (the
atoms' term alone, steps 1-6 of the same code on the dropped input): one base product, as
without dropout (an earlier version computed ``MoRAMLinear(d) + base(x) - base(d)``, three;
``scripts/bench_text.py`` measured that at 1.37x-1.42x LoRA's training step on T5-base).
The backward keeps ``x`` and draws the dropout again rather than keeping ``d`` and the mask
(:meth:`~moram_avalanche.layers.moram.layer.MoRAMRouting.read_dropped`,
:mod:`~moram_avalanche.layers.moram.dropped`: the same numbers, about 100 MiB less per decoder
layer at LLaMA-1B's TRACE setting). In eval mode (or ``p = 0``) the forward is exactly
``MoRAMLinear``'s.

One scaling for every atom by default: frozen atoms contribute exactly as they did while they
trained. The release scales the trainable values by ``alpha / r = 2`` during training but uses
the frozen bank unscaled after the task ends, so every atom's contribution halves once it is
frozen (``language_models.md``, "read from the code"); that is an option here
(``new_value_scale``, :func:`~moram_avalanche.text.inject.inject_moram`; ``--preset
trace-release``), applied by the layer's own forward (``MoRAMBank.new_value_scale``).
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from ..layers.moram.config import PAPER_LLM
from ..layers.moram.layer import MoRAMLinear
from ..layers.moram.variants import BALANCE_FORMS, MoRAMAblationLinear
from ..utils.checks import check_number

#: dropout on the atoms' input in the paper's classification setting (paper Sec. 4)
PAPER_DROPOUT = 0.1


def check_dropout(dropout: float) -> float:
    """``dropout`` if it is a probability in ``[0, 1)``; else a ValueError naming the paper's value."""
    return float(check_number("dropout", dropout, low=0, high=1, high_open=True,
                              hint=f"probability of zeroing an input of the atoms; paper: {PAPER_DROPOUT}"))


class DropoutMoRAMLinear(MoRAMLinear):
    """:class:`~moram_avalanche.layers.moram.layer.MoRAMLinear` with dropout on the atoms' input.

    Args:
        base, atoms_per_task, topk, temperature, threshold: as for ``MoRAMLinear``.
        dropout: probability of zeroing an input coordinate on the atoms' path while training
            (paper: 0.1); the frozen base always sees the clean input.

    State-dict keys are ``MoRAMLinear``'s (the dropout holds no state).
    """

    def __init__(self, base: nn.Linear, atoms_per_task: int = PAPER_LLM.atoms_per_task,
                 topk: Optional[int] = PAPER_LLM.topk, temperature: Optional[float] = PAPER_LLM.temperature,
                 threshold: float = PAPER_LLM.threshold, dropout: float = PAPER_DROPOUT) -> None:
        super().__init__(base, atoms_per_task=atoms_per_task, topk=topk, temperature=temperature,
                         threshold=threshold)
        self.atom_dropout = nn.Dropout(check_dropout(dropout))

    @property
    def dropout(self) -> float:
        return self.atom_dropout.p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.atom_dropout.p == 0 or self.num_atoms == 0:
            return super().forward(x)
        self.check_input(x)
        atoms = self.read_dropped(x, self.atom_dropout)  # steps 1-6 on d; no gate in training. Read before
        base_out = self.base(x)  # the base is called, so autograd adds the base's dL/dx first, as 0.7.3 did
        return base_out + atoms.to(base_out.dtype)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, dropout={self.dropout}"


class DropoutBalancedMoRAMLinear(DropoutMoRAMLinear, MoRAMAblationLinear):
    """:class:`DropoutMoRAMLinear` that records a load-balancing term on every training forward
    (the paper's load-balancing ablation, ``tab:load_balance``, on a language model).

    The dropout and forward are :class:`DropoutMoRAMLinear`'s; the routing of a training forward
    with grad is :class:`~moram_avalanche.layers.moram.variants.MoRAMAblationLinear`'s plain-autograd
    path, which appends the term to ``balance_terms`` for a
    :class:`~moram_avalanche.strategies.plugins.load_balance.LoadBalancePlugin` to add to the loss.
    Evaluation runs the method's path (no term). No external router; the release's atom scaling
    (``new_value_scale`` != 1) is refused: the plain path reads every atom at scale 1.

    Args: as :class:`DropoutMoRAMLinear`, and ``load_balance``: the term's form, one of
    :data:`~moram_avalanche.layers.moram.variants.BALANCE_FORMS` (default ``"release"``:
    ``R * sum_i Pbar_i^2``, Artificer-AI-Lab/MoRAM ``XTAIL/loralib/moram.py`` ``forward_backup``).
    """

    def __init__(self, base: nn.Linear, atoms_per_task: int = PAPER_LLM.atoms_per_task,
                 topk: Optional[int] = PAPER_LLM.topk, temperature: Optional[float] = PAPER_LLM.temperature,
                 threshold: float = PAPER_LLM.threshold, dropout: float = PAPER_DROPOUT,
                 load_balance: str = BALANCE_FORMS[0]) -> None:
        super().__init__(base, atoms_per_task=atoms_per_task, topk=topk, temperature=temperature,
                         threshold=threshold, dropout=dropout)
        if not load_balance:
            raise ValueError(f"{type(self).__name__} records a load-balancing term: load_balance must be one of "
                             f"{BALANCE_FORMS}, got {load_balance!r} (DropoutMoRAMLinear is the layer without)")
        self.load_balance = load_balance

    def mixture(self, tokens, weight, bias, k, threshold):
        if self.new_value_scale != 1:
            raise ValueError(f"{type(self).__name__} reads every atom at scale 1 while it balances the load: "
                             f"new_value_scale must be 1, got {self.new_value_scale:g} (the release's atom scaling "
                             "and load balancing are not combined)")
        return super().mixture(tokens, weight, bias, k, threshold)


__all__ = ["DropoutBalancedMoRAMLinear", "DropoutMoRAMLinear", "PAPER_DROPOUT", "check_dropout"]
