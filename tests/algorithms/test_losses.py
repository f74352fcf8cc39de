"""The training loss and the learning-rate schedule against hand computations."""

import math

import pytest
import torch
import torch.nn.functional as F

from moram_avalanche.algorithms.losses import clip_continual_loss
from moram_avalanche.algorithms.schedules import cosine_lr_factor


def unit(rows):
    return F.normalize(torch.tensor(rows, dtype=torch.float64), dim=-1)


def log_softmax(values):
    top = max(values)
    total = sum(math.exp(v - top) for v in values)
    return [v - top - math.log(total) for v in values]


def hand_loss(image, current, seen, labels, scale, text_to_image):
    """Loops over the batch and the classes; seen columns masked as in the release."""
    every = seen + current
    offset = len(seen)
    def dot(a, b):
        return sum(x * y for x, y in zip(a, b))

    i2t = 0.0
    for b, f in enumerate(image):
        logits = [scale * dot(f, e) for e in current]  # -inf seen columns drop out of the softmax
        i2t -= log_softmax(logits)[labels[b]]
    i2t /= len(image)
    if not text_to_image:
        return i2t
    t2i = 0.0
    for c, e in enumerate(every):
        logp = log_softmax([scale * dot(e, f) for f in image])
        t2i -= sum(lp for b, lp in enumerate(logp) if labels[b] + offset == c)
    return i2t + t2i / len(every)


IMAGE = [[1.0, 0.2, 0.0], [0.1, 1.0, 0.3], [0.0, 0.4, 1.0], [0.9, 0.0, 0.5]]
CURRENT = [[1.0, 0.0, 0.1], [0.0, 1.0, 0.0], [0.2, 0.1, 1.0]]
SEEN = [[0.5, 0.5, 0.0], [0.0, 0.3, 0.7]]
LABELS = [0, 1, 2, 0]  # class 0 twice: a row with two positives


@pytest.mark.parametrize("with_seen", [True, False])
@pytest.mark.parametrize("text_to_image", [True, False])
def test_loss_matches_a_hand_computation(with_seen, text_to_image):
    image, current = unit(IMAGE), unit(CURRENT)
    seen = unit(SEEN) if with_seen else None
    scale = 10.0
    got = clip_continual_loss(image, current, seen, torch.tensor(LABELS), torch.tensor(scale),
                              text_to_image=text_to_image)
    expected = hand_loss(image.tolist(), current.tolist(), seen.tolist() if with_seen else [],
                         LABELS, scale, text_to_image)
    assert got.item() == pytest.approx(expected, rel=1e-10)


def test_image_to_text_term_equals_the_release_masked_formulation():
    image, current, seen = unit(IMAGE), unit(CURRENT), unit(SEEN)
    labels = torch.tensor(LABELS)
    logits = 10.0 * image @ torch.cat([seen, current]).t()
    logits[:, : len(SEEN)] = float("-inf")
    release = F.cross_entropy(logits, labels + len(SEEN))
    ours = clip_continual_loss(image, current, seen, labels, torch.tensor(10.0), text_to_image=False)
    assert ours.item() == pytest.approx(release.item(), rel=1e-12)


def test_cosine_schedule_values():
    assert cosine_lr_factor(0, warmup=0, total=10) == 1.0
    assert cosine_lr_factor(5, warmup=0, total=10) == pytest.approx(0.5)
    assert cosine_lr_factor(9, warmup=0, total=10) == pytest.approx(0.5 * (1 + math.cos(math.pi * 0.9)))
    assert [cosine_lr_factor(s, warmup=4, total=12) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert cosine_lr_factor(8, warmup=4, total=12) == pytest.approx(0.5)
