"""RAIL's analytic heads against direct solutions: recursive == batch ridge, dual == primal, fusion."""

import math

import pytest
import torch

from moram_avalanche.algorithms.analytic import (
    KernelRidge,
    RandomFeatures,
    RecursiveRidge,
    fuse_with_zero_shot,
    kernel_matrix,
)


def data(n, d, c, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    y = torch.nn.functional.one_hot(torch.randint(0, c, (n,), generator=g), c).double()
    return x, y


def batch_ridge(x, y, lam):
    """The ridge solution written directly: (X^T X + lambda I)^-1 X^T Y."""
    return torch.linalg.solve(x.t() @ x + lam * torch.eye(x.shape[1], dtype=x.dtype), x.t() @ y)


def test_recursive_update_equals_the_batch_ridge_solution_across_tasks_and_batchings():
    x1, y1 = data(23, 7, 3, seed=0)
    x2, y2 = data(17, 7, 2, seed=1)
    ridge = RecursiveRidge(7, regularization=0.1, dtype=torch.float64)
    ridge.add_classes(3)
    for chunk in (slice(0, 5), slice(5, 6), slice(6, 23)):  # uneven batches, one of size 1
        ridge.update(x1[chunk], y1[chunk])
    assert torch.allclose(ridge.weight, batch_ridge(x1, y1, 0.1), atol=1e-10)
    ridge.add_classes(2)
    for chunk in (slice(0, 9), slice(9, 17)):
        ridge.update(x2[chunk], torch.cat([torch.zeros(len(x2[chunk]), 3, dtype=torch.float64), y2[chunk]], 1))
    x = torch.cat([x1, x2])
    y = torch.zeros(40, 5, dtype=torch.float64)
    y[:23, :3], y[23:, 3:] = y1, y2
    assert torch.allclose(ridge.weight, batch_ridge(x, y, 0.1), atol=1e-10)
    assert torch.allclose(ridge.inverse, torch.linalg.inv(x.t() @ x + 0.1 * torch.eye(7, dtype=torch.float64)),
                          atol=1e-10)
    assert torch.allclose(ridge.predict(x), x @ batch_ridge(x, y, 0.1), atol=1e-10)


def test_the_recursion_is_not_a_plain_least_squares_fit():
    # the check above can fail: a different lambda (or none) gives another solution
    x, y = data(12, 5, 2, seed=2)
    ridge = RecursiveRidge(5, regularization=0.1, dtype=torch.float64)
    ridge.add_classes(2)
    ridge.update(x, y)
    assert not torch.allclose(ridge.weight, batch_ridge(x, y, 1.0), atol=1e-6)


def test_dual_on_a_linear_kernel_equals_the_primal_without_expansion():
    x1, y1 = data(30, 6, 3, seed=3)
    x2, y2 = data(10, 6, 2, seed=4)
    probe = data(9, 6, 1, seed=5)[0]
    primal = RecursiveRidge(6, regularization=1e-3, dtype=torch.float64)
    primal.add_classes(3)
    primal.update(x1, y1)
    primal.add_classes(2)
    primal.update(x2, torch.cat([torch.zeros(10, 3, dtype=torch.float64), y2], 1))
    dual = KernelRidge("linear", regularization=1e-3)
    dual.add(x1, y1)
    dual.fit()
    dual.add(x2, torch.cat([torch.zeros(10, 3, dtype=torch.float64), y2], 1))
    dual.fit()
    assert dual.targets.shape == (40, 5) and torch.equal(dual.targets[:30, 3:], torch.zeros(30, 2, dtype=torch.float64))
    assert torch.allclose(dual.predict(probe), primal.predict(probe), atol=1e-8)
    # and the RBF kernel gives something else
    rbf = KernelRidge("rbf", gamma=0.1, regularization=1e-3)
    rbf.add(torch.cat([x1, x2]), dual.targets)
    rbf.fit()
    assert not torch.allclose(rbf.predict(probe), primal.predict(probe), atol=1e-3)


def test_rbf_kernel_matches_its_definition():
    x, m = data(4, 3, 1, seed=6)[0], data(5, 3, 1, seed=7)[0]
    expected = torch.tensor([[math.exp(-0.1 * float(((a - b) ** 2).sum())) for b in m] for a in x],
                            dtype=torch.float64)
    assert torch.allclose(kernel_matrix(x, m, "rbf", 0.1), expected, atol=1e-12)
    with pytest.raises(ValueError, match="kernel must be one of"):
        kernel_matrix(x, m, "poly")


def test_random_features_are_a_fixed_relu_projection_in_the_linear_init_range():
    g = torch.Generator().manual_seed(0)
    features = RandomFeatures(16, 100, generator=g)
    w = features.weight
    assert w.shape == (100, 16) and w.abs().max() <= 1 / 4 and not w.requires_grad
    x = torch.randn(3, 16)
    assert torch.equal(features(x), torch.relu(x @ w.t()))
    again = RandomFeatures(16, 100, generator=torch.Generator().manual_seed(0))
    assert torch.equal(again.weight, w)


def test_fusion_rule_on_a_hand_built_case():
    # label space of 4 classes; the head learned classes 0 and 1 (its columns 1 and 0)
    logits = torch.log(torch.tensor([[0.7, 0.1, 0.1, 0.1],    # argmax 0 learned -> fused
                                     [0.1, 0.1, 0.6, 0.2]]))  # argmax 2 unseen  -> zero-shot
    head = torch.tensor([[0.2, 0.9], [5.0, 5.0]])
    columns = torch.tensor([1, 0, -1, -1])
    out = fuse_with_zero_shot(logits, head, columns, weight=0.8)
    expected0 = 0.2 * torch.tensor([0.7, 0.1, 0.1, 0.1]) + 0.8 * torch.tensor([0.9, 0.2, 0.0, 0.0])
    assert torch.allclose(out[0], expected0, atol=1e-6)
    assert torch.allclose(out[1], torch.tensor([0.1, 0.1, 0.6, 0.2]), atol=1e-6)
    # nothing learned: plain zero-shot probabilities
    none = fuse_with_zero_shot(logits, head[:, :0], torch.full((4,), -1), 0.8)
    assert torch.allclose(none, torch.softmax(logits, -1))
    with pytest.raises(ValueError, match="fusion weight"):
        fuse_with_zero_shot(logits, head, columns, weight=1.5)


def test_bad_inputs_are_refused_with_the_fix():
    ridge = RecursiveRidge(4)
    with pytest.raises(ValueError, match="add_classes"):
        ridge.update(torch.randn(2, 4), torch.ones(2, 3))
    with pytest.raises(ValueError, match="regularization must be > 0"):
        RecursiveRidge(4, regularization=0.0)
    with pytest.raises(RuntimeError, match="add"):
        KernelRidge().fit()
