"""The benchmark scripts import their siblings from their folder (``python scripts/bench_*.py``): put it on the path."""

from pathlib import Path

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


@pytest.fixture
def scripts(monkeypatch):
    """``scripts/`` on ``sys.path`` for one test; returns its path."""
    monkeypatch.syspath_prepend(str(SCRIPTS))
    return SCRIPTS
