"""The accuracy matrix A[t, d] of multi-domain CLIP continual learning and its summaries.

``A[t, d]`` is the top-1 accuracy (%) on domain ``d``'s test set after training on the
``t``-th domain of the stream. Summaries (method reference, "evaluation protocols and
metrics"; same as the MoRAM release's ``main.py``):

* Transfer = mean over domains ``d >= 1`` of ``mean_{t < d} A[t, d]`` (zero-shot ability on
  domains not learned yet; the first domain has no Transfer entry);
* Average = mean of every ``A[t, d]``;
* Last = mean over ``d`` of ``A[T-1, d]``.

With fewer rows than domains (a run in progress), the summaries use the rows that exist.

Each cell counts correct predictions with a ``torchmetrics`` metric (:class:`TopOneAccuracy`),
whose states are summed over the processes of a data-parallel run before the cell is filled,
so every process holds the accuracy of the whole test set and rank 0 alone writes the files.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch
import torchmetrics
from avalanche.evaluation import PluginMetric
from avalanche.evaluation.metric_results import MetricValue

from ..algorithms.data_parallel import is_main_process
from ..utils.files import atomic_write_bytes, atomic_write_text


class TopOneAccuracy(torchmetrics.Metric):
    """Top-1 accuracy from logits, as correct / total counts summed over processes.

    ``torchmetrics.classification.MulticlassAccuracy(average="micro")`` computes the same value
    but needs the number of classes up front; the logits' width varies with the label space.
    A process that saw no sample contributes zero counts (and still takes part in the sum).
    """

    full_state_update = False

    def __init__(self) -> None:
        super().__init__()
        # a sum of per-sample scores: whole hits for logits, fractions for graded answers
        self.add_state("correct", default=torch.tensor(0, dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("total", default=torch.tensor(0, dtype=torch.long), dist_reduce_fx="sum")

    def update(self, logits: torch.Tensor, labels: torch.Tensor) -> None:
        self.correct += (logits.argmax(dim=1) == labels).sum().to(self.correct.device)
        self.total += torch.tensor(labels.numel(), device=self.total.device)

    def update_scores(self, scores: torch.Tensor) -> None:
        """Add per-sample scores in [0, 1]: a generative model's answers, each scored by its
        task's metric (1 / 0 for a hit-or-miss metric, a fraction for ROUGE-L, SARI, ...)."""
        scores = scores.detach().to(torch.float64)
        if scores.numel() and (scores.min() < 0 or scores.max() > 1):
            raise ValueError(f"per-sample scores must lie in [0, 1], got {scores.min():.3f} to {scores.max():.3f}")
        self.correct += scores.sum().to(self.correct.device)
        self.total += torch.tensor(scores.numel(), device=self.total.device)

    def compute(self) -> torch.Tensor:
        """``[correct, total]`` over every process."""
        return torch.stack([self.correct, self.total])


def transfer_per_domain(matrix: np.ndarray) -> np.ndarray:
    """Column ``d``: mean of ``A[t, d]`` over the rows ``t < d`` (NaN for ``d = 0``)."""
    matrix = np.asarray(matrix, dtype=float)
    out = np.full(matrix.shape[1], np.nan)
    for d in range(1, matrix.shape[1]):
        above = matrix[: min(d, matrix.shape[0]), d]
        if above.size:
            out[d] = above.mean()
    return out


def summarize(matrix: np.ndarray) -> Dict[str, object]:
    """Transfer / Average / Last of an accuracy matrix, overall and per domain; once every
    domain is trained (a square matrix), also ``op`` and ``bwt`` as the MoRAM paper defines them
    for language models (:func:`~moram_avalanche.benchmarks.text.metrics.op_bwt`: OP = Last,
    BWT = mean over the domains before the last of ``A[j, j] - A[N, j]``, positive = forgetting;
    None with a single domain; and ``release_bwt``, the MoRAM release's own figure, clipped at 0
    and divided by N, negative = forgetting)."""
    matrix = np.asarray(matrix, dtype=float)
    if matrix.ndim != 2 or matrix.size == 0 or np.isnan(matrix).any():
        raise ValueError(f"expected a complete 2-D accuracy matrix, got {matrix.tolist()}")
    transfer = transfer_per_domain(matrix)
    per_domain_average = matrix.mean(axis=0)
    last = matrix[-1]
    defined = transfer[~np.isnan(transfer)]
    summary = {
        "transfer": float(defined.mean()) if defined.size else float("nan"),
        "average": float(matrix.mean()),
        "last": float(last.mean()),
        "per_domain": {
            "transfer": [None if math.isnan(v) else float(v) for v in transfer],
            "average": [float(v) for v in per_domain_average],
            "last": [float(v) for v in last],
        },
    }
    if matrix.shape[0] == matrix.shape[1]:
        from ..benchmarks.text.metrics import op_bwt

        scores = op_bwt(matrix)
        summary["op"] = scores["op"]
        summary["bwt"] = None if math.isnan(scores["bwt"]) else scores["bwt"]
        summary["release_bwt"] = scores["release_bwt"]
    return summary


class AccuracyMatrix(PluginMetric[np.ndarray]):
    """Fills ``A[t, d]`` from every evaluation of the test stream and reports its summaries.

    Row ``t`` is the number of training experiences done minus one when the evaluation runs
    (evaluations before any training fill the separate zero-shot row). Each evaluated domain
    logs ``AccMatrix/<domain>`` at x = t + 1 (one TensorBoard curve per domain); each
    evaluation logs ``AccMatrix/Transfer``, ``/Average``, ``/Last`` and the matrix as a
    heatmap image ``AccMatrix/heatmap``, and, with ``out_dir``, writes ``results.json`` and
    ``accuracy_matrix.csv`` there (atomically; rank 0 of a data-parallel run only). On
    benchmarks read from disk, ``results.json`` also counts the images skipped as unreadable
    (``skipped_images``).

    Works with any strategy whose outputs are logits over the labels of the benchmark's label
    space: the package's and Avalanche's own with
    :class:`~moram_avalanche.models.classifier.CLIPClassifier`; and with strategies that declare
    ``eval_output = "scores"`` and output each sample's score in [0, 1] in evaluation: the
    language-model loop (:class:`~moram_avalanche.strategies.text.loop.TextStrategy`).
    """

    def __init__(self, out_dir: Optional[str] = None, stream_name: str = "test") -> None:
        super().__init__()
        self.out_dir = Path(out_dir) if out_dir is not None else None
        self.stream_name = stream_name
        self.domains: List[str] = []
        self.rows: Dict[int, Dict[int, float]] = {}
        self._accuracy: Optional[TopOneAccuracy] = None
        self._drawn = None  # (the matrix and domains drawn, their heatmap): heatmap()
        #: the benchmark's record of skipped images, when it has one (set by the first
        #: evaluation, or by the runner)
        self.bad_images = None

    # ------------------------------------------------------------------ state
    def result(self) -> np.ndarray:
        """The matrix of the rows trained so far (``[rows, domains]``, NaN where not evaluated)."""
        trained = sorted(r for r in self.rows if r >= 0)
        matrix = np.full((len(trained), len(self.domains)), np.nan)
        for i, row in enumerate(trained):
            for col, acc in self.rows[row].items():
                matrix[i, col] = acc
        return matrix

    @property
    def zero_shot(self) -> Optional[List[float]]:
        row = self.rows.get(-1)
        return None if row is None else [row.get(c, float("nan")) for c in range(len(self.domains))]

    def reset(self) -> None:
        """Results persist across evaluations (this is a matrix over the whole run)."""

    def state_dict(self) -> dict:
        return {"domains": list(self.domains),
                "rows": {int(r): {int(c): float(a) for c, a in cols.items()} for r, cols in self.rows.items()}}

    def load_state_dict(self, state: dict) -> None:
        self.domains = list(state["domains"])
        self.rows = {int(r): {int(c): float(a) for c, a in cols.items()} for r, cols in state["rows"].items()}

    # ------------------------------------------------------------------ callbacks
    def _counts(self, strategy) -> bool:
        return strategy.experience.origin_stream.name == self.stream_name

    def before_eval_exp(self, strategy):
        self._accuracy = TopOneAccuracy().to(strategy.device)

    def after_eval_iteration(self, strategy):
        if not self._counts(strategy):
            return
        if getattr(strategy, "eval_output", "logits") == "scores":  # the language-model loop's answers
            self._accuracy.update_scores(strategy.mb_output.detach())
        else:
            self._accuracy.update(strategy.mb_output.detach(), strategy.mb_y)

    def after_eval_exp(self, strategy):
        if not self._counts(strategy):
            return None
        with warnings.catch_warnings():  # a process without samples: its counts are zero
            warnings.filterwarnings("ignore", message=".*was called before the ``update``")
            correct, total = (float(v) for v in self._accuracy.compute())
        if total == 0:
            return None
        experience = strategy.experience
        self.bad_images = getattr(experience, "bad_images", self.bad_images)
        if not self.domains:
            self.domains = [d.name for d in experience.domains]
        row = strategy.clock.train_exp_counter - 1
        col = experience.current_experience
        accuracy = 100.0 * correct / total
        self.rows.setdefault(row, {})[col] = accuracy
        return [MetricValue(self, f"AccMatrix/{self.domains[col]}", float(accuracy), row + 1)]

    def after_eval(self, strategy):
        row = strategy.clock.train_exp_counter - 1
        matrix = self.result()
        if row < 0 or matrix.size == 0 or np.isnan(matrix).any():
            return None  # a partial evaluation (not every domain): nothing to summarise
        summary = summarize(matrix)
        values = [MetricValue(self, f"AccMatrix/{key.capitalize()}", float(summary[key]), row + 1)
                  for key in ("transfer", "average", "last") if not math.isnan(summary[key])]
        if summary.get("bwt") is not None:  # after the last domain: the paper's backward transfer
            values.append(MetricValue(self, "AccMatrix/BWT", float(summary["bwt"]), row + 1))
            values.append(MetricValue(self, "AccMatrix/BWT_release", float(summary["release_bwt"]), row + 1))
        image = self.heatmap()
        values.append(MetricValue(self, "AccMatrix/heatmap", image, row + 1))
        if self.out_dir is not None and is_main_process():
            self.write(self.out_dir, image)
        return values

    def heatmap(self):
        """:meth:`result` drawn as a heatmap image (:func:`~.viz.accuracy_heatmap`; None while it is
        empty), drawn once per matrix: the evaluation's TensorBoard image and the run's
        ``accuracy_matrix.png``, written after the checkpoint (:func:`~.runner.rewrite_results`),
        are one picture."""
        from .viz import accuracy_heatmap

        matrix = self.result()
        if matrix.size == 0:
            return None
        key = (matrix.tobytes(), tuple(self.domains))
        drawn = getattr(self, "_drawn", None)  # a metric pickled by an earlier version has none
        if drawn is None or drawn[0] != key:
            self._drawn = drawn = (key, accuracy_heatmap(matrix, self.domains))
        return drawn[1]

    # ------------------------------------------------------------------ files
    def report(self) -> dict:
        """Everything ``results.json`` holds."""
        matrix = self.result()
        report = {"domains": self.domains, "matrix": matrix.tolist(), "zero_shot": self.zero_shot}
        if matrix.size and not np.isnan(matrix).any():
            report.update(summarize(matrix))
        if self.bad_images is not None:
            skipped = self.bad_images.skipped()
            report["skipped_images"] = {"count": len(skipped), "files": skipped}
        return report

    def write(self, out_dir, image=None) -> None:
        out_dir = Path(out_dir)
        atomic_write_text(out_dir / "results.json", json.dumps(self.report(), indent=2) + "\n")
        atomic_write_text(out_dir / "accuracy_matrix.csv", matrix_csv(self.result(), self.domains))
        if image is not None:
            import io

            buffer = io.BytesIO()
            image.save(buffer, format="PNG")
            atomic_write_bytes(out_dir / "accuracy_matrix.png", buffer.getvalue())

    def __str__(self) -> str:
        return "AccuracyMatrix"


def matrix_csv(matrix: np.ndarray, domains: Sequence[str]) -> str:
    """Rows "after <domain>", one column per evaluated domain, accuracies in %."""
    lines = ["trained_on," + ",".join(domains)]
    for t, row in enumerate(np.asarray(matrix)):
        cells = ["" if np.isnan(v) else f"{v:.4f}" for v in row]
        lines.append(f"{domains[t]}," + ",".join(cells))
    return "\n".join(lines) + "\n"


def accuracy_matrix_of(strategy) -> AccuracyMatrix:
    """The :class:`AccuracyMatrix` among ``strategy``'s metrics (after a resume from Avalanche's
    whole-strategy checkpoint the evaluator, and so the metric, are the unpickled objects)."""
    for metric in getattr(strategy.evaluator, "metrics", []):
        if isinstance(metric, AccuracyMatrix):
            return metric
    raise ValueError(f"{type(strategy).__name__}'s evaluator has no AccuracyMatrix: pass "
                     "evaluator=EvaluationPlugin(AccuracyMatrix(...), ...)")


__all__ = ["AccuracyMatrix", "TopOneAccuracy", "accuracy_matrix_of", "matrix_csv", "summarize",
           "transfer_per_domain"]
