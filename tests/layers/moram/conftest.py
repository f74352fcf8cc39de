"""Fixtures of the MoRAM layer's tests."""

import pytest

from moram_avalanche.layers.moram.paths import triton as moram_triton


@pytest.fixture(params=["slices", "rows"])
def block_order(request, monkeypatch):
    """A Triton kernel test in each order of the kernels' dense blocks (``paths.triton.rows_first``:
    slices first, what Triton 3.7 and later take; rows first, what Triton 3.6 takes where a row is
    several slices), whatever Triton is installed: the launch rule's answer forced for this test,
    and the launchers kept so far set aside (they hold the other order)."""
    monkeypatch.setattr(moram_triton, "_ROWS_FIRST", request.param == "rows")
    monkeypatch.setattr(moram_triton, "_BOUND", {})
    return request.param
