"""LanguageModel.sample: n continuations per prompt for pass@k, repeatable under a seed."""

import pytest
import torch

from moram_avalanche.models.language_model import LanguageModel
from tiny_stream import FAMILIES, stream_tokenizer


@pytest.mark.parametrize("family", ["llama", "t5"])
def test_sample_gives_n_continuations_per_prompt_repeatably(family):
    tokenizer = stream_tokenizer()
    model = LanguageModel(FAMILIES[family](tokenizer, seed=0), tokenizer)
    prompts = ["red green", "blue"]
    torch.manual_seed(3)
    first = model.sample(prompts, 5, max_new_tokens=3, temperature=1.0)
    torch.manual_seed(3)
    again = model.sample(prompts, 5, max_new_tokens=3, temperature=1.0)
    assert first == again and [len(texts) for texts in first] == [5, 5]
    assert all(isinstance(text, str) for texts in first for text in texts)
    assert len({text for texts in first for text in texts}) > 1  # sampled, not one greedy answer
    with pytest.raises(ValueError, match="positive integer"):
        model.sample(prompts, 0)
    with pytest.raises(ValueError, match="temperature > 0"):
        model.sample(prompts, 2, temperature=0.0)
