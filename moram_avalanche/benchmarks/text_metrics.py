"""Text metrics, framework-free: percent values computed from lists of strings and from matrices.

* :func:`normalize_answer` / :func:`exact_match` -- O-LoRA's metric for the classification
  streams (``src/compute_metrics.py``: exact match after lower-casing, removing punctuation
  and the articles a / an / the, and collapsing whitespace; reference ``language_models.md``).
* :func:`op_bwt` -- the paper's continual-learning summaries of an accuracy matrix
  ``A[i, j]`` (accuracy on task ``j`` after training task ``i``, N tasks):
  OP = mean_j A[N, j] (the same number as the accuracy matrix's "Last" of the CLIP tables,
  :func:`moram_avalanche.experiments.metrics.summarize`) and
  **BWT = 1/(N-1) * sum_{j<N} (A[j, j] - A[N, j])**, positive when tasks are forgotten
  (lower is better; the MoRAM paper's sign convention, TRACE tables).

Every score is in percent (0-100), like the paper's tables.
"""

from __future__ import annotations

import re
import string
from typing import Dict, Sequence, Union

import numpy as np

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower-case, drop punctuation, drop the articles a / an / the, collapse whitespace."""
    text = "".join(ch for ch in str(text).lower() if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(predictions: Sequence[str], references: Sequence[Union[str, Sequence[str]]]) -> float:
    """Percent of predictions equal to their reference after :func:`normalize_answer`.

    A reference may be a list of acceptable answers (a match with any counts). Lengths must
    agree; an empty evaluation is a ValueError (there is no accuracy of nothing).
    """
    predictions, references = list(predictions), list(references)
    if len(predictions) != len(references):
        raise ValueError(f"exact_match needs one reference per prediction, got {len(predictions)} "
                         f"predictions and {len(references)} references")
    if not predictions:
        raise ValueError("exact_match of an empty evaluation: no predictions were given")
    hits = 0
    for prediction, reference in zip(predictions, references):
        options = [reference] if isinstance(reference, str) else list(reference)
        hits += normalize_answer(prediction) in {normalize_answer(option) for option in options}
    return 100.0 * hits / len(predictions)


def op_bwt(matrix) -> Dict[str, float]:
    """OP and BWT (see the module docstring) of a complete square accuracy matrix, in percent.

    ``matrix[i][j]``: accuracy (%) on task ``j`` after training task ``i``. With one task BWT
    is NaN (no earlier task to forget).
    """
    matrix = np.asarray(matrix, dtype=float)
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1] or matrix.size == 0:
        raise ValueError(f"OP and BWT need a square N x N accuracy matrix (row i: after task i, "
                         f"column j: task j), got shape {matrix.shape}")
    if not np.isfinite(matrix).all():
        raise ValueError("the accuracy matrix has missing (NaN) or infinite cells: evaluate every "
                         "task after every training task first")
    last = matrix[-1]
    n = matrix.shape[0]
    bwt = float(np.mean(np.diag(matrix)[:-1] - last[:-1])) if n > 1 else float("nan")
    return {"op": float(last.mean()), "bwt": bwt}


__all__ = ["exact_match", "normalize_answer", "op_bwt"]
