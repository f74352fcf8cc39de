"""CoDyRA's rank selection: the threshold schedule against the official loop, the gate shrinkage by hand."""

import numpy as np
import pytest
import torch

from moram_avalanche.algorithms.rank_selection import kappa_at, prunes_at, soft_threshold_gates_


def official_schedule(total, max_kappa, steps, dense_fraction):
    """The threshold of every iteration, with the counter the official train_model keeps."""
    lambdas = np.linspace(0, max_kappa, steps)
    index, threshold, out = 0, lambdas[0], []
    dense = dense_fraction * total
    step = int((total - dense) // steps)
    for iteration in range(total):
        if step > 0 and iteration >= dense and iteration % step == 0:
            index += 1
            threshold = lambdas[min(len(lambdas) - 1, index)]
        out.append(float(threshold))
    return out


@pytest.mark.parametrize("total,max_kappa,steps,dense", [
    (500, 0.005, 50, 0.5),   # the release
    (80, 0.005, 8, 0.5), (101, 0.01, 7, 0.3), (30, 0.005, 50, 0.5),  # the last: step 0, no shrinkage
    (40, 0.002, 3, 0.0),
])
def test_the_schedule_equals_the_official_counter(total, max_kappa, steps, dense):
    expected = official_schedule(total, max_kappa, steps, dense)
    assert [kappa_at(i, total, max_kappa, steps, dense) for i in range(total)] == pytest.approx(expected, abs=1e-15)


def test_release_schedule_landmarks():
    assert kappa_at(249, 500) == 0.0
    assert kappa_at(250, 500) == pytest.approx(0.005 / 49)   # the first step past the dense half
    assert kappa_at(489, 500) == pytest.approx(0.005 * 48 / 49)
    assert kappa_at(490, 500) == pytest.approx(0.005) and kappa_at(499, 500) == pytest.approx(0.005)
    assert not prunes_at(250, 500) and prunes_at(251, 500)


def test_soft_threshold_on_a_hand_built_gate():
    k = 0.01
    gate = torch.tensor([0.5 * k, 1.5 * k, 3 * k, -3 * k, -1.5 * k, -0.2 * k, 0.0, 2.5 * k], dtype=torch.float64)
    soft_threshold_gates_(gate, k)
    # |g| < 2k -> 0 (the official three-step order), larger gates shrink by k
    expected = torch.tensor([0, 0, 2 * k, -2 * k, 0, 0, 0, 1.5 * k], dtype=torch.float64)
    assert torch.allclose(gate, expected, atol=1e-15)
    # the textbook proximal step would have kept 1.5k -> 0.5k: the order matters
    assert (torch.sign(torch.tensor(1.5 * k)) * max(1.5 * k - k, 0)) != 0
    zero = torch.tensor([0.3, -0.2])
    assert torch.equal(soft_threshold_gates_(zero.clone(), 0.0), zero)


def test_bad_schedules_are_refused():
    with pytest.raises(ValueError, match="positive int"):
        kappa_at(0, 10, steps=0)
    with pytest.raises(ValueError, match="dense_fraction"):
        kappa_at(0, 10, dense_fraction=1.5)
