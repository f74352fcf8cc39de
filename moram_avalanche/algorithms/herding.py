"""Herding: pick, one at a time, the sample that keeps the running mean of the picks closest to the mean.

iCaRL's exemplar selection (Rebuffi et al., CVPR 2017, Algorithm 4), in the form of the CLIP
MTIL code that ran iCaRL beside ZSCL [Thunderbeee/ZSCL ``mtil/src/dynamic_dataset.py``
``constructExampleSet``]: the target is the mean ``mu`` of the given features (L2-normalised
CLIP image features there; ``mu`` itself is not re-normalised), and step ``k`` (0-based)
picks, among the samples not yet picked, ``argmin_i || mu - (f_i + S_k) / (k + 1) ||^2`` with
``S_k`` the sum of the features picked so far; ties go to the earliest sample. The ZSCL code
herds over a whole domain at once (class-agnostic); classic iCaRL herds per class -- call
:func:`herding_order` on each class's features for that.

Framework-free: torch only.
"""

from __future__ import annotations

import torch


@torch.no_grad()
def herding_order(features: torch.Tensor, count: int) -> torch.Tensor:
    """The indices of the first ``min(count, N)`` herding picks among ``features`` ``[N, D]``, in order."""
    if features.dim() != 2:
        raise ValueError(f"features must be [N, D], got {tuple(features.shape)}")
    if not isinstance(count, int) or count < 0:
        raise ValueError(f"count must be a non-negative int, got {count!r}")
    count = min(count, features.shape[0])
    target = features.mean(dim=0)
    total = torch.zeros_like(target)
    taken = torch.zeros(features.shape[0], dtype=torch.bool, device=features.device)
    order = []
    for k in range(count):
        distance = (target - (features + total) / (k + 1)).square().sum(dim=1)
        distance[taken] = float("inf")
        index = int(torch.argmin(distance))
        order.append(index)
        taken[index] = True
        total += features[index]
    return torch.tensor(order, dtype=torch.long)


__all__ = ["herding_order"]
