"""PromptStrategy, what L2P and DualPrompt share: a frozen model whose prefix trains, built from the
strategy's settings or reused when the model carries one of the same kind and shape."""

import pytest

from tiny_stream import FAMILIES, stream_tokenizer


def language_model():
    from moram_avalanche.models.language_model import LanguageModel

    tokenizer = stream_tokenizer()
    return LanguageModel(FAMILIES["t5"](tokenizer), tokenizer), tokenizer


def pool(pool_size, prompt_length, dim, top_k):
    from moram_avalanche.text.prompt_pool import PromptPool

    return PromptPool(pool_size, prompt_length, dim, top_k)


def dual(pool_size, g_length, e_length, dim):
    from moram_avalanche.text.dual_prompt import DualPromptPrefix

    return DualPromptPrefix(pool_size, g_length, e_length, dim)


CASES = [  # strategy, its options, a prefix of that shape, one of another shape, the error's shape
    ("l2p", dict(pool_size=4, prompt_length=2, top_k=2), lambda d: pool(4, 2, d, 2), lambda d: pool(4, 2, d, 1),
     "other than a PromptPool of pool_size 4, prompt_length 2, top_k 2"),
    ("dualprompt", dict(pool_size=3, g_length=1, e_length=2), lambda d: dual(3, 1, 2, d), lambda d: dual(3, 2, 2, d),
     "other than a DualPromptPrefix of pool_size 3, g_length 1, e_length 2"),
]


@pytest.mark.parametrize("name, options, same, other, message", CASES, ids=[c[0] for c in CASES])
def test_a_carried_prefix_of_the_same_shape_is_reused_and_another_refused(name, options, same, other, message):
    from moram_avalanche.strategies.registry import get_strategy

    cls = get_strategy(name, family="text")
    lm, tokenizer = language_model()
    carried = same(lm.config.d_model).requires_grad_(False)
    lm.prefix = carried
    strategy = cls(model=lm, tokenizer=tokenizer, **options)
    assert strategy.model.prefix is carried  # reused, not rebuilt
    assert all(p.requires_grad for p in carried.parameters())
    assert not any(p.requires_grad for p in strategy.model.model.parameters())
    lm, tokenizer = language_model()
    lm.prefix = other(lm.config.d_model)
    with pytest.raises(ValueError, match=message) as error:
        cls(model=lm, tokenizer=tokenizer, **options)
    assert "pass a model without a prefix" in str(error.value) and "\n" not in str(error.value)
