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


def test_trace_metrics_by_hand():
    from moram_avalanche.benchmarks.text_metrics import TEXT_METRICS, edit_similarity, prefix_accuracy, rouge_l

    # TRACE's accuracy: the stripped prediction cut to the answer's length; empty scores 0
    assert prefix_accuracy([" A) yes", "B", ""], ["A", "C", "A"]) == pytest.approx(100 / 3)
    # ROUGE-L F1: LCS 3 of 3 predicted and 4 reference tokens -> 2 * 1 * 0.75 / 1.75
    assert rouge_l(["the cat sat"], ["the cat sat down"]) == pytest.approx(100 * 1.5 / 1.75)
    assert rouge_l(["x"], [""]) == 0.0
    assert edit_similarity(["abcd", ""], ["abce", "x"]) == pytest.approx(75 / 2)
    assert TEXT_METRICS["exact_match"](["Good"], ["good"], sources=["ignored"]) == 100.0


def test_sari_matches_the_reference_value():
    from moram_avalanche.benchmarks.text_metrics import TEXT_METRICS, sari, tokenize_13a

    # Xu et al. 2016 as the common metric libraries compute it (reference language_models.md)
    sources = ["About 95 species are currently accepted."]
    predictions = ["About 95 you now get in."]
    references = [["About 95 species are currently known.", "About 95 species are now accepted.",
                   "95 species are now accepted."]]
    assert sari(predictions, references, sources) == pytest.approx(26.9536, abs=1e-4)
    assert TEXT_METRICS["sari"](predictions, references, sources=sources) == pytest.approx(26.9536, abs=1e-4)
    assert tokenize_13a("Hello, World.") == "hello , world ."
    with pytest.raises(ValueError, match="pass sources"):
        sari(predictions, references)
