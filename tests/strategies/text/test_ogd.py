"""``ogd`` (TRACE's OGD row): the projection by hand, the basis per task, a resumed run, bad options."""

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from avalanche.core import SupervisedPlugin

from tiny_stream import FAMILIES, TASKS, stream_tokenizer

FAST = dict(train_mb_size=4, iterations=2, lr=1e-2, max_new_tokens=2)


def bench():
    from moram_avalanche.benchmarks import synthetic_text

    return synthetic_text(TASKS, train_per_label=2, test_per_label=1)


def build(plugins=None, **options):
    from avalanche.training.plugins import EvaluationPlugin

    from moram_avalanche.experiments.metrics import AccuracyMatrix
    from moram_avalanche.strategies.registry import get_strategy

    tokenizer = stream_tokenizer()
    torch.manual_seed(0)
    matrix = AccuracyMatrix()
    strategy = get_strategy("ogd", family="text")(model=FAMILIES["llama"](tokenizer, seed=0), tokenizer=tokenizer,
                                                 plugins=plugins, evaluator=EvaluationPlugin(matrix, loggers=[]),
                                                 **{**FAST, **options})
    return strategy, matrix


class Tiny(torch.nn.Module):
    """Three numbers in two parameters (a: 2, b: 1), flattened in that order, plus a frozen one."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Parameter(torch.zeros(2))
        self.frozen = torch.nn.Parameter(torch.zeros(4), requires_grad=False)
        self.b = torch.nn.Parameter(torch.zeros(1))


def test_the_projected_step_is_the_hand_computed_one_and_orthogonal_to_the_basis():
    from moram_avalanche.strategies.text.plugins.ogd import OGDPlugin

    model, plugin = Tiny(), OGDPlugin()
    r = 1 / math.sqrt(2)
    plugin.basis = torch.tensor([[1.0, 0.0, 0.0], [0.0, r, r]])  # u1, u2: orthonormal
    model.a.grad, model.b.grad = torch.tensor([1.0, 2.0]), torch.tensor([3.0])  # g = (1, 2, 3)
    plugin.after_backward(SimpleNamespace(model=model))
    # g - <g,u1> u1 - <g,u2> u2 = (1,2,3) - 1 (1,0,0) - (5/sqrt 2) (0, 1/sqrt 2, 1/sqrt 2) = (0, -0.5, 0.5)
    torch.testing.assert_close(model.a.grad, torch.tensor([0.0, -0.5]))
    torch.testing.assert_close(model.b.grad, torch.tensor([0.5]))
    assert model.frozen.grad is None
    before = torch.cat([model.a.detach(), model.b.detach()]).clone()
    torch.optim.SGD([model.a, model.b], lr=0.1).step()
    step = torch.cat([model.a.detach(), model.b.detach()]) - before
    torch.testing.assert_close(step, torch.tensor([0.0, 0.05, -0.05]))
    torch.testing.assert_close(plugin.basis.mv(step), torch.zeros(2))


def test_gram_schmidt_by_hand_and_a_vector_in_the_span_adds_nothing():
    from moram_avalanche.strategies.text.plugins.ogd import extend_basis

    basis = extend_basis(None, [torch.tensor([3.0, 4.0, 0.0]), torch.tensor([1.0, 1.0, 0.0])])
    # u1 = (0.6, 0.8, 0); (1,1,0) - 1.4 u1 = (0.16, -0.12, 0), norm 0.2 -> (0.8, -0.6, 0)
    torch.testing.assert_close(basis, torch.tensor([[0.6, 0.8, 0.0], [0.8, -0.6, 0.0]]))
    same = extend_basis(basis, [torch.tensor([1.0, 2.0, 0.0]), torch.zeros(3)])
    assert same.shape == (2, 3)
    grown = extend_basis(basis, [torch.tensor([1.0, 2.0, 5.0])])
    torch.testing.assert_close(grown[2], torch.tensor([0.0, 0.0, 1.0]))


class GradientsSeen(SupervisedPlugin):
    """The flattened trainable gradients the optimizer steps with, per experience."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def before_update(self, strategy, **kwargs):
        from moram_avalanche.strategies.text.plugins.ogd import flat_grad, trainable

        params = [p for _, p in trainable(strategy.model)]
        self.seen.append((strategy.clock.train_exp_counter, flat_grad(params, "cpu")))


def test_the_basis_grows_per_task_stays_orthonormal_and_later_steps_are_orthogonal_to_it():
    seen = GradientsSeen()
    strategy, _ = build(plugins=[seen], gradients_per_task=3, train_mb_size=2)
    plugin, stream = strategy.ogd_plugin, bench()  # 6, 4 and 4 examples: 3, 2 and 2 minibatches of 2
    sizes = []
    for experience in stream.train_stream:
        strategy.train(experience)
        sizes.append(plugin.basis.shape[0])
    # at most 3 per task: all a task's data holds; the last task stores none (nothing projects after it)
    assert plugin.added == [3, 2] and sizes == [3, 5, 5] and plugin.store.shape[0] == 2 * 3
    count = sum(p.numel() for p in strategy.model.parameters() if p.requires_grad)
    assert plugin.basis.shape[1] == count == sum(p.numel() for p in strategy.model.parameters())  # every weight
    torch.testing.assert_close(plugin.basis @ plugin.basis.t(), torch.eye(5), atol=1e-5, rtol=0)
    first = [g for exp, g in seen.seen if exp == 0]
    later = [(exp, g) for exp, g in seen.seen if exp > 0]
    assert first and later and all(g.norm() > 0 for _, g in later)
    for exp, g in later:  # stepped with the part orthogonal to every earlier task's directions
        earlier = plugin.basis[:sizes[exp - 1]]
        assert float(earlier.mv(g).abs().max()) <= 1e-5 * float(g.norm())
    assert max(float(plugin.basis[:3].mv(g).abs().max()) / float(g.norm()) for g in first) > 1e-3  # task 1: raw


def test_a_killed_run_resumes_to_the_uninterrupted_runs_matrix_and_basis(tmp_path):
    from moram_avalanche.experiments.metrics import AccuracyMatrix
    from moram_avalanche.experiments.runner import run_stream

    whole, matrix = build()
    run_stream(whole, bench(), tmp_path / "whole", progress=False)
    first, _ = build()
    assert run_stream(first, bench(), tmp_path / "killed", max_experiences=1, progress=False) == 1
    assert first.ogd_plugin.basis.shape[0] == 1
    resumed, _ = build()  # a new process
    assert run_stream(resumed, bench(), tmp_path / "killed", progress=False) == 3
    # the whole strategy was restored (its evaluator with it): the matrix is the restored evaluator's
    resumed_matrix = next(m for m in resumed.evaluator.metrics if isinstance(m, AccuracyMatrix))
    assert resumed_matrix.result().shape == (3, 3)
    np.testing.assert_array_equal(resumed_matrix.result(), matrix.result())
    torch.testing.assert_close(resumed.ogd_plugin.basis, whole.ogd_plugin.basis, atol=0, rtol=0)
    after, before = resumed.model.state_dict(), whole.model.state_dict()
    assert all(torch.equal(after[k], before[k]) for k in before)


@pytest.mark.parametrize("value", [0, -1, 1.5, "2", True])
def test_bad_gradients_per_task_is_refused_in_one_line(value):
    from moram_avalanche.utils.errors import UserError

    with pytest.raises(UserError if not isinstance(value, int) or isinstance(value, bool) else ValueError,
                       match=r"gradients_per_task") as error:
        build(gradients_per_task=value)
    assert "\n" not in str(error.value) and repr(value) in str(error.value)


def test_a_basis_that_will_not_fit_is_refused_with_its_figures():
    from moram_avalanche.strategies.text.plugins.ogd import basis_bytes, check_basis_fits

    assert basis_bytes(1000, 7) == (7 + 3) * 1000 * 4  # the basis, the gradient, its projection, their difference
    check_basis_fits(1000, 7, 1, "cpu", available=10 ** 6)  # 36 kB: fits
    with pytest.raises(ValueError, match=r"OGD's basis \(7 past tasks x 2 gradients x 6,738,415,616 parameters") as error:
        check_basis_fits(6_738_415_616, 7, 2, "cpu", available=80 * 2 ** 30)
    assert "gradients_per_task" in str(error.value) and "\n" not in str(error.value)


def test_a_change_of_trainable_parameters_between_tasks_is_refused():
    from moram_avalanche.strategies.text.plugins.ogd import OGDPlugin

    model, plugin = Tiny(), OGDPlugin()
    plugin.basis, plugin.names = torch.eye(3)[:1], ["a"]
    model.a.grad, model.b.grad = torch.ones(2), torch.ones(1)
    with pytest.raises(ValueError, match="same trainable parameters on every task"):
        plugin.after_backward(SimpleNamespace(model=model))
