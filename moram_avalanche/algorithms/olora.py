"""O-LoRA's regularisers, framework-free (Wang et al., 2023, "Orthogonal Subspace Learning for
Language Model Continual Learning", Sec. 3.2).

Each task ``t`` learns a LoRA ``U_t D_t``; the rows of the down-projection ``D_t`` ``[r, d_in]``
span the subspace the update reads. O-LoRA keeps the new task's subspace orthogonal to every
earlier one with

    L_orth = sum_{i < t} sum_{j,k} |O_{i,t}[j, k]|^p,   O_{i,t} = D_i D_t^T   ([r_i, r_t])

summed over the adapted layers, and adds ``lambda_2 * sum ||theta||_2`` over the new LoRA's
factors. The paper writes the square (``p = 2``); its released code sums absolute values
(``p = 1``), and the released lambdas were tuned with that: ``p = 1`` is the default here.

Lambdas (O-LoRA ``scripts/order_1.sh``, the T5 runs of the standard CL benchmark): every task
``lamda_1 = 0.5`` (orthogonality), ``lamda_2 = 0`` (L2); the first task has nothing to be
orthogonal to. The long sequences set them per task (``scripts/long.sh``, order 6: ``lamda_1``
0 / 0.5 / 5 rising along the stream, ``lamda_2`` 0, 0.1 or 0.3) and train MNLI two epochs:
:data:`OLORA_LONG_LAMBDAS`, :data:`OLORA_LONG_EPOCHS`, keyed by task name. O-LoRA ships no
script for orders 4 and 5: a task keeps its order-6 values there (our choice).
"""

from __future__ import annotations

from typing import Iterable, Sequence

import torch

#: O-LoRA's lambdas for the tasks after the first (``scripts/order_1.sh``: lamda_1 0.5, lamda_2 0)
OLORA_LAMBDA_ORTH = 0.5
OLORA_LAMBDA_L2 = 0.0
#: the exponent of the orthogonality term in O-LoRA's released code (the paper writes 2)
OLORA_POWER = 1
#: task name -> (lamda_1, lamda_2) of O-LoRA's long sequence (``scripts/long.sh``, one run per task)
OLORA_LONG_LAMBDAS = {
    "yelp": (0.0, 0.0), "amazon": (0.5, 0.0), "mnli": (0.5, 0.0), "cb": (0.5, 0.0), "copa": (0.5, 0.1),
    "qqp": (0.5, 0.1), "rte": (0.5, 0.3), "imdb": (0.5, 0.0), "sst-2": (0.5, 0.1), "dbpedia": (5.0, 0.0),
    "ag": (5.0, 0.0), "yahoo": (5.0, 0.1), "multirc": (5.0, 0.0), "boolqa": (5.0, 0.1), "wic": (5.0, 0.3),
}
#: task name -> epochs of O-LoRA's long sequence (``scripts/long.sh``: ``--num_train_epochs 2`` for
#: MNLI, 1 for every other task)
OLORA_LONG_EPOCHS = {name: 2 if name == "mnli" else 1 for name in OLORA_LONG_LAMBDAS}


def orthogonality_loss(new_down: torch.Tensor, old_downs: Sequence[torch.Tensor],
                       power: int = OLORA_POWER) -> torch.Tensor:
    """``sum_i sum_{j,k} |(D_i D_new^T)[j, k]|^power`` for one layer (0 without old LoRAs)."""
    if power not in (1, 2):
        raise ValueError(f"power must be 1 (O-LoRA's code) or 2 (its paper), got {power!r}")
    total = new_down.new_zeros(())
    for old in old_downs:
        if old.shape[-1] != new_down.shape[-1]:
            raise ValueError(f"old and new down-projections read different widths: {tuple(old.shape)} "
                             f"vs {tuple(new_down.shape)}")
        overlap = old.to(new_down.dtype) @ new_down.t()
        total = total + (overlap.abs() if power == 1 else overlap.pow(2)).sum()
    return total


def l2_loss(parameters: Iterable[torch.Tensor]) -> torch.Tensor:
    """``sum ||theta||_2`` over the new LoRA's factors (the Frobenius norm of each)."""
    norms = [p.norm(p=2) for p in parameters]
    if not norms:
        return torch.zeros(())
    return torch.stack(norms).sum()


__all__ = ["OLORA_LAMBDA_L2", "OLORA_LAMBDA_ORTH", "OLORA_LONG_EPOCHS", "OLORA_LONG_LAMBDAS", "OLORA_POWER", "l2_loss", "orthogonality_loss"]
