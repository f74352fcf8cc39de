"""The LwF / ZSCL distillation losses against hand-computed values and a naive computation."""

import math

import pytest
import torch

from moram_avalanche.algorithms.distillation import distillation, two_way_distillation


def naive_kd(teacher, student, T):
    """T^2 * mean over rows of -sum_j p_j log q_j, written out with Python floats."""
    total = 0.0
    for t_row, s_row in zip(teacher.tolist(), student.tolist()):
        t_exp = [math.exp(v / T) for v in t_row]
        p = [v / sum(t_exp) for v in t_exp]
        log_norm = math.log(sum(math.exp(v / T) for v in s_row))
        total += -sum(pj * (v / T - log_norm) for pj, v in zip(p, s_row))
    return T * T * total / len(teacher)


def test_equal_uniform_logits_give_t_squared_log_c():
    # p = q = (1/2, 1/2): CE = log 2, times T^2 = 4
    zeros = torch.zeros(3, 2)
    assert distillation(zeros, zeros, 2.0).item() == pytest.approx(4 * math.log(2))


def test_a_hand_computed_row():
    # T = 2: teacher logits (2, 0) -> p = softmax(1, 0) = (e/(e+1), 1/(e+1));
    # student logits (0, 2) -> log q = (0, 1) - log(1 + e)
    e = math.e
    p = (e / (e + 1), 1 / (e + 1))
    expected = 4 * -(p[0] * (0 - math.log(1 + e)) + p[1] * (1 - math.log(1 + e)))
    got = distillation(torch.tensor([[2.0, 0.0]]), torch.tensor([[0.0, 2.0]]), 2.0)
    assert got.item() == pytest.approx(expected)


@pytest.mark.parametrize("T", [1.0, 2.0, 3.5])
def test_distillation_matches_the_naive_computation(T):
    gen = torch.Generator().manual_seed(0)
    teacher, student = torch.randn(5, 7, generator=gen) * 4, torch.randn(5, 7, generator=gen) * 4
    assert distillation(teacher, student, T).item() == pytest.approx(naive_kd(teacher, student, T), rel=1e-5)


def test_two_way_is_rows_plus_columns_with_their_weights():
    gen = torch.Generator().manual_seed(1)
    teacher, student = torch.randn(4, 6, generator=gen) * 3, torch.randn(4, 6, generator=gen) * 3
    rows, cols = naive_kd(teacher, student, 2.0), naive_kd(teacher.t(), student.t(), 2.0)
    assert rows != pytest.approx(cols)  # the two directions differ: the test can tell them apart
    assert two_way_distillation(teacher, student).item() == pytest.approx(rows + cols, rel=1e-5)
    weighted = two_way_distillation(teacher, student, image_weight=0.5, text_weight=3.0)
    assert weighted.item() == pytest.approx(0.5 * rows + 3.0 * cols, rel=1e-5)
    assert two_way_distillation(teacher, student, text_weight=0.0).item() == pytest.approx(rows, rel=1e-5)


def test_only_the_student_gets_a_gradient_and_it_vanishes_at_the_teacher():
    teacher = torch.randn(3, 4, requires_grad=True)
    student = teacher.detach().clone().requires_grad_(True)
    two_way_distillation(teacher, student).backward()
    assert teacher.grad is None
    assert student.grad.abs().max().item() < 1e-6  # student == teacher is the minimum
    moved = (teacher.detach() + torch.randn(3, 4)).requires_grad_(True)
    two_way_distillation(teacher, moved).backward()
    assert moved.grad.abs().max().item() > 1e-3


def test_shape_mismatch_is_refused():
    with pytest.raises(ValueError, match="of one shape"):
        distillation(torch.zeros(2, 3), torch.zeros(3, 2))
