"""Text metrics, framework-free: percent values computed from lists of strings and from matrices.

* :func:`normalize_answer` / :func:`exact_match` -- O-LoRA's metric for the classification
  streams (``src/compute_metrics.py``: exact match after lower-casing, removing punctuation and
  collapsing whitespace; its ``normalize_answer`` is SQuAD's "without removing the articles",
  so "a" / "an" / "the" stay; reference ``language_models.md``).
* TRACE's metrics as the MoRAM release computes them (``TRACE/metrics.py``,
  ``evaluations/eval_*.py``, ``inference/infer_multi_command.py``; reference
  ``language_models.md``), each the mean over the examples in percent, an empty prediction or
  reference scoring 0:

  ====================  ===================  =================================================
  name                  task(s)              score of one example
  ====================  ===================  =================================================
  ``accuracy``          (TRACE's own)        :func:`prefix_accuracy`: the stripped prediction
                                             cut to the answer's length equals the answer
  ``option_letter``     C-STANCE, FOMC       :func:`option_letter_accuracy`: the option letter
                                             read from the prediction, then ``accuracy``
  ``answer_letter``     ScienceQA            :func:`answer_letter_accuracy`: the first
                                             character of prediction and answer agree (the
                                             answers are ``"B\n<reasoning>"``)
  ``math_accuracy``     NumGLUE-cm / -ds     :func:`math_accuracy`: the release's number
                                             extraction and comparison
  ``rouge_l``           MeetingBank          :func:`rouge_l`: pltrdy's ``rouge`` package,
                                             ROUGE-L F (sentences split on ".", summary-level
                                             union LCS), a newline added to a prediction
                                             without one, as the release does
  ``rouge_l_stemmed``   SuperNI (SAPT)       :func:`rouge_l_stemmed`: Google's ``rouge_score``
                                             with the Porter stemmer, ROUGE-L F (SAPT's
                                             ``src/compute_metrics.py``)
  ``code_similarity``   Py150                :func:`code_similarity`: the literal placeholders
                                             resolved, then :func:`edit_similarity`
  ``edit_similarity``   (generic)            ``fuzzywuzzy``'s ``fuzz.ratio``
  ``sari``              20Minuten            :func:`sari`: Xu et al. 2016 over sacrebleu's
                                             "13a" tokens of the lower-cased texts, n-grams 1-4
  ``humaneval``         HumanEval            :func:`~.humaneval.humaneval_pass`: the completion
                        (``codealpaca``)     passes its problem's tests, run in a sandboxed
                                             process (:mod:`.code_sandbox`); greedy pass@1
  ====================  ===================  =================================================

  The answer-reading rules are in :mod:`.release_answers`; the packages are the ones TRACE's
  ``requirements.txt`` names (``rouge==1.0.1``, ``fuzzywuzzy`` without python-Levenshtein, whose
  ``ratio`` is then ``difflib``'s) and ``sacrebleu`` (the tokenizer of the SARI metric the
  release loads with ``datasets.load_metric("sari")``), pinned in ``constraints.txt``.
* :data:`TEXT_METRICS` -- metric name -> ``fn(predictions, references, sources=None)``, the
  name each task of a text stream declares.
* :func:`op_bwt` -- the paper's continual-learning summaries of an accuracy matrix
  ``A[i, j]`` (accuracy on task ``j`` after training task ``i``, N tasks):
  OP = mean_j A[N, j] (the same number as the accuracy matrix's "Last" of the CLIP tables,
  :func:`moram_avalanche.experiments.metrics.summarize`) and
  **BWT = 1/(N-1) * sum_{j<N} (A[j, j] - A[N, j])**, positive when tasks are forgotten
  (lower is better; the MoRAM paper's sign convention, TRACE tables); beside them
  ``release_bwt``, the figure the release's ``inference/collect_results.py`` prints:
  ``1/N * sum_j min(A[N, j] - A[j, j], 0)`` (clipped at 0, divided by N, negative when tasks
  are forgotten), so a reproduced run reads the same number as the release's logs.

:func:`ap_ft` -- SAPT's AP and FT (``score.py``) for the SuperNI table.

Every score is in percent (0-100), like the paper's tables.
"""

from __future__ import annotations

import string
import warnings
from collections import Counter
from typing import Callable, Dict, List, Optional, Sequence, Union

import numpy as np

from .humaneval import humaneval_pass
from .release_answers import answer_letter, math_answer, math_equal, normalize_math, option_letter, py150_literals

_PUNCTUATION = set(string.punctuation)


def normalize_answer(text: str) -> str:
    """Lower-case, drop punctuation, collapse whitespace (O-LoRA's; articles are kept)."""
    text = "".join(ch for ch in str(text).lower() if ch not in _PUNCTUATION)
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


def _mean(scores: List[float]) -> float:
    return 100.0 * sum(scores) / len(scores)


def _prefix_hit(prediction: str, reference: str) -> bool:
    prediction = prediction.strip()
    cut = prediction[:min(len(reference), len(prediction))]
    return bool(cut) and bool(reference) and cut == reference


def prefix_accuracy(predictions: Sequence[str], references: Sequence[str]) -> float:
    """TRACE's accuracy in percent: ``prediction.strip()[:len(answer)] == answer``."""
    return _mean([_prefix_hit(p, r) for p, r in _paired(predictions, references)])


def option_letter_accuracy(predictions: Sequence[str], references: Sequence[str], letters: str = "ABC") -> float:
    """C-STANCE / FOMC: :func:`~.release_answers.option_letter` of each prediction (options
    ``letters``; both tasks: A, B, C), then TRACE's accuracy."""
    return _mean([_prefix_hit(option_letter(p, letters), r) for p, r in _paired(predictions, references)])


def answer_letter_accuracy(predictions: Sequence[str], references: Sequence[str]) -> float:
    """ScienceQA: percent of predictions whose first character is the answer's (its letter)."""
    hits = []
    for prediction, reference in _paired(predictions, references):
        letter = answer_letter(prediction)
        hits.append(letter is not None and letter == answer_letter(reference))
    return _mean(hits)


def math_accuracy(predictions: Sequence[str], references: Sequence[str]) -> float:
    """NumGLUE: percent of predictions whose extracted answer equals the normalised reference."""
    return _mean([math_equal(math_answer(p), normalize_math(r)) for p, r in _paired(predictions, references)])


def _rouge_scorer():
    from rouge import Rouge

    return Rouge(metrics=["rouge-l"])


def rouge_l(predictions: Sequence[str], references: Sequence[str]) -> float:
    """Mean ROUGE-L F in percent, pltrdy's ``rouge`` as the release calls it (module docstring).

    A reference with no word (which makes the package raise, and the release stop) scores 0.
    """
    scorer, scores = _rouge_scorer(), []
    for prediction, reference in _paired(predictions, references):
        if not prediction or not reference:
            scores.append(0.0)
            continue
        if "\n" not in prediction:
            prediction += "\n"
        try:
            scores.append(scorer.get_scores(prediction, reference, avg=True)["rouge-l"]["f"])
        except ValueError:  # "Collections must contain at least 1 sentence."
            scores.append(0.0)
    return _mean(scores)


def _stemmed_rouge_l_scorer():
    from rouge_score.rouge_scorer import RougeScorer

    return RougeScorer(["rougeL"], use_stemmer=True)


def rouge_l_stemmed(predictions: Sequence[str], references: Sequence[str]) -> float:
    """Mean ROUGE-L F in percent as SAPT scores SuperNI (``src/compute_metrics.py``, ``rougeL_score``):
    Google's ``rouge_score`` (``RougeScorer(["rougeL"], use_stemmer=True)``): lower-cased, every
    character outside ``[a-z0-9]`` a separator, tokens longer than three characters Porter-stemmed
    (nltk), the longest common subsequence of the two token lists, its F-measure; an empty text
    scores 0. Unlike :func:`rouge_l` (pltrdy's, no stemming, sentences split on ".", summary-level
    union LCS), which TRACE's MeetingBank uses.
    """
    scorer = _stemmed_rouge_l_scorer()
    return _mean([scorer.score(target=reference, prediction=prediction)["rougeL"].fmeasure
                  for prediction, reference in _paired(predictions, references)])


def _fuzz():
    with warnings.catch_warnings():  # fuzzywuzzy warns that it uses difflib: TRACE's pinned behaviour
        warnings.simplefilter("ignore", UserWarning)
        from fuzzywuzzy import fuzz
    return fuzz


def edit_similarity(predictions: Sequence[str], references: Sequence[str]) -> float:
    """Mean ``fuzzywuzzy.fuzz.ratio`` (0-100 per example; 0 when either side is empty)."""
    fuzz, pairs = _fuzz(), _paired(predictions, references)
    return sum(fuzz.ratio(p, r) if p and r else 0 for p, r in pairs) / len(pairs)


def code_similarity(predictions: Sequence[str], references: Sequence[str]) -> float:
    """Py150: :func:`edit_similarity` after :func:`~.release_answers.py150_literals` on both sides."""
    pairs = _paired(predictions, references)
    return edit_similarity([py150_literals(p) for p, _ in pairs], [py150_literals(r) for _, r in pairs])


def tokenize_13a(text: str) -> str:
    """sacrebleu's "13a" tokens of the lower-cased text (what the SARI metric reads)."""
    from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

    return Tokenizer13a()(str(text).lower())


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
    "option_letter": _plain(option_letter_accuracy),
    "answer_letter": _plain(answer_letter_accuracy),
    "math_accuracy": _plain(math_accuracy),
    "rouge_l": _plain(rouge_l),
    "rouge_l_stemmed": _plain(rouge_l_stemmed),
    "edit_similarity": _plain(edit_similarity),
    "code_similarity": _plain(code_similarity),
    "sari": sari,
    "humaneval": humaneval_pass,
}


def release_bwt(matrix) -> float:
    """The release's BWT (``inference/collect_results.py``): ``1/N * sum_j min(A[N, j] - A[j, j], 0)``
    over all N tasks (the last one adds 0); negative when tasks are forgotten, never positive."""
    matrix = np.asarray(matrix, dtype=float)
    return float(np.minimum(matrix[-1] - np.diag(matrix), 0.0).sum() / matrix.shape[0])


def square_matrix(matrix, what: str, cells: str) -> np.ndarray:
    """``matrix`` as a float array, refused unless it is a complete square N x N matrix (row i:
    after task i, column j: task j) of ``cells`` ("accuracy", "score") that ``what`` needs."""
    matrix = np.asarray(matrix, dtype=float)
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1] or matrix.size == 0:
        raise ValueError(f"{what} need a square N x N {cells} matrix (row i: after task i, column j: task j), "
                         f"got shape {matrix.shape}")
    if not np.isfinite(matrix).all():
        raise ValueError(f"the {cells} matrix has missing (NaN) or infinite cells: evaluate every task after every "
                         "training task first")
    return matrix


def op_bwt(matrix) -> Dict[str, float]:
    """OP, BWT and the release's BWT (see the module docstring) of a complete square accuracy
    matrix, in percent.

    ``matrix[i][j]``: accuracy (%) on task ``j`` after training task ``i``. With one task BWT
    is NaN (no earlier task to forget) and the release's BWT 0.
    """
    matrix = square_matrix(matrix, "OP and BWT", "accuracy")
    last = matrix[-1]
    n = matrix.shape[0]
    bwt = float(np.mean(np.diag(matrix)[:-1] - last[:-1])) if n > 1 else float("nan")
    return {"op": float(last.mean()), "bwt": bwt, "release_bwt": release_bwt(matrix)}


def ap_ft(matrix) -> Dict[str, float]:
    """SAPT's AP and FT (``score.py``, ``cal_continue_learning_metrics``; the MoRAM paper's
    ``tab:sapt``) of a complete square matrix ``A[i, j]`` (score on task ``j`` after training
    task ``i``, N tasks), in percent:

    * AP = mean_j A[N-1, j], the average performance after the last task;
    * FT = 1/(N-1) * sum_{j<N-1} (max_{j<=i<N-1} A[i, j] - A[N-1, j]): for each earlier task its
      best score before the last task minus its final one (positive = forgetting, lower is
      better); SAPT's "F.Ra" takes the max over rows 0..N-2 with zeros above the diagonal, the
      same number for scores >= 0. Not BWT (:func:`op_bwt`), which compares with ``A[j, j]``.

    With one task FT is NaN (nothing to forget).
    """
    matrix = square_matrix(matrix, "AP and FT", "score")
    n = matrix.shape[0]
    best = [matrix[j:n - 1, j].max() for j in range(n - 1)]
    ft = float(np.mean([best[j] - matrix[n - 1, j] for j in range(n - 1)])) if n > 1 else float("nan")
    return {"ap": float(matrix[-1].mean()), "ft": ft}


__all__ = ["TEXT_METRICS", "ap_ft", "square_matrix", "answer_letter_accuracy", "code_similarity", "edit_similarity",
           "exact_match", "math_accuracy", "normalize_answer", "op_bwt", "option_letter_accuracy", "prefix_accuracy",
           "release_bwt", "rouge_l", "rouge_l_stemmed", "sari", "tokenize_13a"]
