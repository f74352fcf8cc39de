"""Text metrics by hand: O-LoRA's normalisation, exact match, OP and BWT, and TRACE's metrics as
the MoRAM release computes them (its rule applied by hand to given strings)."""

import math

import pytest

from moram_avalanche.benchmarks.text.metrics import exact_match, normalize_answer, op_bwt


def test_normalisation_lowercases_and_drops_punctuation_and_spaces_but_keeps_articles():
    # O-LoRA src/compute_metrics.py: SQuAD's normalisation "without removing the articles"
    assert normalize_answer("  The  Very   Negative!! ") == "the very negative"
    assert normalize_answer("An apple, a day.") == "an apple a day"
    assert exact_match(["the World"], ["World"]) == 0.0  # an article is a difference


def test_exact_match_in_percent():
    assert exact_match(["Good", "bad.", "neutral"], ["good", "Bad", "positive"]) == pytest.approx(200 / 3)
    assert exact_match(["World"], [["Sports", "world!"]]) == 100.0  # any of several references
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
    # the release's collect_results.py: sum of min(A[N, j] - A[j, j], 0) over all N tasks, / N
    assert result["release_bwt"] == pytest.approx(((60 - 80) + (85 - 90) + 0) / 3)
    gained = op_bwt([[50.0, 0.0], [70.0, 40.0]])
    assert gained["bwt"] == pytest.approx(-20.0) and gained["release_bwt"] == 0.0  # clipped at 0
    assert math.isnan(op_bwt([[50.0]])["bwt"]) and op_bwt([[50.0]])["op"] == 50.0
    with pytest.raises(ValueError, match="square"):
        op_bwt([[1.0, 2.0]])
    with pytest.raises(ValueError, match="missing"):
        op_bwt([[1.0, float("nan")], [1.0, 2.0]])


def test_trace_metrics_by_hand():
    from moram_avalanche.benchmarks.text.metrics import TEXT_METRICS, edit_similarity, prefix_accuracy, rouge_l

    # TRACE's accuracy: the stripped prediction cut to the answer's length; empty scores 0
    assert prefix_accuracy([" A) yes", "B", ""], ["A", "C", "A"]) == pytest.approx(100 / 3)
    # ROUGE-L F1: LCS 3 of 3 predicted and 4 reference tokens -> 2 * 1 * 0.75 / 1.75
    assert rouge_l(["the cat sat"], ["the cat sat down"]) == pytest.approx(100 * 1.5 / 1.75)
    assert rouge_l(["x"], [""]) == 0.0
    assert rouge_l(["x"], ["..."]) == 0.0  # no word in the reference: 0 (the package raises)
    # fuzz.ratio is difflib's ratio in percent: 2 * 3 matches / 8 characters
    assert edit_similarity(["abcd", ""], ["abce", "x"]) == pytest.approx(75 / 2)
    assert TEXT_METRICS["exact_match"](["Good"], ["good"], sources=["ignored"]) == 100.0


def test_rouge_l_is_the_summary_level_union_lcs_over_sentences():
    from moram_avalanche.benchmarks.text.metrics import rouge_l

    # sentences split on ".": each reference sentence finds its match in either predicted sentence,
    # so swapped sentences lose nothing (one LCS over the whole texts would find 2 of 4 words)
    assert rouge_l(["d e. a b"], ["a b. d e"]) == pytest.approx(100.0, abs=1e-5)
    # reference sentences "a b x" and "d y e": union LCS 2 + 2 = 4 over 6 reference and 5 predicted
    # distinct words -> F = 2PR / (P + R)
    p, r = 4 / 5, 4 / 6
    assert rouge_l(["a b c. d e"], ["a b x. d y e"]) == pytest.approx(100 * 2 * p * r / (p + r), abs=1e-5)


def test_scienceqa_compares_the_answer_letter_only():
    from moram_avalanche.benchmarks.text.metrics import TEXT_METRICS, answer_letter_accuracy

    reference = "B\nA clause is a group of words that contains both a subject and a predicate."
    # eval_ScienceQA.py: the first character of the stripped text is the answer
    assert answer_letter_accuracy(["B\nBecause the second sentence joins two clauses."], [reference]) == 100.0
    assert answer_letter_accuracy([" B"], [reference]) == 100.0
    assert answer_letter_accuracy(["A\n" + reference[2:]], [reference]) == 0.0
    assert answer_letter_accuracy(["", "B"], [reference, reference]) == 50.0
    assert TEXT_METRICS["answer_letter"](["B, because"], [reference]) == 100.0


def test_option_letter_is_read_as_the_release_reads_it():
    from moram_avalanche.benchmarks.text.metrics import option_letter_accuracy
    from moram_avalanche.benchmarks.text.release_answers import option_letter

    # infer_multi_command.py postprocess_predictions: the first letter standing alone (any case)
    assert option_letter("The stance is B. hawkish", "ABC") == "B"
    assert option_letter("B.反对", "ABC") == "B"
    assert option_letter("this is a hawkish text: B", "ABC") == "A"  # the article "a" counts, as in the release
    assert option_letter("Bhawkish", "ABC") == "B"  # no letter alone: the first character that is an option
    assert option_letter("hawkish", "ABC") == "A"  # its "a", upper-cased, as in the release
    assert option_letter("dovish", "ABC") == "dovish"  # no option character at all: the text
    assert option_letter_accuracy(["Answer: C", "反对", "b"], ["C", "B", "B"]) == pytest.approx(200 / 3)
    with pytest.raises(ValueError, match="upper-case single characters"):
        option_letter("A", "ab")


def test_numglue_reads_the_last_number_or_the_boxed_answer():
    from moram_avalanche.benchmarks.text.metrics import math_accuracy

    # qwen_math_parser.py: boxed content, else the last number; numbers within 1e-4, also x100 / x0.01
    assert math_accuracy(["3 frogs have 2 eyes each, so 6 eyes."], ["6"]) == 100.0
    assert math_accuracy(["\\boxed{6.0}"], ["6"]) == 100.0
    assert math_accuracy(["\\boxed{6.5}"], ["6.50"]) == 100.0
    assert math_accuracy(["0.06"], ["6"]) == 100.0  # the reference read as a percentage
    assert math_accuracy(["x = 12"], ["12"]) == 100.0
    assert math_accuracy(["7 eyes"], ["6"]) == 0.0
    assert math_accuracy(["1,000"], ["1000"]) == 0.0  # the last number of "1,000" is "000", as in the release
    assert math_accuracy(["no idea", ""], ["6", "6"]) == 0.0


def test_py150_resolves_literal_placeholders_before_the_ratio():
    from moram_avalanche.benchmarks.text.metrics import code_similarity, edit_similarity
    from moram_avalanche.benchmarks.text.release_answers import py150_literals

    # eval_Py150.py: <NUM_LIT> -> 0, <STR_LIT> / <CHAR_LIT> dropped, <STR_LIT:x> -> x
    assert py150_literals("x = <NUM_LIT> + len ( '<STR_LIT>' ) + '<STR_LIT:/>'") == "x = 0 + len ( '' ) + '/'"
    assert code_similarity(["print ( '<STR_LIT:hi>' )"], ["print ( 'hi' )"]) == 100.0
    assert edit_similarity(["print ( '<STR_LIT:hi>' )"], ["print ( 'hi' )"]) < 100.0
    assert code_similarity(["<STR_LIT>"], ["abc"]) == 0.0  # empty after the rule: 0


def test_sari_matches_the_reference_value():
    from moram_avalanche.benchmarks.text.metrics import TEXT_METRICS, sari, tokenize_13a

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
