"""iCaRL for CLIP (the ZSCL MTIL code's): herded memory counts, distillation on exemplars, end to end."""

import warnings

import open_clip
import pytest
import torch
import torch.nn.functional as F
from avalanche.training.plugins import EvaluationPlugin

from moram_avalanche.algorithms.herding import herding_order
from moram_avalanche.benchmarks.images.synthetic import synthetic
from moram_avalanche.experiments.metrics import AccuracyMatrix
from moram_avalanche.strategies import STRATEGIES, ICaRL

warnings.filterwarnings("ignore", message="No loggers specified")


def build(model, tokenizer, **kwargs):
    return ICaRL(model=model, tokenizer=tokenizer, iterations=2, warmup=0, lr=1e-3, train_mb_size=4,
                 progress=False, evaluator=EvaluationPlugin(loggers=[]), **kwargs)


def direct_features(model, experience):
    images = experience.dataset.eval()
    x = torch.stack([images[i][0] for i in range(len(images))])
    with torch.no_grad():
        return F.normalize(model.eval().encode_image(x).float(), dim=-1)


def test_registered_with_the_code_defaults(tiny_clip, tokenizer):
    assert STRATEGIES["icarl"] is ICaRL
    strategy = ICaRL(model=tiny_clip, tokenizer=tokenizer, progress=False)
    assert strategy.memory.memory_size == 10000 and strategy.memory.max_read == 30000
    assert strategy.label_smoothing == 0.0 and strategy.warmup == 100 and strategy.iterations == 500
    assert (strategy.distillation.temperature, strategy.distillation.image_weight,
            strategy.distillation.text_weight) == (2.0, 1.0, 1.0)
    assert not strategy.distillation.previous and not strategy.distillation.shuffle


@pytest.mark.parametrize("balanced", [False, True])
def test_memory_counts_and_herding_over_three_domains(balanced, tiny_clip, tokenizer, make_stream):
    stream = make_stream("all", train_sizes=(8, 5, 3))
    strategy = build(tiny_clip, tokenizer, memory_size=6, balanced=balanced)
    entries = strategy.memory.entries
    strategy.train(stream.train_stream[0])
    assert entries == [{"experience": 0, "indices": [0, 1, 2, 3, 4, 5]}]  # first K, in order
    strategy.train(stream.train_stream[1])
    # t = 2: old domains cut to 6 // 2 = 3; the new one gets 6 - 3 = 3 (balanced: 3) by herding
    expected = herding_order(direct_features(tiny_clip, stream.train_stream[1]), 3).tolist()
    assert entries[0]["indices"] == [0, 1, 2] and entries[1] == {"experience": 1, "indices": expected}
    strategy.train(stream.train_stream[2])
    # t = 3: old cut to 6 // 3 = 2; the new gets 6 - 2 = 4 (balanced: 2), at most its 3 samples
    new = herding_order(direct_features(tiny_clip, stream.train_stream[2]), 2 if balanced else 4).tolist()
    assert [e["indices"] for e in entries] == [[0, 1], expected[:2], new]
    assert len(new) == (2 if balanced else 3)
    # the memory's images are those samples, eval transform
    images = strategy.memory.dataset(stream.train_stream[2])
    assert len(images) == len(strategy.memory) == 4 + len(new)
    assert torch.equal(images[2][0], stream.train_stream[1].dataset.eval()[expected[0]][0])


@pytest.mark.parametrize("teacher", ["zeroshot", "previous"])
def test_distillation_starts_with_the_second_domain_and_uses_the_teacher(teacher, tiny_clip, tokenizer, make_stream):
    stream = make_stream("all")
    pretrained = {k: v.clone() for k, v in tiny_clip.state_dict().items()}
    strategy = build(tiny_clip, tokenizer, memory_size=4, teacher=teacher)
    strategy.train(stream.train_stream[0])
    assert strategy.distillation.last_loss is None  # nothing distilled on the first domain
    after_first = {k: v.clone() for k, v in tiny_clip.state_dict().items()}
    seen = []
    original = strategy.distillation.before_backward

    def spy(strategy_, **kwargs):
        original(strategy_, **kwargs)
        seen.append(strategy.distillation.last_loss.detach().clone())
    strategy.distillation.before_backward = spy
    strategy.train(stream.train_stream[1])
    assert len(seen) == 2 and all(torch.isfinite(loss) and loss > 0 for loss in seen)
    want = pretrained if teacher == "zeroshot" else after_first
    teacher_state = strategy.distillation.teacher.model.state_dict()
    assert all(torch.equal(teacher_state[k], want[k]) for k in want)
    other = after_first if teacher == "zeroshot" else pretrained
    assert not all(torch.equal(teacher_state[k], other[k]) for k in other)


def test_two_experiences_of_the_synthetic_stream(tiny_clip, tokenizer):
    transform = open_clip.image_transform(32, is_train=False)
    benchmark = synthetic(("shapes", "colours"), train_size=12, test_size=12, train_transform=transform,
                          eval_transform=transform)
    metric = AccuracyMatrix()
    strategy = ICaRL(model=tiny_clip, tokenizer=tokenizer, iterations=3, warmup=1, lr=1e-4, train_mb_size=6,
                     memory_size=8, progress=False, evaluator=EvaluationPlugin(metric, loggers=[]))
    for experience in benchmark.train_stream:
        strategy.train(experience)
        strategy.eval(benchmark.test_stream)
    result = torch.as_tensor(metric.result())
    assert result.shape == (2, 2) and torch.isfinite(result).all()
    assert len(strategy.memory) == 8  # 4 + 4


def test_bad_options(tiny_clip, tokenizer):
    with pytest.raises(ValueError, match="teacher must be one of"):
        ICaRL(model=tiny_clip, tokenizer=tokenizer, teacher="ema")
    with pytest.raises(ValueError, match="memory_size"):
        ICaRL(model=tiny_clip, tokenizer=tokenizer, memory_size=0)
