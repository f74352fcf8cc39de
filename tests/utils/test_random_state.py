"""Every global generator's state read, set and kept (:mod:`moram_avalanche.utils.random_state`):
the numbers drawn after a restore are those drawn after the read, and a kept block leaves no trace."""

import random

import numpy as np
import torch


def _draws():
    return torch.rand(3).tolist(), random.random(), float(np.random.rand()), float(np.random.randn())


def test_a_set_state_draws_again_what_was_drawn_after_it_was_read():
    from moram_avalanche.utils.random_state import rng_state, set_rng_state

    np.random.randn()  # a Gaussian half-drawn: NumPy keeps the other half in its state
    state = rng_state(cuda=False)
    first = _draws()
    assert _draws() != first
    set_rng_state(state)
    assert _draws() == first


def test_a_kept_block_leaves_every_generator_as_it_found_it_even_when_it_seeds():
    from moram_avalanche.utils.random_state import kept_rng_state, rng_state, set_rng_state

    state = rng_state(cuda=False)
    expected = _draws()
    set_rng_state(state)
    with kept_rng_state():
        torch.manual_seed(3)
        random.seed(3)
        np.random.seed(3)
        inside = _draws()
    assert _draws() == expected != inside


def test_growing_the_embeddings_for_new_tokens_draws_nothing_from_torchs_generator():
    from transformers import T5Config, T5ForConditionalGeneration

    from moram_avalanche.text.lfpt5_prompt import add_tokens
    from moram_avalanche.text.tiny import word_tokenizer

    tokenizer = word_tokenizer(["a b c d e f g"])
    model = T5ForConditionalGeneration(T5Config(vocab_size=len(tokenizer), d_model=8, d_ff=8, d_kv=4, num_layers=1,
                                                num_heads=2))
    state = torch.get_rng_state()
    add_tokens(model, tokenizer, ["__ans__", "__x__"])  # transformers initialises the grown rows from it
    assert model.get_input_embeddings().weight.shape[0] == len(tokenizer) == 12
    assert torch.equal(torch.get_rng_state(), state)


def test_what_a_plugin_draws_while_the_run_is_prepared_is_put_back():
    """A resumed run prepares its plugins after its checkpoint's generators are set, an uninterrupted one
    before its first experience: a draw there must leave the numbers drawn after unchanged."""
    from types import SimpleNamespace

    from moram_avalanche.experiments.runner import prepare_plugins

    class Drawing:
        def prepare_run(self, strategy):
            self.drawn = _draws()

    plugin = Drawing()
    state = torch.get_rng_state()
    prepare_plugins(SimpleNamespace(plugins=[plugin]))
    assert plugin.drawn and torch.equal(torch.get_rng_state(), state)
