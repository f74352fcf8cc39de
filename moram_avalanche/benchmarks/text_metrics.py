"""Text metrics, framework-free: percent values computed from lists of strings and from matrices.

* :func:`normalize_answer` / :func:`exact_match` -- O-LoRA's metric for the classification
  streams (``src/compute_metrics.py``: exact match after lower-casing, removing punctuation
  and the articles a / an / the, and collapsing whitespace; reference ``language_models.md``).
* TRACE's metrics (BeyonderXX/TRACE ``metrics.py``, also in the MoRAM release's
  ``TRACE/metrics.py``; reference ``language_models.md``): :func:`prefix_accuracy` (C-STANCE,
  FOMC, ScienceQA, NumGLUE: the stripped prediction cut to the answer's length must equal the
  answer), :func:`rouge_l` (MeetingBank: ROUGE-L F1 over whitespace tokens),
  :func:`edit_similarity` (Py150: fuzzywuzzy's ``fuzz.ratio``, here ``difflib``'s ratio in
  percent, rounded as fuzzywuzzy's pure-Python path does), :func:`sari` (20Minuten: Xu et al.
  2016, n-grams 1-4 over lower-cased 13a tokens, as the common metric libraries compute it).
  As in TRACE, an empty prediction or reference scores 0 and the mean is over all examples.
* :data:`TEXT_METRICS` -- metric name -> ``fn(predictions, references, sources=None)``, the
  name each task of a text stream declares.
* :func:`op_bwt` -- the paper's continual-learning summaries of an accuracy matrix
  ``A[i, j]`` (accuracy on task ``j`` after training task ``i``, N tasks):
  OP = mean_j A[N, j] (the same number as the accuracy matrix's "Last" of the CLIP tables,
  :func:`moram_avalanche.experiments.metrics.summarize`) and
  **BWT = 1/(N-1) * sum_{j<N} (A[j, j] - A[N, j])**, positive when tasks are forgotten
  (lower is better; the MoRAM paper's sign convention, TRACE tables).

Every score is in percent (0-100), like the paper's tables.
"""

from __future__ import annotations

import difflib
import re
import string
from collections import Counter
from typing import Callable, Dict, List, Optional, Sequence, Union

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


def _paired(predictions, references) -> List[tuple]:
    predictions, references = list(predictions), list(references)
    if len(predictions) != len(references):
        raise ValueError(f"need one reference per prediction, got {len(predictions)} predictions "
                         f"and {len(references)} references")
    if not predictions:
        raise ValueError("empty evaluation: no predictions were given")
    return list(zip((str(p) for p in predictions), (str(r) for r in references)))


def prefix_accuracy(predictions: Sequence[str], references: Sequence[str]) -> float:
    """TRACE's accuracy in percent: ``prediction.strip()[:len(answer)] == answer``."""
    pairs = _paired(predictions, references)
    hits = 0
    for prediction, reference in pairs:
        prediction = prediction.strip()
        cut = prediction[:min(len(reference), len(prediction))]
        hits += bool(cut) and bool(reference) and cut == reference
    return 100.0 * hits / len(pairs)


def _lcs(a: Sequence[str], b: Sequence[str]) -> int:
    row = [0] * (len(b) + 1)
    for x in a:
        previous = 0
        for j, y in enumerate(b, 1):
            previous, row[j] = row[j], previous + 1 if x == y else max(row[j], row[j - 1])
    return row[-1]


def rouge_l(predictions: Sequence[str], references: Sequence[str]) -> float:
    """Mean ROUGE-L F1 (longest common subsequence of whitespace tokens) in percent."""
    pairs = _paired(predictions, references)
    total = 0.0
    for prediction, reference in pairs:
        hyp, ref = prediction.split(), reference.split()
        common = _lcs(hyp, ref) if hyp and ref else 0
        if common:
            precision, recall = common / len(hyp), common / len(ref)
            total += 2 * precision * recall / (precision + recall)
    return 100.0 * total / len(pairs)


def edit_similarity(predictions: Sequence[str], references: Sequence[str]) -> float:
    """Mean ``round(100 * difflib ratio)`` (fuzzywuzzy ``fuzz.ratio``) in percent."""
    pairs = _paired(predictions, references)
    total = 0
    for prediction, reference in pairs:
        if prediction and reference:
            total += int(round(100 * difflib.SequenceMatcher(None, prediction, reference).ratio()))
    return total / len(pairs)


def tokenize_13a(text: str) -> str:
    """sacrebleu's "13a" tokenisation (mteval-v13a), lower-cased: what SARI reads."""
    text = text.replace("<skipped>", "").replace("-\n", "").replace("\n", " ")
    if "&" in text:
        text = text.replace("&quot;", '"').replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">")
    text = f" {text} "
    text = re.sub(r"([\{-\~\[-\` -\&\(-\+\:-\@\/])", r" \1 ", text)
    text = re.sub(r"([^0-9])([\.,])", r"\1 \2 ", text)
    text = re.sub(r"([\.,])([^0-9])", r" \1 \2", text)
    text = re.sub(r"([0-9])(-)", r"\1 \2 ", text)
    return " ".join(text.split()).lower()


def _ngrams(tokens: List[str], n: int) -> List[str]:
    return [" ".join(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]


def _f1(precision: float, recall: float) -> float:
    return 2 * precision * recall / (precision + recall) if precision > 0 or recall > 0 else 0.0


def _sari_ngram(source: List[str], candidate: List[str], references: List[List[str]]):
    """(keep F1, deletion precision, addition F1) for one n-gram order (Xu et al. 2016)."""
    refs = len(references)
    ref_counts = Counter(g for grams in references for g in grams)
    src = Counter({g: c * refs for g, c in Counter(source).items()})
    cand = Counter({g: c * refs for g, c in Counter(candidate).items()})
    keep, keep_good, keep_all = src & cand, src & cand & ref_counts, src & ref_counts
    keep_p = sum(keep_good[g] / keep[g] for g in keep) / len(keep) if keep else 1.0
    keep_r = sum(keep_good[g] for g in keep) / sum(keep_all.values()) if keep_all else 1.0
    delete, delete_good = src - cand, (src - cand) - ref_counts
    delete_p = sum(delete_good[g] / delete[g] for g in delete) / len(delete) if delete else 1.0
    added = set(cand) - set(src)
    added_good, added_all = added & set(ref_counts), set(ref_counts) - set(src)
    add_p = len(added_good) / len(added) if added else 1.0
    add_r = len(added_good) / len(added_all) if added_all else 1.0
    return _f1(keep_p, keep_r), delete_p, _f1(add_p, add_r)


def sari(predictions: Sequence[str], references: Sequence[Union[str, Sequence[str]]],
         sources: Optional[Sequence[str]] = None) -> float:
    """Corpus SARI in percent: mean over sentences of (keep + deletion + addition) / 3, each
    averaged over n-gram orders 1-4; ``references`` may hold several simplifications each."""
    if sources is None:
        raise ValueError("SARI compares the prediction with its source: pass sources (the prompts)")
    predictions, references, sources = list(predictions), list(references), list(sources)
    if not len(predictions) == len(references) == len(sources) or not predictions:
        raise ValueError(f"SARI needs as many sources, predictions and references, got "
                         f"{len(sources)}, {len(predictions)} and {len(references)}")
    total = 0.0
    for source, prediction, reference in zip(sources, predictions, references):
        options = [reference] if isinstance(reference, str) else list(reference)
        s_tok, c_tok = tokenize_13a(source).split(), tokenize_13a(prediction).split()
        r_tok = [tokenize_13a(option).split() for option in options]
        scores = [_sari_ngram(_ngrams(s_tok, n), _ngrams(c_tok, n), [_ngrams(r, n) for r in r_tok])
                  for n in range(1, 5)]
        total += sum(sum(part[i] for part in scores) / 4 for i in range(3)) / 3
    return 100.0 * total / len(predictions)


def _plain(metric: Callable) -> Callable:
    def score(predictions, references, sources=None):
        return metric(predictions, references)

    score.__name__, score.__doc__ = metric.__name__, metric.__doc__
    return score


#: metric name -> ``fn(predictions, references, sources=None)`` in percent
TEXT_METRICS: Dict[str, Callable] = {
    "exact_match": _plain(exact_match),
    "accuracy": _plain(prefix_accuracy),
    "rouge_l": _plain(rouge_l),
    "edit_similarity": _plain(edit_similarity),
    "sari": sari,
}


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


__all__ = ["TEXT_METRICS", "edit_similarity", "exact_match", "normalize_answer", "op_bwt",
           "prefix_accuracy", "rouge_l", "sari", "tokenize_13a"]
