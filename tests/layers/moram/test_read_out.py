"""The atom read-out of the reference path (step 6's ``sum_j c_j B_j``), gated and ungated."""

import torch

from moram_avalanche.layers.moram.paths.reference import read_out


def loop_read_out(idx, coef, values):
    """One token and one kept atom at a time."""
    out = torch.zeros(idx.shape[0], values.shape[1], dtype=values.dtype)
    for n in range(idx.shape[0]):
        for j in range(idx.shape[1]):
            out[n] += coef[n, j] * values[idx[n, j]]
    return out


def gated_case():
    torch.manual_seed(0)
    values = torch.randn(9, 5, dtype=torch.float64)
    idx = torch.stack([torch.randperm(9)[:4] for _ in range(6)])
    coef = torch.randn(6, 4, dtype=torch.float64)
    coef[coef < 0.3] = 0.0  # the eval gate zeroes some coefficients...
    coef[2] = 0.0  # ...or all of a token's (its row must stay zero)
    coef[5] = torch.tensor([0.5, 0.0, 0.0, 0.0], dtype=torch.float64)  # ...or all but one
    return idx, coef, values


def test_gated_read_out_skips_zero_terms_and_matches_the_loop():
    idx, coef, values = gated_case()
    expected = loop_read_out(idx, coef, values)
    gated = read_out(idx, coef, values, gated=True)
    torch.testing.assert_close(gated, expected, rtol=0, atol=1e-12)
    assert torch.equal(gated[2], torch.zeros(5, dtype=torch.float64))
    torch.testing.assert_close(gated[5], 0.5 * values[idx[5, 0]], rtol=0, atol=0)
    # dropping zero terms changes no sum: the same numbers as the dense read-out
    assert torch.equal(gated, read_out(idx, coef, values, gated=False))


def test_read_out_without_a_gate_matches_the_loop():
    idx, coef, values = gated_case()
    coef = coef + 0.1  # no zero left
    torch.testing.assert_close(read_out(idx, coef, values), loop_read_out(idx, coef, values),
                               rtol=0, atol=1e-12)
