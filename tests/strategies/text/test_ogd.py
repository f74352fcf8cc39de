"""``ogd`` (TRACE's OGD row): both projections by hand (TRACE's per LoRA parameter, the paper's
whole), what each task adds (TRACE's last step), the LoRA it trains, the basis per task, a
resumed run, bad options."""

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from avalanche.core import SupervisedPlugin

from text_runs import assert_same_run_states
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
    """The paper's projection (Eq. 5; 0.6's, ``projection="whole"``): the whole gradient at once."""
    from moram_avalanche.strategies.text.plugins.ogd import OGDPlugin

    model, plugin = Tiny(), OGDPlugin(projection="whole")
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


def training_task(model, plugin, index=1, tasks=3):
    """``plugin`` told that task ``index`` of ``tasks`` starts training ``model`` on the CPU."""
    experience = SimpleNamespace(current_experience=index, tasks=[f"task{i}" for i in range(tasks)])
    plugin.before_training_exp(SimpleNamespace(model=model, device="cpu", experience=experience))
    return experience


def backward(model, a, b):
    """A backward pass whose gradient is ``(a_0, a_1, b)``: the loss is linear in the parameters."""
    ((model.a * torch.tensor(a)).sum() + (model.b * torch.tensor([b])).sum()).backward()


def test_traces_projection_takes_each_parameter_on_its_own_rows_of_the_basis_by_hand():
    """TRACE's ``project_vec`` (BeyonderXX/TRACE model/Regular/OGD.py:53-71), a hook on each LoRA
    parameter (OGD.py:169-171): g_p - B_p^T B_p g_p with B_p the parameter's own columns."""
    from moram_avalanche.algorithms.ogd import project_each, project_out
    from moram_avalanche.strategies.text.plugins.ogd import OGDPlugin

    model, plugin = Tiny(), OGDPlugin()  # projection="per-parameter": TRACE's, the default
    r = 1 / math.sqrt(2)
    basis = torch.tensor([[1.0, 0.0, 0.0], [0.0, r, r]])  # u1, u2: orthonormal as whole rows
    plugin.basis = basis
    training_task(model, plugin)
    backward(model, (1.0, 2.0), 3.0)  # g = (1, 2, 3)
    # a: B_a = [[1, 0], [0, r]]: B_a g_a = (1, 2r), B_a^T (1, 2r) = (1, 2 r^2) = (1, 1) -> (1, 2) - (1, 1) = (0, 1)
    # b: B_b = [[0], [r]]: B_b g_b = (0, 3r), B_b^T (0, 3r) = 3 r^2 = 1.5 -> 3 - 1.5 = 1.5
    torch.testing.assert_close(model.a.grad, torch.tensor([0.0, 1.0]))
    torch.testing.assert_close(model.b.grad, torch.tensor([1.5]))
    g = torch.tensor([1.0, 2.0, 3.0])
    torch.testing.assert_close(project_each(g, basis, [2, 1]), torch.tensor([0.0, 1.0, 1.5]))
    # the paper's projection of the same gradient is (0, -0.5, 0.5): the two differ
    torch.testing.assert_close(project_out(g, basis), torch.tensor([0.0, -0.5, 0.5]))
    # not a projection: the result keeps a component along u2 (2.5 r), and a second pass changes it again
    assert basis[1].dot(torch.tensor([0.0, 1.0, 1.5])).item() == pytest.approx(2.5 * r)
    torch.testing.assert_close(project_each(torch.tensor([0.0, 1.0, 1.5]), basis, [2, 1]),
                               torch.tensor([0.0, 0.5, 0.75]))
    # the step's gradient is kept as it was applied (TRACE copies the hooked gradient: OGD.py:128-135)
    plugin.after_backward(SimpleNamespace(model=model))
    torch.testing.assert_close(plugin.last_gradients()[0], torch.tensor([0.0, 1.0, 1.5]))


def test_with_accumulation_each_minibatchs_share_is_projected_as_traces_hooks_do():
    """The hook projects each backward pass's gradient before it is added to ``.grad``:
    M g1 + M g2, not M (M g1 + g2) (M is not idempotent)."""
    from moram_avalanche.strategies.text.plugins.ogd import OGDPlugin

    model, plugin = Tiny(), OGDPlugin()
    r = 1 / math.sqrt(2)
    plugin.basis = torch.tensor([[0.0, r, r]])
    training_task(model, plugin)
    backward(model, (1.0, 2.0), 3.0)
    backward(model, (0.0, 2.0), 0.0)
    # M (x, y, z) = (x, y - y / 2, z - z / 2) per parameter: M (1, 2, 3) = (1, 1, 1.5); M (0, 2, 0) = (0, 1, 0)
    torch.testing.assert_close(model.a.grad, torch.tensor([1.0, 2.0]))
    torch.testing.assert_close(model.b.grad, torch.tensor([1.5]))
    plugin.after_training_exp(SimpleNamespace(model=model, experience=SimpleNamespace(current_experience=2,
                                                                                    tasks=["x", "y", "z"])))
    backward(model, (1.0, 2.0), 3.0)  # after the task: the hooks no longer project
    torch.testing.assert_close(model.b.grad, torch.tensor([4.5]))


def test_gradients_per_task_keeps_the_tasks_last_gradients_oldest_first():
    from moram_avalanche.strategies.text.plugins.ogd import OGDPlugin

    model, plugin = Tiny(), OGDPlugin(gradients_per_task=2)
    experience = training_task(model, plugin, index=0)  # the first task: nothing to project against
    for step in range(3):
        model.zero_grad()
        backward(model, (float(step), 1.0), 0.0)
        plugin.after_backward(SimpleNamespace(model=model))
    kept = plugin.last_gradients()
    torch.testing.assert_close(torch.stack(kept), torch.tensor([[1.0, 1.0, 0.0], [2.0, 1.0, 0.0]]))
    plugin.after_training_exp(SimpleNamespace(model=model, experience=experience))
    # Gram-Schmidt by hand: u1 = (1, 1, 0) / sqrt 2; (2, 1, 0) - (3 / sqrt 2) u1 = (0.5, -0.5, 0) -> (1, -1, 0) / sqrt 2
    r = 1 / math.sqrt(2)
    torch.testing.assert_close(plugin.basis, torch.tensor([[r, r, 0.0], [r, -r, 0.0]]))
    assert plugin.added == [2]


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
    """0.6's OGD (the paper's Algorithm 1 and Eq. 5): directions="after-task", projection="whole"."""
    seen = GradientsSeen()
    strategy, _ = build(plugins=[seen], gradients_per_task=3, train_mb_size=2, directions="after-task",
                        projection="whole")
    plugin, stream = strategy.ogd_plugin, bench()  # 6, 4 and 4 examples: 3, 2 and 2 minibatches of 2
    sizes = []
    for experience in stream.train_stream:
        strategy.train(experience)
        sizes.append(plugin.basis.shape[0])
    # at most 3 per task: all a task's data holds; the last task stores none (nothing projects after it)
    assert plugin.added == [3, 2] and sizes == [3, 5, 5] and plugin.store.shape[0] == 2 * 3
    count = sum(p.numel() for p in strategy.model.parameters() if p.requires_grad)
    # the LoRA's parameters, not every weight: TRACE's OGD row trains a LoRA (BeyonderXX/TRACE
    # training/main.py:275-284) and its basis spans the parameters named lora (model/Regular/OGD.py:42-44)
    assert plugin.basis.shape[1] == count == lora_numbers(strategy.model)
    torch.testing.assert_close(plugin.basis @ plugin.basis.t(), torch.eye(5), atol=1e-5, rtol=0)
    first = [g for exp, g in seen.seen if exp == 0]
    later = [(exp, g) for exp, g in seen.seen if exp > 0]
    assert first and later and all(g.norm() > 0 for _, g in later)
    for exp, g in later:  # stepped with the part orthogonal to every earlier task's directions
        earlier = plugin.basis[:sizes[exp - 1]]
        assert float(earlier.mv(g).abs().max()) <= 1e-5 * float(g.norm())
    assert max(float(plugin.basis[:3].mv(g).abs().max()) / float(g.norm()) for g in first) > 1e-3  # task 1: raw


def lora_numbers(model):
    """How many numbers the model's LoRA layers hold (their down- and up-projections)."""
    from moram_avalanche.layers.base import find_layers
    from moram_avalanche.layers.lora import LoRALinear

    return sum(layer.down.numel() + layer.up.numel() for layer in find_layers(model, LoRALinear).values())


def test_each_task_adds_the_gradient_of_its_last_step_as_traces_code_does():
    """TRACE copies each step's (projected) gradient into one buffer and appends that same buffer at
    every step of the last epoch (model/Regular/OGD.py:134, 141-142): the list ends as copies of
    the last step's gradient, and Gram-Schmidt keeps one direction per task."""
    seen = GradientsSeen()
    strategy, _ = build(plugins=[seen], train_mb_size=2)
    plugin, stream = strategy.ogd_plugin, bench()
    for experience in stream.train_stream:
        strategy.train(experience)
    assert plugin.added == [1, 1] and plugin.basis.shape[0] == 2
    last = {exp: g for exp, g in seen.seen}  # each task's last step's gradient, as applied
    u1 = last[0] / last[0].norm()
    rest = last[1] - last[1].dot(u1) * u1  # Gram-Schmidt by hand
    torch.testing.assert_close(plugin.basis[0], u1, atol=1e-6, rtol=0)
    torch.testing.assert_close(plugin.basis[1], rest / rest.norm(), atol=1e-5, rtol=0)


def test_ogd_trains_traces_lora_on_pefts_targets_and_the_releases_on_trace():
    """TRACE's OGD row: LoraConfig(r=8, lora_alpha=32, lora_dropout=0.1) (training/main.py:275-284);
    upstream peft's default targets for LLaMA (q_proj, v_proj); on --benchmark trace the MoRAM
    release's q, k, v, o, as its own TRACE/training/main.py builds OGD's LoRA with its peft fork."""
    from moram_avalanche.experiments.text.recipes import stream_options
    from moram_avalanche.layers.base import find_layers
    from moram_avalanche.layers.lora import LoRALinear

    strategy, _ = build()
    layers = find_layers(strategy.model, LoRALinear)
    assert {name.rsplit(".", 1)[-1] for name in layers} == {"q_proj", "v_proj"}
    assert all((layer.rank, layer.scale, layer.lora_dropout.p) == (8, 32 / 8, 0.1) for layer in layers.values())
    trained = [name for name, p in strategy.model.named_parameters() if p.requires_grad]
    assert trained and all(name.endswith((".down", ".up")) for name in trained)
    targets = stream_options("trace", "ogd")["target_modules"]["llama"]
    assert targets == ["q_proj", "k_proj", "v_proj", "o_proj"]


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
    # the run state was restored (the LoRA, the basis and the matrix's own state)
    resumed_matrix = next(m for m in resumed.evaluator.metrics if isinstance(m, AccuracyMatrix))
    assert resumed_matrix.result().shape == (3, 3)
    np.testing.assert_array_equal(resumed_matrix.result(), matrix.result())
    torch.testing.assert_close(resumed.ogd_plugin.basis, whole.ogd_plugin.basis, atol=0, rtol=0)
    after, before = resumed.model.state_dict(), whole.model.state_dict()
    assert all(torch.equal(after[k], before[k]) for k in before)
    assert_same_run_states(tmp_path / "whole", tmp_path / "killed")  # the basis, the generators: every entry


@pytest.mark.parametrize("value", [0, -1, 1.5, "2", True])
def test_bad_gradients_per_task_is_refused_in_one_line(value):
    from moram_avalanche.utils.errors import UserError

    with pytest.raises(UserError if not isinstance(value, int) or isinstance(value, bool) else ValueError,
                       match=r"gradients_per_task") as error:
        build(gradients_per_task=value)
    assert "\n" not in str(error.value) and repr(value) in str(error.value)


@pytest.mark.parametrize("option,value", [("directions", "every-step"), ("projection", "full")])
def test_a_bad_choice_is_refused_in_one_line_naming_traces(option, value):
    with pytest.raises(ValueError, match=rf"{option} must be one of .*TRACE's model/Regular/OGD.py") as error:
        build(**{option: value})
    assert "\n" not in str(error.value) and repr(value) in str(error.value)


def test_a_basis_that_will_not_fit_is_refused_with_its_figures():
    from moram_avalanche.strategies.text.plugins.ogd import basis_bytes, check_basis_fits

    assert basis_bytes(1000, 7) == (7 + 3) * 1000 * 4  # the basis, the gradient, its projection, their difference
    check_basis_fits(1000, 7, 1, "cpu", available=10 ** 6)  # 36 kB: fits
    with pytest.raises(ValueError, match=r"OGD's basis \(7 past tasks x 2 gradients x 6,738,415,616 parameters") as error:
        check_basis_fits(6_738_415_616, 7, 2, "cpu", available=80 * 2 ** 30)
    assert "gradients_per_task" in str(error.value) and "\n" not in str(error.value)
    with pytest.raises(ValueError, match=r"plus the gradient being projected and the task's last 2 gradients"):
        check_basis_fits(1000, 7, 2, "cpu", available=10 ** 4, held=2)  # (14 + 2 + 3) x 4 kB = 76 kB


def test_a_change_of_trainable_parameters_between_tasks_is_refused():
    from moram_avalanche.strategies.text.plugins.ogd import OGDPlugin

    model, plugin = Tiny(), OGDPlugin()
    plugin.basis, plugin.names = torch.eye(3)[:1], ["a"]
    model.a.grad, model.b.grad = torch.ones(2), torch.ones(1)
    with pytest.raises(ValueError, match="same trainable parameters on every task"):
        plugin.after_backward(SimpleNamespace(model=model))
