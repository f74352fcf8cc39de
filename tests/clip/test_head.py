"""TextHead: cached embeddings and the prompt-ensemble classifier."""

import pytest
import torch
import torch.nn.functional as F

from moram_avalanche.clip.head import TextHead


def test_ensemble_is_the_renormalised_mean_of_per_template_embeddings(tiny_clip, tokenizer):
    classes = ["cat", "dog", "owl"]
    templates = ["a photo of a {}.", "a drawing of the {}.", "{} texture."]
    head = TextHead(tiny_clip, tokenizer, batch_size=4)  # 9 prompts: three encoder calls
    with torch.no_grad():
        per_template = [F.normalize(tiny_clip.encode_text(tokenizer([t.format(c) for c in classes])), dim=-1)
                        for t in templates]
    expected = F.normalize(torch.stack(per_template).mean(0), dim=-1)
    got = head.ensemble([[t.format(c) for c in classes] for t in templates])
    assert got.shape == (3, tiny_clip.text_projection.shape[1])
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)


def test_ensemble_needs_one_prompt_per_class_in_every_template(tiny_clip, tokenizer):
    with pytest.raises(ValueError, match="one prompt per class"):
        TextHead(tiny_clip, tokenizer).ensemble([["a", "b"], ["c"]])
