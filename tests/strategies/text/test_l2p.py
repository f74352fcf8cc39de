"""``l2p`` (L2P on a language model): selection and pull term by hand, the chosen prompts' order,
what trains, a resumed run, bad options."""

import math
from types import SimpleNamespace

import pytest
import torch

from text_runs import benchmark, build, killed_and_resumed


def hand_pool():
    """Three prompts of two 2-d vectors; keys set by hand: e1, e2 and (e1 + e2) / sqrt 2 directions."""
    from moram_avalanche.text.prompt_pool import PromptPool

    pool = PromptPool(3, 2, 2, 2, init=torch.arange(12.0).view(3, 2, 2))
    with torch.no_grad():
        pool.keys.copy_(torch.tensor([[2.0, 0.0], [0.0, 3.0], [1.0, 1.0]]))
    return pool


def test_selection_and_pull_term_by_hand():
    pool = hand_pool()
    # row 0: tokens (1, 0) and (3, 0), then padding (9, 9) left out -> query (2, 0): cos 1, 0, 1/sqrt 2
    # row 1: tokens (0, 1), (1, 2) and (-1, 3) -> query (0, 2): cos 0, 1, 1/sqrt 2
    embeds = torch.tensor([[[1.0, 0.0], [3.0, 0.0], [9.0, 9.0]], [[0.0, 1.0], [1.0, 2.0], [-1.0, 3.0]]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    torch.testing.assert_close(pool.query(embeds, mask), torch.tensor([[2.0, 0.0], [0.0, 2.0]]))
    out, out_mask = pool(embeds, mask)
    assert pool.last_selection.tolist() == [[0, 2], [1, 2]]  # most similar first
    (pull,) = pool.pop_pulls()
    r = 1 / math.sqrt(2)
    assert pull.item() == pytest.approx(((1 + r) + (1 + r)) / 2)  # the chosen cosines, summed, / rows
    assert pool.pop_pulls() == []
    # the chosen prompts in that order, then the row's own embeddings; the mask grows by 2 x 2 ones
    w = pool.weight.detach()
    torch.testing.assert_close(out[0], torch.cat([w[0], w[2], embeds[0]]))
    torch.testing.assert_close(out[1], torch.cat([w[1], w[2], embeds[1]]))
    assert out_mask.tolist() == [[1, 1, 1, 1, 1, 1, 0], [1, 1, 1, 1, 1, 1, 1]]
    # row 0 alone: d cos(q, k) / dk = q / (|q| |k|) - cos(q, k) k / |k|^2; key 0 is aligned with q (0),
    # key 2 = (1, 1): (1, 0) / sqrt 2 - (1 / sqrt 2) (1, 1) / 2 = (1 / sqrt 2) (1/2, -1/2); key 1 not chosen
    pool(embeds[:1], mask[:1])
    pool.pop_pulls()[0].backward()
    torch.testing.assert_close(pool.keys.grad, torch.tensor([[0.0, 0.0], [0.0, 0.0], [r / 2, -r / 2]]))
    assert pool.weight.grad is None  # the prompts learn from the token loss only
    with torch.no_grad():  # no gradient: nothing recorded (evaluation)
        pool(embeds, mask)
    assert pool.pop_pulls() == []


def test_initial_prompts_are_embedding_rows_as_they_are_and_keys_their_means():
    from moram_avalanche.text.prompt_pool import PromptPool, embedding_rows_init

    table = torch.arange(40.0).view(10, 4)
    init = embedding_rows_init(table, 3, 2, torch.Generator().manual_seed(0))
    # the rows undivided: BeyonderXX/TRACE model/Dynamic_network/L2P.py:31 (convert_L2P_model copies
    # embed_tokens.weight[j] as it is since commit 2eedb15; its superseded commit f6a7aa6 divided it by 100)
    rows = init.view(6, 4)
    assert all(any(torch.equal(row, t) for t in table) for row in rows)
    superseded = embedding_rows_init(table, 3, 2, torch.Generator().manual_seed(0), divisor=100.0)
    torch.testing.assert_close(superseded * 100, init)  # prompt_init_divisor=100: 0.6's prompts
    pool = PromptPool(3, 2, 4, 1, init=init)
    torch.testing.assert_close(pool.keys.detach(), init.mean(1))


@pytest.mark.parametrize("divisor", [None, 100.0])
def test_an_initial_prompts_norm_is_its_tokens_embedding_norm(divisor):
    """TRACE's convert_L2P_model by hand (model/Dynamic_network/L2P.py:29-32): each prompt vector is
    the embedding row of a random token, so its norm is that row's norm (0.6: a hundredth of it)."""
    options = {} if divisor is None else {"prompt_init_divisor": divisor}
    torch.manual_seed(0)
    strategy, _ = build("l2p", "llama", pool_size=4, prompt_length=2, top_k=2, **options)
    table = strategy.model.model.get_input_embeddings().weight.detach().float()
    vectors = strategy.model.prefix.weight.detach().reshape(-1, table.shape[1])
    scale = divisor or 1.0  # TRACE's current code: 1
    for vector in vectors:
        distances = (table - vector * scale).norm(dim=1)
        token = int(distances.argmin())
        assert distances[token].item() <= 1e-6 * table[token].norm().item()  # a row of the table, / scale
        if scale == 1.0:
            assert torch.equal(vector, table[token])  # TRACE's: the row itself
        assert vector.norm().item() == pytest.approx(table[token].norm().item() / scale, rel=1e-6)
    mean_norm = vectors.norm(dim=1).mean().item()
    assert table.norm(dim=1).min().item() / scale <= mean_norm <= table.norm(dim=1).max().item() / scale


def test_the_plugin_subtracts_coef_times_the_pull_term():
    from moram_avalanche.strategies.text.plugins.l2p import L2PPlugin

    pool = hand_pool()
    plugin = L2PPlugin(0.5)
    strategy = SimpleNamespace(model=SimpleNamespace(prefix=pool), loss=torch.tensor(3.0))
    plugin.before_training_iteration(strategy)
    pool(torch.tensor([[[1.0, 0.0]]]), torch.ones(1, 1))  # cos 1 (key 0) and 1/sqrt 2 (key 2)
    plugin.before_backward(strategy)
    assert strategy.loss.item() == pytest.approx(3.0 - 0.5 * (1 + 1 / math.sqrt(2)))
    with pytest.raises(RuntimeError, match="needs a PromptPool"):
        plugin.before_backward(SimpleNamespace(model=SimpleNamespace(prefix=None), loss=torch.tensor(0.0)))


@pytest.mark.parametrize("family", ["t5", "llama"])
def test_only_the_pool_and_keys_train_and_the_chosen_prompts_reach_the_model(family):
    strategy, matrix = build("l2p", family, pool_size=4, prompt_length=2, top_k=2)
    lm = strategy.model
    frozen = {k: v.clone() for k, v in lm.model.state_dict().items()}
    pool = {k: v.clone() for k, v in lm.prefix.state_dict().items()}
    assert [n for n, p in lm.named_parameters() if p.requires_grad] == ["prefix.weight", "prefix.keys"]
    bench = benchmark()
    strategy.train(bench.train_stream[0])
    strategy.eval(bench.test_stream)
    assert all(torch.equal(v, frozen[k]) for k, v in lm.model.state_dict().items())
    assert not torch.equal(lm.prefix.weight, pool["weight"]) and not torch.equal(lm.prefix.keys, pool["keys"])
    assert strategy.l2p_plugin.last_term is not None and matrix.result().shape[0] == 1
    assert set(strategy.checkpoint_model_state()) == {"prefix.weight", "prefix.keys"}


def test_a_killed_run_resumes_to_the_uninterrupted_runs_matrix_and_pool(tmp_path):
    def fresh():
        torch.manual_seed(0)
        return build("l2p", "llama", pool_size=4, prompt_length=2, top_k=2)

    whole, first, resumed = killed_and_resumed(fresh, tmp_path)
    after, before = resumed.checkpoint_model_state(), whole.checkpoint_model_state()
    assert after.keys() == before.keys() and all(torch.equal(after[k], before[k]) for k in after)
    # the pool really moved between the first task and the end (the resume restored, not rebuilt, it)
    assert not torch.equal(first.model.prefix.weight, resumed.model.prefix.weight)


@pytest.mark.parametrize("options,match", [
    (dict(pool_size=0), "pool_size must be a positive int"),
    (dict(top_k=11), r"top_k \(11\) .* at most pool_size \(10\)"),
    (dict(prompt_length=-1), "prompt length must be a positive int"),
    (dict(pull_coef=-0.5), "pull_coef"),
])
def test_bad_options_are_refused_in_one_line(options, match):
    with pytest.raises(ValueError, match=match) as error:
        build("l2p", "t5", **options)
    assert "\n" not in str(error.value)


def test_a_model_with_another_prefix_is_refused():
    from moram_avalanche.models.language_model import LanguageModel
    from moram_avalanche.strategies.registry import get_strategy
    from moram_avalanche.text.soft_prompt import SoftPrompt
    from tiny_stream import FAMILIES, stream_tokenizer

    tokenizer = stream_tokenizer()
    lm = LanguageModel(FAMILIES["t5"](tokenizer), tokenizer)
    lm.prefix = SoftPrompt(2, lm.config.d_model)
    with pytest.raises(ValueError, match="other than a PromptPool"):
        get_strategy("l2p", family="text")(model=lm, tokenizer=tokenizer)
