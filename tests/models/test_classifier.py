"""CLIPClassifier: logits in the stream's label space, against a direct computation with the CLIP model."""

import pytest
import torch
import torch.nn.functional as F

from moram_avalanche.models import MASK_VALUE, CLIPClassifier
from tiny_clip import STREAM_CLASSES

TEMPLATES = {name: f"a {{}} from {name}." for name in STREAM_CLASSES}


def direct_logits(model, tokenizer, images, domains):
    """``exp(logit_scale) * f_img @ f_txt^T`` over the prompts of ``domains``, computed directly."""
    prompts = [TEMPLATES[d].format(c) for d in domains for c in STREAM_CLASSES[d]]
    with torch.no_grad():
        image = F.normalize(model.encode_image(images), dim=-1)
        text = F.normalize(model.encode_text(tokenizer(prompts)), dim=-1)
        return model.logit_scale.exp() * image @ text.t()


def images(count=4, seed=3):
    return torch.randn(count, 3, 32, 32, generator=torch.Generator().manual_seed(seed))


def test_all_space_scores_the_stream_seen_so_far_in_training_and_every_class_in_evaluation(
        tiny_clip, tokenizer, make_stream):
    benchmark = make_stream("all")  # classes 2 + 3 + 2
    classifier = CLIPClassifier(tiny_clip, tokenizer).train()
    classifier.adaptation(benchmark.train_stream[1])
    x = images()
    with torch.no_grad():
        out = classifier(x, torch.tensor([1, 1, 0, 1]))  # task labels are not read in this space
    assert out.shape == (4, 7)
    expected = direct_logits(tiny_clip, tokenizer, x, ["alpha", "beta"])
    assert torch.allclose(out[:, :5], expected, atol=1e-5)
    assert (out[:, 5:] == MASK_VALUE).all()  # gamma's class names are not known yet

    classifier.eval()
    classifier.adaptation(benchmark.test_stream[0])
    with torch.no_grad():
        out = classifier(x, torch.zeros(4, dtype=torch.long))
    assert torch.allclose(out, direct_logits(tiny_clip, tokenizer, x, list(STREAM_CLASSES)), atol=1e-5)


def test_domain_space_scores_each_sample_against_its_own_domain(tiny_clip, tokenizer, make_stream):
    benchmark = make_stream("domain")
    classifier = CLIPClassifier(tiny_clip, tokenizer).train()
    classifier.adaptation(benchmark.train_stream[2])
    x = images()
    tasks = torch.tensor([0, 2, 1, 2])  # a replay batch mixes domains
    with torch.no_grad():
        out = classifier(x, tasks)
    assert out.shape == (4, 3)  # the largest domain has 3 classes
    names = list(STREAM_CLASSES)
    for row, task in enumerate(tasks.tolist()):
        own = direct_logits(tiny_clip, tokenizer, x[row:row + 1], [names[task]])[0]
        assert torch.allclose(out[row, :len(own)], own, atol=1e-5)
        assert (out[row, len(own):] == MASK_VALUE).all()


def test_avalanche_calling_conventions(tiny_clip, tokenizer, make_stream):
    benchmark = make_stream("domain")
    classifier = CLIPClassifier(tiny_clip, tokenizer).train()
    with pytest.raises(RuntimeError, match="not been adapted"):
        classifier(images())
    for experience in benchmark.train_stream[:2]:
        classifier.adaptation(experience)
    x = images()
    with torch.no_grad():
        heads = classifier(x, None)  # Avalanche's "every head" (what its LwF distils)
        assert sorted(heads) == [0, 1]
        assert torch.equal(heads[0], classifier(x, 0))
        assert torch.equal(classifier(x), classifier(x, 1))  # omitted: the last adapted experience
    assert classifier.max_class_label == 3 and classifier.known_train_tasks_labels == {0, 1}


class CountingTokenizer:
    def __init__(self, tokenizer):
        self.tokenizer, self.calls = tokenizer, 0

    def __call__(self, texts):
        self.calls += 1
        return self.tokenizer(texts)


def test_text_is_cached_while_the_text_side_is_frozen_and_trained_otherwise(tiny_clip, tokenizer, make_stream):
    benchmark = make_stream("all")
    counting = CountingTokenizer(tokenizer)
    tiny_clip.requires_grad_(False)
    classifier = CLIPClassifier(tiny_clip, counting).train()
    counting.calls = 0  # the text heads probe the tokenizer once each when built
    classifier.adaptation(benchmark.train_stream[1])
    classifier(images())
    classifier(images())
    assert counting.calls == 2  # alpha's and beta's prompts, once

    tiny_clip.token_embedding.requires_grad_(True)  # the text side trains
    classifier(images()).sum().backward()
    classifier(images())
    assert counting.calls == 6  # embedded again at every training forward
    assert tiny_clip.token_embedding.weight.grad is not None
    with torch.no_grad():  # no gradient: the cache, refilled
        classifier(images())
        classifier(images())
    assert counting.calls == 8
