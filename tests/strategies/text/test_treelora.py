"""``treelora`` (TRACE's TreeLoRA row): the tree, the search and the regulariser by hand, a step of
the plugin by hand, what trains, a resumed run, bad options."""

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from tiny_stream import FAMILIES, TASKS, stream_tokenizer

FAST = dict(train_mb_size=4, iterations=2, lr=1e-2, max_new_tokens=2)


def bench():
    from moram_avalanche.benchmarks import synthetic_text

    return synthetic_text(TASKS, train_per_label=2, test_per_label=1)


def build(family="llama", plugins=None, **options):
    from avalanche.training.plugins import EvaluationPlugin

    from moram_avalanche.experiments.metrics import AccuracyMatrix
    from moram_avalanche.strategies.registry import get_strategy

    tokenizer = stream_tokenizer()
    torch.manual_seed(0)
    matrix = AccuracyMatrix()
    strategy = get_strategy("treelora", family="text")(model=FAMILIES[family](tokenizer, seed=0), tokenizer=tokenizer,
                                                      plugins=plugins, evaluator=EvaluationPlugin(matrix, loggers=[]),
                                                      **{**FAST, **options})
    return strategy, matrix


def hand_rows():
    """Three tasks, two depths, two numbers each (row i = task i)."""
    d0 = torch.tensor([[1.0, 0.0], [1.0, 1.0], [4.0, 1.0]])  # differences: [1,0], [0,1], [3,0]
    d1 = torch.tensor([[0.0, 1.0], [0.0, 1.0], [2.0, 1.0]])  # differences: [0,1], [0,0], [2,0]
    return [d0, d1]


def test_the_tree_by_hand_median_split_then_the_halves_fallback():
    from moram_avalanche.algorithms.treelora import build_tree, leaves, task_differences

    diffs = task_differences(hand_rows())
    torch.testing.assert_close(diffs[0], torch.tensor([[1.0, 0.0], [0.0, 1.0], [3.0, 0.0]]))
    root = build_tree(diffs)
    # depth 0: mean (4/3, 1/3); similarities 4/3, 1/3, 4; median 4/3 -> left {0, 2} (>=), right {1}
    torch.testing.assert_close(root.mean, torch.tensor([4 / 3, 1 / 3]))
    assert root.median == pytest.approx(4 / 3)
    assert root.left.tasks == [0, 2] and root.right.tasks == [1] and root.right.is_leaf
    # depth 1 on {0, 2}: rows (0,1), (2,0), mean (1, 0.5), similarities 0.5, 2; the lower median 0.5 puts
    # both left, so the code's fallback halves the list
    assert root.left.median == pytest.approx(0.5)
    assert root.left.left.tasks == [0] and root.left.right.tasks == [2]
    assert leaves(root) == [[0], [2], [1]]


@pytest.mark.parametrize("tasks,depths", [(2, 1), (5, 3), (8, 4), (8, 2)])
def test_the_leaves_partition_the_tasks_and_are_single_tasks_when_the_depth_allows(tasks, depths):
    from moram_avalanche.algorithms.treelora import build_tree, leaves

    generator = torch.Generator().manual_seed(tasks * 10 + depths)
    rows = [torch.randn(tasks, 3, generator=generator) for _ in range(depths)]
    found = leaves(build_tree(rows))
    assert sorted(t for leaf in found for t in leaf) == list(range(tasks))  # each task in one leaf
    if 2 ** depths >= tasks:  # every split is strict: depth d holds at most ceil(tasks / 2^d) tasks
        assert all(len(leaf) == 1 for leaf in found)


def test_the_scores_by_hand():
    from moram_avalanche.algorithms.treelora import lcb_scores

    sums, counts = torch.tensor([[-2.0], [-6.0], [0.0]]), torch.tensor([[1.0], [2.0], [0.0]])
    scores = lcb_scores(sums, counts, total=2, step=0)
    c = math.sqrt(math.log(2 * 2 * 1 * 2))
    raw = [2 + c / math.sqrt(2 + 1e-5), 3 + c / math.sqrt(4 + 1e-5), 0 + c / math.sqrt(1e-5)]  # mean distance + bonus
    expected = [v + min(raw) for v in raw]
    torch.testing.assert_close(scores[:, 0], torch.tensor(expected))
    assert int(scores[:, 0].argmax()) == 2  # an arm never drawn has the largest bonus


def test_with_equal_counts_the_code_favours_the_more_distant_task():
    """Read from the code (kept): the score is the mean L1 distance plus the bonus, so once every arm
    was drawn equally often the farther earlier task is the likelier draw."""
    from moram_avalanche.algorithms.treelora import lcb_scores, tree_search

    counts = torch.full((2, 1), 50.0)
    sums = torch.tensor([[-1.0], [-5.0]]) * counts  # mean distances 1 (task 0) and 5 (task 1)
    choice, _, p = tree_search(lcb_scores(sums, counts, total=100, step=99), None, mode="greedy")
    assert choice.tolist() == [1] and float(p[1, 0]) > float(p[0, 0])


def hand_tree(left_median):
    from moram_avalanche.algorithms.treelora import TreeNode

    root = TreeNode([0, 1, 2], 0, median=0.0)
    root.left = TreeNode([0, 1], 1, median=left_median)
    root.left.left, root.left.right = TreeNode([0], 2), TreeNode([1], 2)
    root.right = TreeNode([2], 1)
    return root


def test_the_search_by_hand_the_tree_group_flips_a_depth():
    from moram_avalanche.algorithms.treelora import tree_search

    scores = torch.tensor([[0.9, 0.0], [0.0, 3.0], [1.0, 1.0]])  # task sums 0.9, 3, 2: the first draw is task 1
    choice, first, p = tree_search(scores, hand_tree(1.2), mode="greedy")
    # task 1's side {0, 1} is scaled by min(1.2, 1.5): task 0 at depth 0 goes 0.9 -> 1.08 > task 2's 1.0
    scaled = torch.tensor([[1.08, 0.0], [0.0, 3.6], [1.0, 1.0]]) / (3.6 + 1e-5)
    assert first == 1 and choice.tolist() == [0, 1]
    torch.testing.assert_close(p, torch.softmax(scaled, dim=0))
    plain, _, _ = tree_search(scores, None, mode="greedy")  # no tree: task 2 at depth 0
    assert plain.tolist() == [2, 1]
    _, _, capped = tree_search(scores, hand_tree(4.0), mode="greedy")  # the factor is capped at 1.5
    torch.testing.assert_close(capped, torch.softmax(torch.tensor([[1.35, 0.0], [0.0, 4.5], [1.0, 1.0]]) / (4.5 + 1e-5), 0))


def test_the_sampled_search_draws_by_its_probabilities():
    from moram_avalanche.algorithms.treelora import tree_search

    scores = torch.tensor([[0.0, 1.0], [0.5, 0.0]])
    counts = torch.zeros(2, 2)
    generator = torch.Generator().manual_seed(0)
    for _ in range(4000):
        choice, _, p = tree_search(scores, None, generator)
        counts[choice, torch.arange(2)] += 1
    torch.testing.assert_close(counts / 4000, p, atol=0.03, rtol=0)
    with pytest.raises(ValueError, match="search must be one of"):
        tree_search(scores, None, mode="best")


def test_the_regulariser_value_and_gradient_by_hand():
    from moram_avalanche.algorithms.treelora import tree_loss

    a0 = torch.tensor([[1.0, 1.0]], requires_grad=True)
    a1 = torch.tensor([[2.0, 0.0]], requires_grad=True)
    stored = [torch.tensor([[2.0, 0.0], [5.0, 5.0]]), torch.tensor([[0.0, 2.0], [1.0, 0.0]])]
    loss = torch.tensor(4.0)
    term = tree_loss([a0, a1], stored, torch.tensor([0, 1]), loss, coef=0.25)
    r = -((1 * 2 + 1 * 0) + (2 * 1 + 0 * 0))  # -4: task 0 at depth 0, task 1 at depth 1
    assert float(term.detach()) == pytest.approx(r / (r + 1e-5) * 4 * 0.25)
    (-term).backward()  # the loss becomes loss - term
    # d(-term)/dA_d = -coef * loss / (R + 1e-5) * dR/dA_d = coef * loss / (R + 1e-5) * G_d
    torch.testing.assert_close(a0.grad, 1.0 / (r + 1e-5) * torch.tensor([[2.0, 0.0]]))
    torch.testing.assert_close(a1.grad, 1.0 / (r + 1e-5) * torch.tensor([[1.0, 0.0]]))


def lora_model():
    from moram_avalanche.layers.lora import LoRALinear

    model = torch.nn.Sequential(LoRALinear(torch.nn.Linear(2, 1), 1), LoRALinear(torch.nn.Linear(2, 1), 1))
    return model


def set_downs(model, *rows):
    with torch.no_grad():
        for layer, row in zip(model, rows):
            layer.down.copy_(torch.tensor([row]))


def test_a_step_of_the_plugin_by_hand():
    from moram_avalanche.strategies.text.plugins.treelora import TreeLoRAPlugin

    model, plugin = lora_model(), TreeLoRAPlugin(reg=0.5, search="greedy", seed=0)
    strategy = SimpleNamespace(model=model, dataloader=[None, None], loss=None)  # T = 2 minibatches per epoch
    set_downs(model, [1.0, 0.0], [0.0, 1.0])
    plugin.before_training_exp(strategy)
    plugin.before_training_epoch(strategy)
    for _ in range(2):
        strategy.loss = torch.tensor(3.0, requires_grad=True)
        plugin.before_backward(strategy)
        assert plugin.last == {}  # task 0: nothing to compare with, the loss unchanged
    plugin.after_training_exp(strategy)
    # L / T * (A + A) with L = 2 depths, T = 2: twice A
    torch.testing.assert_close(plugin.stored[0], torch.tensor([[2.0, 0.0]]))
    torch.testing.assert_close(plugin.stored[1], torch.tensor([[0.0, 2.0]]))
    assert plugin.tree.is_leaf and plugin.tree.tasks == [0]

    set_downs(model, [1.0, 1.0], [2.0, 0.0])
    plugin.before_training_exp(strategy)
    plugin.before_training_epoch(strategy)
    strategy.loss = torch.tensor(4.0, requires_grad=True)
    plugin.before_backward(strategy)  # step 0: reg_t = 0, so the term is 0
    assert plugin.last["choice"] == [0, 0] and plugin.last["term"] == 0.0
    # accumulation (1,1), (2,0); distances to task 0's (2,0), (0,2): 2 and 4
    torch.testing.assert_close(plugin.sums, torch.tensor([[-2.0, -4.0]]))
    loss = torch.tensor(4.0, requires_grad=True)
    strategy.loss = loss
    plugin.before_backward(strategy)  # step 1: reg_t = 0.5 * 1 / 2
    r = -(1 * 2 + 0 * 2)  # -<(1,1), (2,0)> - <(2,0), (0,2)> = -2
    assert plugin.last["term"] == pytest.approx(r / (r + 1e-5) * 4 * 0.25)
    assert float(strategy.loss.detach()) == pytest.approx(4 - 4 * 0.25 * r / (r + 1e-5))
    torch.testing.assert_close(plugin.sums, torch.tensor([[-4.0, -10.0]]))  # + |(2,2)-(2,0)|, |(4,0)-(0,2)|
    torch.testing.assert_close(plugin.counts, torch.tensor([[2.0, 2.0]]))
    strategy.loss.backward()
    torch.testing.assert_close(loss.grad, torch.tensor(1.0))  # the term's loss factor is detached
    c = 0.25 * 4 / (r + 1e-5)
    torch.testing.assert_close(model[0].down.grad, c * torch.tensor([[2.0, 0.0]]))
    torch.testing.assert_close(model[1].down.grad, c * torch.tensor([[0.0, 2.0]]))
    assert model[0].up.grad is None and model[0].base.weight.grad is None


def test_reg_zero_is_seqlora_and_stores_nothing():
    from moram_avalanche.strategies.text.plugins.treelora import TreeLoRAPlugin

    model, plugin = lora_model(), TreeLoRAPlugin(reg=0)
    strategy = SimpleNamespace(model=model, dataloader=[None], loss=torch.tensor(1.0))
    plugin.before_training_epoch(strategy)
    plugin.before_backward(strategy)
    plugin.after_training_exp(strategy)
    assert plugin.stored is None and plugin.tree is None and float(strategy.loss) == 1.0


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_three_tasks_only_the_lora_trains_and_the_tree_covers_the_tasks(family):
    from moram_avalanche.algorithms.treelora import leaves
    from moram_avalanche.layers.base import find_layers
    from moram_avalanche.layers.lora import LoRALinear

    strategy, matrix = build(family)
    model = strategy.model
    trainable = sorted(n for n, p in model.named_parameters() if p.requires_grad)
    layers = find_layers(model, LoRALinear)
    assert trainable and all(n.endswith((".down", ".up")) for n in trainable) and len(trainable) == 2 * len(layers)
    frozen = {n: p.detach().clone() for n, p in model.named_parameters() if not p.requires_grad}
    downs = {n: p.detach().clone() for n, p in model.named_parameters() if n.endswith(".down")}
    stream = bench()
    for experience in stream.train_stream:
        strategy.train(experience)
        strategy.eval(stream.test_stream)
    plugin = strategy.treelora_plugin
    assert all(torch.equal(p, frozen[n]) for n, p in model.named_parameters() if n in frozen)
    assert any(not torch.equal(p, downs[n]) for n, p in model.named_parameters() if n in downs)
    assert len(plugin.stored) == len(layers) and all(s.shape[0] == 3 for s in plugin.stored)
    assert sorted(t for leaf in leaves(plugin.tree) for t in leaf) == [0, 1, 2]
    assert len(plugin.last["choice"]) == len(layers) and all(0 <= j < 2 for j in plugin.last["choice"])
    assert matrix.result().shape == (3, 3) and not np.isnan(matrix.result()).any()


def test_a_killed_run_resumes_to_the_uninterrupted_runs_matrix_store_and_weights(tmp_path):
    from moram_avalanche.experiments.metrics import AccuracyMatrix
    from moram_avalanche.experiments.runner import run_stream

    whole, matrix = build()
    run_stream(whole, bench(), tmp_path / "whole", progress=False)
    first, _ = build()
    assert run_stream(first, bench(), tmp_path / "killed", max_experiences=1, progress=False) == 1
    assert first.treelora_plugin.tasks_done == 1
    resumed, _ = build()  # a new process
    assert run_stream(resumed, bench(), tmp_path / "killed", progress=False) == 3
    resumed_matrix = next(m for m in resumed.evaluator.metrics if isinstance(m, AccuracyMatrix))
    np.testing.assert_array_equal(resumed_matrix.result(), matrix.result())
    for a, b in zip(resumed.treelora_plugin.stored, whole.treelora_plugin.stored):
        torch.testing.assert_close(a, b, atol=0, rtol=0)
    assert resumed.treelora_plugin.last == whole.treelora_plugin.last
    after, before = resumed.model.state_dict(), whole.model.state_dict()
    assert all(torch.equal(after[k], before[k]) for k in before)


@pytest.mark.parametrize("option,value,match", [("reg", -1, "reg"), ("reg", "0.5", "reg"),
                                                ("search", "best", "search must be one of"),
                                                ("seed", -3, "seed")])
def test_bad_options_are_refused_in_one_line(option, value, match):
    with pytest.raises((ValueError, TypeError)) as error:
        build(**{option: value})
    assert match in str(error.value) and "\n" not in str(error.value)
