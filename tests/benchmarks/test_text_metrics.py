"""Text metrics by hand: O-LoRA's normalisation, exact match, OP and BWT."""

import math

import pytest

from moram_avalanche.benchmarks.text_metrics import exact_match, normalize_answer, op_bwt


def test_normalisation_lowercases_and_drops_punctuation_articles_and_spaces():
    assert normalize_answer("  The  Very   Negative!! ") == "very negative"
    assert normalize_answer("An apple, a day.") == "apple day"
    assert normalize_answer("theatre") == "theatre"  # articles only as whole words


def test_exact_match_in_percent():
    assert exact_match(["Good", "bad.", "neutral"], ["good", "Bad", "positive"]) == pytest.approx(200 / 3)
    assert exact_match(["World"], [["Sports", "the world"]]) == 100.0  # any of several references
    with pytest.raises(ValueError, match="one reference per prediction"):
        exact_match(["a"], [])
    with pytest.raises(ValueError, match="empty evaluation"):
        exact_match([], [])


def test_op_and_bwt_on_a_hand_made_matrix():
    matrix = [[80.0, 10.0, 5.0],
              [70.0, 90.0, 20.0],
              [60.0, 85.0, 75.0]]
    result = op_bwt(matrix)
    assert result["op"] == pytest.approx((60 + 85 + 75) / 3)
    assert result["bwt"] == pytest.approx(((80 - 60) + (90 - 85)) / 2)  # positive: forgetting
    assert math.isnan(op_bwt([[50.0]])["bwt"]) and op_bwt([[50.0]])["op"] == 50.0
    with pytest.raises(ValueError, match="square"):
        op_bwt([[1.0, 2.0]])
    with pytest.raises(ValueError, match="missing"):
        op_bwt([[1.0, float("nan")], [1.0, 2.0]])
