"""LFPT5's model-free pieces against hand-built expectations (official code's formats and formula)."""

import math
import random

import pytest
import torch


def test_the_pseudo_sample_format_round_trips_through_the_parser():
    from moram_avalanche.algorithms.lfpt5 import generation_token, lm_target, parse_pseudo

    assert generation_token("agnews") == "__agnews__"
    assert generation_token("yahoo answers") == "__yahoo_answers__"
    # official dataset.py: text + " " + "__ans__" + " " + label
    assert lm_target("what is the topic", "sports") == "what is the topic __ans__ sports"
    assert parse_pseudo(lm_target("what is the topic", "sports"), ("sports", "world")) == ("what is the topic", "sports")
    assert parse_pseudo("a b __ans__ c", ()) == ("a b", "c")  # no label words (a generation task): any answer


@pytest.mark.parametrize("text,labels", [
    ("no separator at all", ()),                      # not two parts
    ("a __ans__ b __ans__ c", ()),                    # three parts
    (" __ans__ sports", ("sports",)),                 # empty prompt
    ("a text __ans__ ", ()),                          # empty answer
    ("a text __ans__ cooking", ("sports", "world")),  # not a label of the task
    ("a text __ans__ Sports", ("sports",)),           # labels compare exactly, as the official code's `in`
])
def test_unusable_samples_are_dropped(text, labels):
    from moram_avalanche.algorithms.lfpt5 import parse_pseudo

    assert parse_pseudo(text, labels) is None


def test_selection_keeps_per_label_of_a_random_draw_of_twice_as_many():
    from moram_avalanche.algorithms.lfpt5 import select_pseudo

    many = [(f"a{i}", "A") for i in range(7)]
    three = [(f"b{i}", "B") for i in range(3)]
    two = [(f"c{i}", "C") for i in range(2)]
    pairs = [many[0], three[0], *many[1:], *three[1:], *two]
    chosen = select_pseudo(pairs, 2, random.Random(5))
    # by hand: A has 7 > 4 -> 4 drawn by the same generator, the first 2 kept; B has 3 = 2*2-1 -> its
    # first 2; C has 2 < 3 -> its first only; labels in first-seen order
    drawn = random.Random(5).sample([p for p, _ in many], 4)
    assert chosen == [(drawn[0], "A"), (drawn[1], "A"), ("b0", "B"), ("b1", "B"), ("c0", "C")]
    assert select_pseudo(pairs, 0, random.Random(5)) == []
    assert select_pseudo([], 2, random.Random(5)) == []


def test_the_distillation_is_the_summed_kl_of_the_distributions_before_and_now():
    from moram_avalanche.algorithms.lfpt5 import kd_loss

    now = torch.tensor([[1.0, 2.0, 0.5], [0.0, -1.0, 3.0]])
    before = torch.tensor([[0.5, 0.5, 2.0], [1.0, 0.0, 0.0]])
    expected = 0.0
    for row_now, row_before in zip(now.tolist(), before.tolist()):
        zn = sum(math.exp(x) for x in row_now)
        zb = sum(math.exp(x) for x in row_before)
        for xn, xb in zip(row_now, row_before):
            p, q = math.exp(xb) / zb, math.exp(xn) / zn
            expected += p * (math.log(p) - math.log(q))  # KL(before || now), summed over rows and tokens
    assert float(kd_loss(now, before)) == pytest.approx(expected, rel=1e-6)
    assert float(kd_loss(now, now)) == pytest.approx(0.0, abs=1e-7)
    with pytest.raises(ValueError, match="same shape"):
        kd_loss(now, before[:1])


def test_the_combined_loss_is_the_official_formula():
    from moram_avalanche.algorithms.lfpt5 import KD_LAMBDA, LM_LAMBDA, combined_loss

    assert (LM_LAMBDA, KD_LAMBDA) == (0.25, 0.01)  # Classification.sh --lm_lambda 0.25 --kd_lamda 0.01
    task, lm, kd = torch.tensor(2.0), torch.tensor(4.0), torch.tensor(10.0)
    assert float(combined_loss(task, lm, kd)) == pytest.approx((2 + 0.25 * 4) * 0.99 + 0.01 * 10)  # 3.07
    assert float(combined_loss(task, lm, kd, 0.5, 0.0)) == pytest.approx(4.0)
