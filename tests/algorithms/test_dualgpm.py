"""DualGPM and InfLoRA's design step against hand-built covariances with known spectra."""

import math

import numpy as np
import pytest
import torch

from moram_avalanche.algorithms.covariance import InputCovariance
from moram_avalanche.algorithms.dualgpm import DualGPM, design_down_projection, threshold

# energies (squared singular values over their sum) placed on chosen coordinates of R^8
FIRST = {2: 0.50, 5: 0.25, 0: 0.12, 7: 0.08, 1: 0.03, 3: 0.01, 4: 0.01, 6: 0.0}
# cumulative energies in that order: .50 .75 .87 .95 .98 .99 1.0 1.0


def diagonal(energies, dim=8):
    """A diagonal covariance whose singular values are sqrt(energy) on the given coordinates."""
    c = torch.zeros(dim, dim, dtype=torch.float64)
    for index, energy in energies.items():
        c[index, index] = math.sqrt(energy)
    return c


def span(basis):
    return basis @ basis.t()


def coordinates(*indices, dim=8):
    """The projector onto the given coordinate axes."""
    p = torch.zeros(dim, dim, dtype=torch.float64)
    for i in indices:
        p[i, i] = 1.0
    return p


def first(eps, energies=FIRST):
    memory = DualGPM(8)
    memory.update(diagonal(energies), eps)
    return memory


def random_rotation(dim, seed):
    q, _ = torch.linalg.qr(torch.randn(dim, dim, dtype=torch.float64, generator=torch.Generator().manual_seed(seed)))
    return q


def test_threshold_schedule():
    assert threshold(0, 10) == pytest.approx(0.95)
    assert threshold(5, 10) == pytest.approx(0.975)
    assert threshold(9, 10) == pytest.approx(0.995)
    assert threshold(2, 4, lambda_b=0.98) == pytest.approx(0.99)
    with pytest.raises(ValueError, match="more experiences than num_tasks=10"):
        threshold(10, 10)
    with pytest.raises(ValueError, match="lambda_b <= lambda_e"):
        threshold(0, 3, lambda_b=0.99, lambda_e=0.9)


@pytest.mark.parametrize("eps,axes", [(0.9, (2, 5, 0)), (0.96, (2, 5, 0, 7)), (0.6, (2,)), (0.3, (2,))])
def test_first_task_keeps_the_leading_directions_below_the_threshold(eps, axes):
    memory = first(eps)
    # k = #{cumulative energy < eps}, at least 1, in order of energy
    assert torch.allclose(memory.basis.abs(), torch.eye(8, dtype=torch.float64)[:, list(axes)])
    assert memory.kind == "remove" and memory.old_space_dim == len(axes) and memory.updates == 1


def test_first_task_beyond_half_the_dimension_becomes_the_retain_complement():
    memory = first(0.985)  # k = 5 > 8 / 2: the top 5 axes are 2, 5, 0, 7, 1
    assert memory.kind == "retain" and memory.basis.shape == (8, 3)
    assert torch.allclose(span(memory.basis), coordinates(3, 4, 6), atol=1e-12)
    assert memory.old_space_dim == 5


def test_remove_update_appends_the_residual_directions_until_the_threshold():
    memory = first(0.9)  # old space: axes 2, 5, 0
    # 0.30 of the new energy is inside the old space; the residual's directions: 7 (.40), 1 (.15), 3, 4
    second = {0: 0.10, 2: 0.10, 5: 0.10, 7: 0.40, 1: 0.15, 3: 0.10, 4: 0.05, 6: 0.0}
    assert memory.update(diagonal(second), 0.65) == 1  # .30 + .40 >= .65
    assert torch.allclose(memory.basis.abs(), torch.eye(8, dtype=torch.float64)[:, [2, 5, 0, 7]])
    assert memory.kind == "remove"  # 4 = d / 2 columns: no switch
    assert memory.update(diagonal(second), 0.25) == 0  # nothing needed: the layer is skipped
    assert memory.basis.shape == (8, 4) and memory.updates == 3


def test_remove_update_past_half_the_dimension_switches_to_the_orthonormal_complement():
    memory = first(0.9)
    old = memory.basis.clone()
    second = {0: 0.10, 2: 0.10, 5: 0.10, 7: 0.40, 1: 0.15, 3: 0.10, 4: 0.05, 6: 0.0}
    assert memory.update(diagonal(second), 0.8) == 2  # .30 + .40 + .15: axes 7 and 1 join -> 5 > 4
    assert memory.kind == "retain" and memory.basis.shape == (8, 3)
    assert torch.allclose(memory.basis.t() @ memory.basis, torch.eye(3, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(old.t() @ memory.basis, torch.zeros(3, 3, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(span(memory.basis), coordinates(3, 4, 6), atol=1e-12)


def test_the_switch_in_a_rotated_basis():
    q = random_rotation(6, seed=1)
    energies = torch.tensor([0.4, 0.3, 0.15, 0.1, 0.05, 0.0], dtype=torch.float64)
    memory = DualGPM(6)
    memory.update(q @ torch.diag(energies.sqrt()) @ q.t(), 0.97)  # cumsum .4 .7 .85 .95 < .97: k = 4 > 3
    assert memory.kind == "retain" and memory.basis.shape == (6, 2)
    assert torch.allclose(memory.basis.t() @ memory.basis, torch.eye(2, dtype=torch.float64), atol=1e-10)
    assert torch.allclose(q[:, :4].t() @ memory.basis, torch.zeros(4, 2, dtype=torch.float64), atol=1e-10)


@pytest.mark.parametrize("eps,free_after", [(0.9, (4, 6)), (0.97, (6,)), (0.7, (3, 4, 6))])
def test_retain_update_removes_the_leading_free_directions_while_their_energy_is_high(eps, free_after):
    memory = first(0.985)  # free space: axes 3, 4, 6
    # free-space energy .25: axis 3 (.20), axis 4 (.05), axis 6 (0)
    second = {3: 0.20, 4: 0.05, 6: 0.0, 0: 0.30, 1: 0.20, 2: 0.15, 5: 0.10, 7: 0.0}
    removed = memory.update(diagonal(second), eps)
    # eps .9: .25 >= .1 -> drop 3 (.05 left < .1); .97: drop 3, then .05 >= .03 -> drop 4; .7: .25 < .3
    assert removed == 3 - len(free_after)
    assert memory.kind == "retain" and memory.basis.shape == (8, len(free_after))
    assert torch.allclose(span(memory.basis), coordinates(*free_after), atol=1e-12)


def test_project_away_and_the_designed_factor_avoid_the_old_space():
    q = random_rotation(8, seed=2)
    energies = torch.tensor([.4, .3, .15, .1, .04, .01, 0, 0], dtype=torch.float64)
    first_cov = q @ torch.diag(energies.sqrt()) @ q.t()  # cumulative .4 .7 .85 .95 .99 1
    x = torch.randn(200, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    later = x.t() @ x / 200
    remove = DualGPM(8)
    assert torch.equal(remove.project_away(later), later)  # empty memory: nothing to project away
    remove.update(first_cov, 0.9)
    assert remove.kind == "remove" and remove.basis.shape == (8, 3)
    m = remove.basis
    assert torch.allclose(remove.project_away(later), (torch.eye(8, dtype=torch.float64) - m @ m.t()) @ later)
    down = design_down_projection(remove.project_away(later), 3)
    assert down.shape == (3, 8)
    assert torch.allclose(down @ m, torch.zeros(3, m.shape[1], dtype=torch.float64), atol=1e-10)
    assert torch.allclose(down.norm(dim=1), torch.full((3,), 1 / math.sqrt(3), dtype=torch.float64))
    assert torch.allclose(down @ down.t(), torch.eye(3, dtype=torch.float64) / 3, atol=1e-12)

    retain = DualGPM(8)
    retain.update(first_cov, 0.995)  # k = 5 > 4: retain, the free space has 3 dimensions
    p = retain.basis
    assert retain.kind == "retain" and p.shape == (8, 3)
    assert torch.allclose(retain.project_away(later), p @ p.t() @ later)
    down = design_down_projection(retain.project_away(later), 2)
    assert torch.allclose(down @ (torch.eye(8, dtype=torch.float64) - p @ p.t()),
                          torch.zeros(2, 8, dtype=torch.float64), atol=1e-10)  # rows inside the free space


def test_the_designed_factor_at_the_first_task_is_the_top_singular_vectors_over_sqrt3():
    down = design_down_projection(diagonal(FIRST).float(), 2)
    assert down.dtype == torch.float32
    expected = torch.zeros(2, 8)
    expected[0, 2] = expected[1, 5] = 1 / math.sqrt(3)
    assert torch.allclose(down.abs(), expected)


def test_state_dict_round_trip_holds_tensors_only_and_continues_identically():
    memory = first(0.9)
    state = memory.state_dict()
    assert all(isinstance(v, torch.Tensor) for v in state.values())
    restored = DualGPM(8)
    restored.load_state_dict(state)
    assert (restored.kind, restored.updates, torch.equal(restored.basis, memory.basis)) == ("remove", 1, True)
    second = diagonal({0: 0.1, 2: 0.1, 5: 0.1, 7: 0.4, 1: 0.15, 3: 0.1, 4: 0.05})
    memory.update(second, 0.8)
    restored.update(second, 0.8)
    assert torch.equal(restored.basis, memory.basis) and restored.kind == memory.kind == "retain"
    with pytest.raises(ValueError, match="dimension 6"):
        DualGPM(6).load_state_dict(state)


def test_bad_input_is_refused_clearly():
    with pytest.raises(ValueError, match="covariance is zero"):
        DualGPM(4).update(torch.zeros(4, 4), 0.9)
    with pytest.raises(ValueError, match=r"\[4, 4\] covariance"):
        DualGPM(4).update(torch.zeros(3, 3), 0.9)
    with pytest.raises(ValueError, match="eps must be in"):
        DualGPM(4).update(torch.eye(4), 1.5)
    with pytest.raises(ValueError, match="rank must be in 1..4"):
        design_down_projection(torch.eye(4), 5)


# ---------------------------------------------------------------- a naive DualGPM / GPM, from the description
def naive_update(state, c, eps, dual):
    """One memory update written from the algorithm's description (baselines reference, 3.3), numpy.

    ``state``: None (empty) or {"basis": [d, k], "kind": "remove"|"retain"}. Projectors are
    built explicitly, complements come from an eigendecomposition of ``I - M M^T``.
    """
    d = c.shape[0]
    energy = np.sum(np.linalg.svd(c, compute_uv=False) ** 2)
    if state is None:
        u, s, _ = np.linalg.svd(c)
        k = max(1, sum(1 for value in np.cumsum(s ** 2) / energy if value < eps))
        basis, kind = u[:, :k], "remove"
    elif state["kind"] == "remove":
        m = state["basis"]
        u, s, _ = np.linalg.svd((np.eye(d) - m @ m.T) @ c)
        acc, new = (energy - np.sum(s ** 2)) / energy, []
        for i in range(d):
            if acc >= eps:
                break
            acc += s[i] ** 2 / energy
            new.append(u[:, i:i + 1])
        basis, kind = np.hstack([m, *new])[:, :d], "remove"
    else:
        p = state["basis"]
        u, s, _ = np.linalg.svd(p @ p.T @ c)
        acc, r = np.sum(s ** 2) / energy, 0
        while r < p.shape[1] and acc >= 1 - eps:
            acc -= s[r] ** 2 / energy
            r += 1
        rest = p - u[:, :r] @ u[:, :r].T @ p
        values, vectors = np.linalg.eigh(rest @ rest.T)
        basis, kind = vectors[:, values > 0.5], "retain"
    if dual and kind == "remove" and basis.shape[1] > d / 2:
        values, vectors = np.linalg.eigh(np.eye(d) - basis @ basis.T)
        basis, kind = vectors[:, values > 0.5], "retain"
    return {"basis": basis, "kind": kind}


def naive_boundaries(state, c):
    """The thresholds at which the naive update's decision changes (its accumulated energies)."""
    d = c.shape[0]
    s_c = np.linalg.svd(c, compute_uv=False)
    energy = np.sum(s_c ** 2)
    if state is None:
        return list(np.cumsum(s_c ** 2) / energy)
    b = state["basis"]
    if state["kind"] == "remove":
        s = np.linalg.svd((np.eye(d) - b @ b.T) @ c, compute_uv=False)
        return list((energy - np.sum(s ** 2)) / energy + np.concatenate([[0], np.cumsum(s ** 2)]) / energy)
    s = np.linalg.svd(b @ b.T @ c, compute_uv=False)
    return list(1 - (np.sum(s ** 2) - np.concatenate([[0], np.cumsum(s ** 2)])) / energy)


def old_space_projector(basis, kind):
    p = basis @ basis.T
    return np.eye(basis.shape[0]) - p if kind == "retain" else p


@pytest.mark.parametrize("dual", [True, False])
def test_update_matches_a_naive_implementation_on_random_streams_at_threshold_boundaries(dual):
    rng = np.random.default_rng(7 if dual else 8)
    d, steps, kinds, near = 16, 8, {"remove": 0, "retain": 0}, 0
    for stream in range(40):
        memory, state = DualGPM(d, dual=dual), None
        for _ in range(steps):
            rank = rng.integers(1, 7)
            x = rng.normal(size=(200, rank)) @ rng.normal(size=(rank, d)) * rng.uniform(0.5, 3)
            x = x + 0.05 * rng.normal(size=(200, d))
            c = x.T @ x / 200
            candidates = [b for b in naive_boundaries(state, c) if 0.3 < b < 0.999]
            if candidates and rng.random() < 0.8:  # just above or below a decision boundary
                eps, near = float(rng.choice(candidates) + rng.choice([-1e-7, 1e-7])), near + 1
            else:
                eps = float(rng.uniform(0.5, 0.999))
            before = 0 if state is None else (
                d - state["basis"].shape[1] if state["kind"] == "retain" else state["basis"].shape[1])
            state = naive_update(state, c, eps, dual)
            after = d - state["basis"].shape[1] if state["kind"] == "retain" else state["basis"].shape[1]
            added = memory.update(torch.from_numpy(c), eps)
            assert memory.kind == state["kind"], (stream, eps)
            assert added == after - before
            np.testing.assert_allclose(old_space_projector(memory.basis.numpy(), memory.kind),
                                       old_space_projector(state["basis"], state["kind"]), atol=1e-8)
            kinds[memory.kind] += 1
    assert near > 150
    if dual:
        assert kinds["remove"] > 50 and kinds["retain"] > 50  # both update kinds were exercised
    else:
        assert kinds["retain"] == 0 and kinds["remove"] == 40 * steps


def test_plain_gpm_never_switches_and_protects_what_dualgpm_protects():
    dual, plain = DualGPM(8), DualGPM(8, dual=False)
    for memory in (dual, plain):
        memory.update(diagonal(FIRST), 0.96)  # 4 directions: remove-type for both
        memory.update(diagonal({1: 0.6, 3: 0.3, 4: 0.1}), 0.9)  # adds 1 and 3 -> 6 > d / 2
    assert (dual.kind, plain.kind) == ("retain", "remove")
    assert plain.basis.shape == (8, 6) and dual.basis.shape == (8, 2)
    assert torch.allclose(span(plain.basis), coordinates(2, 5, 0, 7, 1, 3))
    assert torch.allclose(span(dual.free_basis()), coordinates(4, 6))
    assert torch.allclose(span(plain.free_basis()), coordinates(4, 6))
    assert dual.free_dim == plain.free_dim == 2 and DualGPM(8).free_basis() is None
    with pytest.raises(ValueError, match="plain-GPM memory"):
        DualGPM(8, dual=False).load_state_dict(dual.state_dict())


def test_design_rows_beyond_the_projected_rank_come_from_the_free_space():
    # remove memory = axes 0, 1; the new covariance lives on axes 0..3, so its projection has
    # rank 2 (axes 2, 3); rank 4 needs 2 more rows: they must come from the free axes 4..7
    memory = DualGPM(8)
    memory.update(diagonal({0: 0.6, 1: 0.3, 2: 0.1}), 0.95)
    assert torch.allclose(span(memory.basis), coordinates(0, 1))
    rotation = torch.block_diag(random_rotation(4, 3), torch.eye(4, dtype=torch.float64))
    later = rotation @ diagonal({0: 0.4, 1: 0.3, 2: 0.2, 3: 0.1}) @ rotation.t()
    down = design_down_projection(memory.project_away(later), 4, free=memory.free_basis())
    rows = math.sqrt(3) * down.t()  # [8, 4], orthonormal columns
    assert torch.allclose(rows.t() @ rows, torch.eye(4, dtype=torch.float64), atol=1e-10)
    assert torch.allclose(coordinates(0, 1) @ rows, torch.zeros(8, 4, dtype=torch.float64), atol=1e-10)
    # the first two rows are the projected covariance's own directions (in axes 0..3 minus 0, 1)
    assert torch.allclose(span(rows[:, :2]), coordinates(2, 3), atol=1e-10)
    # a retain memory of 3 free axes and rank 3: the rows span exactly the free space
    retain = DualGPM(8)
    retain.update(diagonal({0: 0.19, 1: 0.19, 2: 0.19, 3: 0.19, 4: 0.19, 5: 0.05}), 0.99)
    assert retain.kind == "retain" and torch.allclose(span(retain.basis), coordinates(5, 6, 7))
    down = design_down_projection(retain.project_away(diagonal({5: 1.0})), 3, free=retain.free_basis())
    assert torch.allclose(3 * down.t() @ down, coordinates(5, 6, 7), atol=1e-10)
    # free space smaller than rank: the free axes first, then orthonormal rows from elsewhere
    down = design_down_projection(retain.project_away(diagonal({5: 1.0})), 5, free=retain.free_basis())
    rows = math.sqrt(3) * down.t()
    assert torch.allclose(rows.t() @ rows, torch.eye(5, dtype=torch.float64), atol=1e-10)
    assert torch.allclose(span(rows[:, :3]), coordinates(5, 6, 7), atol=1e-10)
    # no memory and a full-rank covariance: plain top singular vectors, nothing filled
    down = design_down_projection(diagonal(FIRST), 3)
    assert torch.allclose(3 * down.t() @ down, coordinates(2, 5, 0), atol=1e-10)


def test_the_covariance_moment_is_computed_outside_autocast():
    # 12k tokens of value 300: each entry of x^T x is 1.08e9, far beyond fp16's 65504
    layer = torch.nn.Linear(4, 2)
    x = torch.full((3, 4000, 4), 300.0)
    x[..., 1] = -2.0
    with torch.autocast("cpu", dtype=torch.float16), InputCovariance({"layer": layer}) as recorder:
        layer(x)
    v = torch.tensor([300.0, -2.0, 300.0, 300.0], dtype=torch.float64)
    expected = torch.outer(v, v)  # every token is v
    cov = recorder.covariances()["layer"]
    assert cov.dtype == torch.float64 and torch.allclose(cov, expected, rtol=1e-3)  # a float32 GEMM
