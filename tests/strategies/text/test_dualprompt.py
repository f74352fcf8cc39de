"""``dualprompt`` (DualPrompt at the input of a language model): the prompts' order, the task's
E-prompt in training and the best key's in evaluation by hand, the matching term, what trains, a
resumed run, bad options."""

import math
from types import SimpleNamespace

import pytest
import torch

from text_runs import benchmark, build, killed_and_resumed


def hand_prefix():
    """G-prompt of 1 vector, three E-prompts of 2 vectors in 2-d; keys e1, e2, (1, 1)."""
    from moram_avalanche.text.dual_prompt import DualPromptPrefix

    return DualPromptPrefix(3, 1, 2, 2, g_init=torch.tensor([[9.0, 9.0]]), e_init=torch.arange(12.0).view(3, 2, 2),
                            keys=torch.tensor([[2.0, 0.0], [0.0, 3.0], [1.0, 1.0]]))


def test_training_uses_the_tasks_e_prompt_and_records_one_minus_its_cosine():
    prefix = hand_prefix().train()
    prefix.task = 1
    embeds = torch.tensor([[[2.0, 0.0], [5.0, 5.0]], [[1.0, 1.0], [3.0, 3.0]]])  # row 0: padding after one token
    mask = torch.tensor([[1, 0], [1, 1]])
    out, out_mask = prefix(embeds, mask)
    e, g = prefix.e_prompts.detach(), prefix.g_prompt.detach()
    for row in range(2):  # [E-prompt of task 1; G-prompt; the row]
        torch.testing.assert_close(out[row], torch.cat([e[1], g, embeds[row]]))
    assert out_mask.tolist() == [[1, 1, 1, 1, 0], [1, 1, 1, 1, 1]]
    (term,) = prefix.pop_matches()
    # queries (2, 0) and (2, 2); key 1 = (0, 3): cosines 0 and 1 / sqrt 2 -> mean of 1 - cos
    assert term.item() == pytest.approx(((1 - 0) + (1 - 1 / math.sqrt(2))) / 2)
    term.backward()
    assert prefix.keys.grad[[0, 2]].abs().sum() == 0 and prefix.keys.grad[1].abs().sum() > 0


def test_evaluation_takes_the_best_key_among_the_trained_tasks():
    prefix = hand_prefix().eval()
    embeds = torch.tensor([[[0.0, 1.0]], [[1.0, 0.1]], [[1.0, 1.0]]])
    mask = torch.ones(3, 1)
    with pytest.raises(RuntimeError, match="none is trained yet"):
        prefix(embeds, mask)
    prefix.seen.fill_(2)  # tasks 0 and 1 trained: key 2 is not a candidate
    with torch.no_grad():
        out, _ = prefix(embeds, mask)
    assert prefix.last_selection.tolist() == [1, 0, 0]  # (1, 1) is nearer key 0 than key 1 (a tie goes first)
    torch.testing.assert_close(out[0, :2], prefix.e_prompts.detach()[1])
    prefix.seen.fill_(3)
    with torch.no_grad():
        prefix(embeds, mask)
    assert prefix.last_selection.tolist() == [1, 0, 2] and prefix.pop_matches() == []
    prefix.seen.fill_(0)
    prefix.task = 0  # an evaluation while the first task trains: its own E-prompt is the only candidate
    with torch.no_grad():
        prefix(embeds, mask)
    assert prefix.last_selection.tolist() == [0, 0, 0]


def test_the_plugin_points_each_experience_at_its_e_prompt_and_adds_the_term():
    from moram_avalanche.strategies.text.plugins.dualprompt import DualPromptPlugin

    prefix, plugin = hand_prefix().train(), DualPromptPlugin(0.5)
    strategy = SimpleNamespace(model=SimpleNamespace(prefix=prefix), loss=torch.tensor(2.0),
                               experience=SimpleNamespace(current_experience=2))
    plugin.before_training_exp(strategy)
    assert prefix.task == 2
    plugin.before_training_iteration(strategy)
    prefix(torch.tensor([[[1.0, 1.0]]]), torch.ones(1, 1))  # query parallel to key 2: 1 - cos = 0
    prefix(torch.tensor([[[1.0, 0.0]]]), torch.ones(1, 1))  # 1 - 1 / sqrt 2
    plugin.before_backward(strategy)
    assert strategy.loss.item() == pytest.approx(2.0 + 0.5 * (0 + 1 - 1 / math.sqrt(2)) / 2)
    plugin.after_training_exp(strategy)
    assert int(prefix.seen) == 3 and prefix.task is None
    strategy.experience.current_experience = 3
    with pytest.raises(ValueError, match="holds 3 E-prompts"):
        plugin.before_training_exp(strategy)


@pytest.mark.parametrize("family", ["t5", "llama"])
def test_only_the_prompts_and_keys_train(family):
    strategy, matrix = build("dualprompt", family, pool_size=3, g_length=1, e_length=2)
    lm = strategy.model
    frozen = {k: v.clone() for k, v in lm.model.state_dict().items()}
    before = {k: v.clone() for k, v in lm.prefix.state_dict().items()}
    assert [n for n, p in lm.named_parameters() if p.requires_grad] == ["prefix.g_prompt", "prefix.e_prompts",
                                                                         "prefix.keys"]
    bench = benchmark()
    strategy.train(bench.train_stream[0])
    strategy.eval(bench.test_stream)
    assert all(torch.equal(v, frozen[k]) for k, v in lm.model.state_dict().items())
    after = lm.prefix.state_dict()
    assert not torch.equal(after["e_prompts"][0], before["e_prompts"][0])
    assert torch.equal(after["e_prompts"][1:], before["e_prompts"][1:])  # the other tasks' E-prompts wait
    assert not torch.equal(after["g_prompt"], before["g_prompt"]) and int(after["seen"]) == 1
    assert set(strategy.checkpoint_model_state()) == {"prefix.g_prompt", "prefix.e_prompts", "prefix.keys",
                                                      "prefix.seen"}


def test_a_killed_run_resumes_to_the_uninterrupted_runs_matrix_and_prompts(tmp_path):
    def fresh():
        torch.manual_seed(0)
        return build("dualprompt", "llama", pool_size=3, g_length=1, e_length=2)

    whole, _, resumed = killed_and_resumed(fresh, tmp_path)
    after, before = resumed.checkpoint_model_state(), whole.checkpoint_model_state()
    assert after.keys() == before.keys() and all(torch.equal(after[k], before[k]) for k in after)
    assert int(resumed.model.prefix.seen) == 3


@pytest.mark.parametrize("options,match", [
    (dict(pool_size=0), "pool_size"), (dict(g_length=0), "g_length"), (dict(e_length=-2), "e_length"),
    (dict(match_coef=-1), "match_coef"),
])
def test_bad_options_are_refused_in_one_line(options, match):
    with pytest.raises(ValueError, match=match) as error:
        build("dualprompt", "t5", **options)
    assert "\n" not in str(error.value)


def test_a_pool_smaller_than_the_streams_tasks_is_refused_against_the_stream():
    """Issue 46: the default pool of 10 on a 15-task stream was refused only at task 11, after ten
    tasks trained; it is refused when the options are checked against the stream."""
    from moram_avalanche.strategies.registry import get_strategy

    cls = get_strategy("dualprompt", family="text")
    fifteen = SimpleNamespace(train_stream=[object()] * 15)
    with pytest.raises(ValueError, match=r"pool_size 10 holds fewer E-prompts than the stream has tasks \(15\)"
                                         r".*task 11 would find none: give pool_size=15 or more") as error:
        cls.check_benchmark({}, fifteen)  # TreeLoRA's default pool
    assert "\n" not in str(error.value)
    with pytest.raises(ValueError, match="pool_size 14 "):
        cls.check_benchmark({"pool_size": 14}, fifteen)
    cls.check_benchmark({"pool_size": 15}, fifteen)  # one E-prompt per task: enough
    cls.check_benchmark({"pool_size": 3}, benchmark())  # the three tasks of the tiny stream
