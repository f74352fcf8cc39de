"""Herding against a direct implementation of the ZSCL code's loop (numpy, deleting picked rows)."""

import numpy as np
import pytest
import torch

from moram_avalanche.algorithms.herding import herding_order


def direct_herding(features: np.ndarray, count: int) -> list:
    """The loop of ZSCL's constructExampleSet: argmin over the remaining rows, picked rows deleted."""
    mean = features.mean(axis=0)
    remaining = list(range(len(features)))
    rows = features.copy()
    picked, running = [], None
    for k in range(min(count, len(features))):
        if k == 0:
            index = int(np.argmin(np.sum((mean - rows) ** 2, axis=1)))
            running = rows[index].copy()
        else:
            index = int(np.argmin(np.sum((mean - (1 / (k + 1)) * (rows + running)) ** 2, axis=1)))
            running += rows[index]
        picked.append(remaining.pop(index))
        rows = np.delete(rows, index, axis=0)
    return picked


@pytest.mark.parametrize("n,d,count,seed", [(40, 8, 10, 0), (25, 3, 25, 1), (7, 5, 12, 2), (60, 16, 30, 3)])
def test_herding_picks_what_the_direct_loop_picks(n, d, count, seed):
    features = torch.nn.functional.normalize(torch.randn(n, d, generator=torch.Generator().manual_seed(seed),
                                                         dtype=torch.float64), dim=-1)
    assert herding_order(features, count).tolist() == direct_herding(features.numpy(), count)


def test_herding_on_a_hand_built_case():
    # points on a line: 3, 0, 1.2, 1 -> mean 1.3
    features = torch.tensor([[3.0, 0.0], [0.0, 0.0], [1.2, 0.0], [1.0, 0.0]], dtype=torch.float64)
    # pick 1: nearest to 1.3 is 1.2; pick 2: (x + 1.2) / 2 nearest 1.3 -> x = 1 (mean 1.1; 3 gives 2.1,
    # 0 gives 0.6); pick 3: (x + 2.2) / 3 nearest 1.3 -> x = 3 (mean 1.733; 0 gives 0.733)
    assert herding_order(features, 3).tolist() == [2, 3, 0]
    # the plain nearest-to-the-mean order differs at the third pick (0 is nearer to 1.3 than 3)
    nearest = torch.argsort(((features - features.mean(0)) ** 2).sum(1)).tolist()
    assert nearest[:3] == [2, 3, 1]
    assert herding_order(features, 10).tolist() == [2, 3, 0, 1]


def test_bad_inputs():
    with pytest.raises(ValueError, match=r"\[N, D\]"):
        herding_order(torch.randn(3), 2)
    with pytest.raises(ValueError, match="non-negative"):
        herding_order(torch.randn(3, 2), -1)
    assert herding_order(torch.randn(3, 2), 0).tolist() == []
