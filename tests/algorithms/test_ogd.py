"""OGD's math (``algorithms/ogd.py``): TRACE's per-parameter projection against a naive loop over
its own formula, and what sets it apart from the paper's projection."""

import pytest
import torch


def naive_project_vec(g, basis, sizes):
    """BeyonderXX/TRACE model/Regular/OGD.py project_vec, one parameter at a time, float64: the
    parameter's rows of the (n x k) basis, g_p - P (P^T g_p), written out entry by entry."""
    out, begin = [], 0
    for size in sizes:
        rows = [[float(basis[j, begin + i]) for j in range(basis.shape[0])] for i in range(size)]  # P: size x k
        part = [float(g[begin + i]) for i in range(size)]
        inner = [sum(rows[i][j] * part[i] for i in range(size)) for j in range(basis.shape[0])]  # P^T g_p
        out += [part[i] - sum(rows[i][j] * inner[j] for j in range(basis.shape[0])) for i in range(size)]
        begin += size
    return torch.tensor(out, dtype=torch.float64)


def random_basis(rows, width, seed):
    generator = torch.Generator().manual_seed(seed)
    q, _ = torch.linalg.qr(torch.randn(width, rows, generator=generator, dtype=torch.float64))
    return q.t().contiguous()  # orthonormal rows


def test_project_each_is_traces_formula_per_parameter():
    from moram_avalanche.algorithms.ogd import project_each

    basis, sizes = random_basis(3, 9, 0), [4, 2, 3]
    g = torch.randn(9, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    torch.testing.assert_close(project_each(g, basis, sizes), naive_project_vec(g, basis, sizes))


def test_per_parameter_and_whole_projections_differ_and_only_the_whole_one_is_a_projection():
    from moram_avalanche.algorithms.ogd import project_each, project_out

    basis, sizes = random_basis(3, 9, 2), [4, 2, 3]
    g = torch.randn(9, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    whole, each = project_out(g, basis), project_each(g, basis, sizes)
    torch.testing.assert_close(basis.mv(whole), torch.zeros(3, dtype=torch.float64))  # orthogonal to the basis
    torch.testing.assert_close(project_out(whole, basis), whole)  # idempotent
    assert (each - whole).norm() > 1e-3 * g.norm()
    assert basis.mv(each).abs().max() > 1e-3  # TRACE's keeps components along the basis
    assert (project_each(each, basis, sizes) - each).norm() > 1e-6  # and a second pass moves it again
    # one parameter holding every number: TRACE's is the whole projection
    torch.testing.assert_close(project_each(g, basis, [9]), whole)


def test_project_each_refuses_sizes_that_do_not_cover_the_gradient():
    from moram_avalanche.algorithms.ogd import project_each

    with pytest.raises(ValueError, match="add up to 8, the gradient has 9"):
        project_each(torch.zeros(9), torch.zeros(1, 9), [4, 4])
