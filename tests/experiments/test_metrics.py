"""Transfer / Average / Last on hand-made matrices, and the AccuracyMatrix files."""

import json

import numpy as np
import pytest

from moram_avalanche.experiments.metrics import matrix_csv, summarize, transfer_per_domain

# rows: after training on domain t; columns: evaluated domain d
MATRIX = np.array([
    [80.0, 10.0, 20.0],
    [70.0, 90.0, 30.0],
    [60.0, 85.0, 95.0],
])


def test_transfer_uses_only_the_rows_before_each_domain():
    per_domain = transfer_per_domain(MATRIX)
    assert np.isnan(per_domain[0])  # the first domain has no Transfer entry
    assert per_domain[1] == 10.0  # row 0 only
    assert per_domain[2] == 25.0  # mean(20, 30)


def test_summary_by_hand():
    summary = summarize(MATRIX)
    assert summary["transfer"] == pytest.approx((10.0 + 25.0) / 2)
    assert summary["average"] == pytest.approx(MATRIX.sum() / 9)
    assert summary["last"] == pytest.approx((60 + 85 + 95) / 3)
    assert summary["per_domain"]["transfer"] == [None, 10.0, 25.0]
    assert summary["per_domain"]["average"] == pytest.approx([70.0, 185 / 3, 145 / 3])
    assert summary["per_domain"]["last"] == [60.0, 85.0, 95.0]


def test_op_and_bwt_once_every_domain_is_trained():
    summary = summarize(MATRIX)
    assert summary["op"] == pytest.approx((60 + 85 + 95) / 3)  # OP: the mean of the last row
    assert summary["bwt"] == pytest.approx(((80 - 60) + (90 - 85)) / 2)  # (A[j,j] - A[N,j]) over j < N
    assert "bwt" not in summarize(MATRIX[:2])  # not every domain trained yet: no OP / BWT
    assert summarize(np.array([[50.0]]))["bwt"] is None  # one domain: nothing to forget


def test_partial_run_summaries_use_the_rows_so_far():
    summary = summarize(MATRIX[:1])
    assert summary["transfer"] == pytest.approx((10.0 + 20.0) / 2)
    assert summary["last"] == pytest.approx(110 / 3)


def test_single_domain_has_no_transfer():
    assert np.isnan(summarize(np.array([[50.0]]))["transfer"])


def test_incomplete_matrix_is_refused():
    with pytest.raises(ValueError):
        summarize(np.array([[1.0, np.nan]]))


def test_csv_layout():
    text = matrix_csv(MATRIX[:2], ["a", "b", "c"])
    assert text.splitlines() == ["trained_on,a,b,c", "a,80.0000,10.0000,20.0000",
                                 "b,70.0000,90.0000,30.0000"]


def test_accuracy_matrix_writes_results_atomically(tmp_path):
    from moram_avalanche.experiments.metrics import AccuracyMatrix

    metric = AccuracyMatrix(out_dir=tmp_path)
    metric.domains = ["a", "b", "c"]
    metric.rows = {t: dict(enumerate(row)) for t, row in enumerate(MATRIX.tolist())}
    metric.write(tmp_path)
    report = json.loads((tmp_path / "results.json").read_text())
    assert report["matrix"] == MATRIX.tolist() and report["last"] == pytest.approx(80.0)
    assert (tmp_path / "accuracy_matrix.csv").read_text() == matrix_csv(MATRIX, ["a", "b", "c"])
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary left


def test_the_heatmap_is_drawn_once_per_matrix(monkeypatch):
    """The evaluation's TensorBoard image and the run's accuracy_matrix.png (written after the
    checkpoint) are one picture: drawn again only when the matrix or the domains change."""
    from moram_avalanche.experiments import viz
    from moram_avalanche.experiments.metrics import AccuracyMatrix

    drawn = []
    monkeypatch.setattr(viz, "accuracy_heatmap", lambda matrix, domains: drawn.append(matrix.copy()) or len(drawn))
    metric = AccuracyMatrix()
    assert metric.heatmap() is None and not drawn  # nothing evaluated yet
    metric.domains = ["a", "b", "c"]
    metric.rows = {0: dict(enumerate(MATRIX[0].tolist()))}
    assert metric.heatmap() == metric.heatmap() == 1
    metric.rows[1] = dict(enumerate(MATRIX[1].tolist()))
    assert metric.heatmap() == metric.heatmap() == 2
    metric.domains = ["a", "b", "x"]
    assert metric.heatmap() == 3
    np.testing.assert_array_equal(drawn[1], MATRIX[:2])
