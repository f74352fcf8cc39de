"""LanguageModel.sample's top_k and repetition_penalty (LFPT5's pseudo-sample settings)."""

import pytest
import torch

from moram_avalanche.models.language_model import Decoding, LanguageModel
from tiny_stream import FAMILIES, stream_tokenizer


@pytest.mark.parametrize("family", ["llama", "t5"])
def test_top_k_one_samples_the_greedy_answer_and_the_penalty_is_greedys(family):
    tokenizer = stream_tokenizer()
    model = LanguageModel(FAMILIES[family](tokenizer, seed=0), tokenizer, compile_generation=False)
    prompts = ["red green", "blue"]
    greedy = model.generate(prompts, 4)
    torch.manual_seed(1)
    sampled = model.sample(prompts, 3, 4, top_k=1)
    assert [[text.strip() for text in texts] for texts in sampled] == [[answer] * 3 for answer in greedy]
    penalised = model.generate(prompts, 4, decoding=Decoding(repetition_penalty=2.5))
    torch.manual_seed(1)
    sampled = model.sample(prompts, 2, 4, top_k=1, repetition_penalty=2.5)
    assert [[text.strip() for text in texts] for texts in sampled] == [[answer] * 2 for answer in penalised]


def test_bad_sampling_options_are_refused():
    tokenizer = stream_tokenizer()
    model = LanguageModel(FAMILIES["t5"](tokenizer, seed=0), tokenizer)
    with pytest.raises(ValueError, match="top_k must be a non-negative int"):
        model.sample(["red"], 2, top_k=-1)
    with pytest.raises(ValueError, match="repetition_penalty must be a positive number"):
        model.sample(["red"], 2, repetition_penalty=0.0)
