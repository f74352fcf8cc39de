"""RAIL-Primal and RAIL-Dual on the shared CLIP loop: the head equals direct solutions, fusion, errors."""

import warnings

import open_clip
import pytest
import torch
import torch.nn.functional as F
from avalanche.training.plugins import EvaluationPlugin

from moram_avalanche.benchmarks.images.synthetic import synthetic
from moram_avalanche.experiments.metrics import AccuracyMatrix
from moram_avalanche.strategies import STRATEGIES, RAILDual, RAILPrimal, ZeroShot

warnings.filterwarnings("ignore", message="No loggers specified")


def quiet(metric=None, **kwargs):
    metrics = [metric] if metric is not None else []
    return dict(evaluator=EvaluationPlugin(*metrics, loggers=[]), progress=False, **kwargs)


def all_features(model, experiences):
    """Normalised image features of every training image, domain after domain (labels local:
    the "all" space's global labels less the domain's offset)."""
    xs, ys = [], []
    for experience in experiences:
        dataset = experience.dataset
        images = torch.stack([dataset[i][0] for i in range(len(dataset))])
        with torch.no_grad():
            xs.append(F.normalize(model.encode_image(images).float(), dim=-1))
        ys.append(torch.tensor([dataset[i][1] - experience.label_offset for i in range(len(dataset))]))
    return xs, ys


def global_one_hot(ys, sizes):
    total, offset, rows = sum(sizes), 0, []
    for y, size in zip(ys, sizes):
        rows.append(F.one_hot(y + offset, total).double())
        offset += size
    return torch.cat(rows)


def test_registered_by_name_and_training_free():
    assert STRATEGIES["rail-primal"] is RAILPrimal and STRATEGIES["rail-dual"] is RAILDual
    assert not RAILPrimal.needs.trains and not RAILDual.needs.trains


def test_primal_after_two_experiences_equals_the_batch_ridge_solution(tiny_clip, tokenizer, make_stream):
    stream = make_stream("all", train_sizes=(8, 7, 3))
    before = {k: v.clone() for k, v in tiny_clip.state_dict().items()}
    strategy = RAILPrimal(model=tiny_clip, tokenizer=tokenizer, hidden_dim=40, seed=3, train_mb_size=3, **quiet())
    for experience in stream.train_stream[:2]:
        strategy.train(experience)
    assert all(torch.equal(v, tiny_clip.state_dict()[k]) for k, v in before.items())  # CLIP untouched
    xs, ys = all_features(tiny_clip, stream.train_stream[:2])
    expand = strategy.head.expansion
    x = expand(torch.cat(xs)).double()
    y = global_one_hot(ys, (2, 3))
    expected = torch.linalg.solve(x.t() @ x + 0.1 * torch.eye(40, dtype=torch.float64), x.t() @ y)
    assert strategy.head.classes == 5
    assert torch.allclose(strategy.head.ridge.weight.double(), expected, atol=1e-4)
    # the same seed draws the same expansion
    again = RAILPrimal(model=open_clip.CLIP(**tiny_clip_config()), tokenizer=tokenizer, hidden_dim=40, seed=3, **quiet())
    assert torch.equal(again.head.expansion.weight, expand.weight)


def tiny_clip_config():
    from tiny_clip import TINY_CONFIG
    return TINY_CONFIG


def test_dual_after_two_experiences_equals_a_direct_kernel_ridge_solve(tiny_clip, tokenizer, make_stream):
    stream = make_stream("all", train_sizes=(8, 7, 3))
    strategy = RAILDual(model=tiny_clip, tokenizer=tokenizer, train_mb_size=4, **quiet())
    for experience in stream.train_stream[:2]:
        strategy.train(experience)
    xs, ys = all_features(tiny_clip, stream.train_stream[:2])
    x = torch.cat(xs).double()
    y = global_one_hot(ys, (2, 3))
    gram = torch.exp(-0.1 * ((x[:, None] - x[None]) ** 2).sum(-1))
    alpha = torch.linalg.solve(gram + 1e-3 * torch.eye(len(x), dtype=torch.float64), y)
    # memory order follows the shuffled loader: compare predictions, not alpha
    probe = x[:4]
    expected = torch.exp(-0.1 * ((probe[:, None] - x[None]) ** 2).sum(-1)) @ alpha
    assert torch.allclose(strategy.head.scores(probe.float()).double(), expected, atol=1e-3)
    assert strategy.head.ridge.size == 15


@pytest.mark.parametrize("label_space", ["all", "domain"])
def test_two_experiences_end_to_end_and_the_fusion_at_weight_zero_is_zero_shot(
        label_space, tokenizer, make_stream):
    results = {}
    for name, cls, kwargs in (("zeroshot", ZeroShot, {}), ("rail0", RAILPrimal, {"fusion_weight": 0.0}),
                              ("rail", RAILPrimal, {}), ("dual", RAILDual, {})):
        torch.manual_seed(0)
        model = open_clip.CLIP(**tiny_clip_config()).eval()
        if cls is RAILPrimal:
            kwargs = dict(kwargs, hidden_dim=32)
        metric = AccuracyMatrix()
        strategy = cls(model=model, tokenizer=tokenizer, **quiet(metric, **kwargs))
        stream = make_stream(label_space)
        for experience in stream.train_stream[:2]:
            strategy.train(experience)
            strategy.eval(stream.test_stream)
        results[name] = torch.as_tensor(metric.result())
    assert results["rail"].shape == (2, 3)
    assert torch.equal(results["rail0"], results["zeroshot"])
    # a domain not yet learned: in the per-domain space the fusion never applies
    if label_space == "domain":
        # the fusion always applies on learned domains, so they move away from zero-shot
        assert not torch.equal(results["rail"], results["zeroshot"])
        assert results["rail"][0, 1:].tolist() == results["zeroshot"][0, 1:].tolist()
        assert results["dual"][0, 1:].tolist() == results["zeroshot"][0, 1:].tolist()


def test_head_columns_follow_the_learned_domains(tiny_clip, tokenizer, make_stream):
    stream = make_stream("all")
    strategy = RAILPrimal(model=tiny_clip, tokenizer=tokenizer, hidden_dim=8, **quiet())
    strategy.train(stream.train_stream[0])
    assert strategy.head_columns(stream.test_stream[0]).tolist() == [0, 1, -1, -1, -1, -1, -1]
    strategy.train(stream.train_stream[1])
    assert strategy.head_columns(stream.test_stream[2]).tolist() == [0, 1, 2, 3, 4, -1, -1]
    per_domain = make_stream("domain")
    assert strategy.head_columns(per_domain.test_stream[1]).tolist() == [2, 3, 4]
    assert strategy.head_columns(per_domain.test_stream[2]).tolist() == [-1, -1]


def test_bad_options_are_refused(tiny_clip, tokenizer):
    with pytest.raises(ValueError, match="training-free"):
        RAILPrimal(model=tiny_clip, tokenizer=tokenizer, iterations=5)
    with pytest.raises(ValueError, match="fusion_weight"):
        RAILPrimal(model=tiny_clip, tokenizer=tokenizer, fusion_weight=2.0)
    with pytest.raises(ValueError, match="primal form"):
        RAILPrimal(model=tiny_clip, tokenizer=tokenizer, form="dual")
    with pytest.raises(ValueError, match="kernel"):
        RAILDual(model=tiny_clip, tokenizer=tokenizer, kernel="poly")


def test_runs_on_the_synthetic_stream(tiny_clip, tokenizer):
    transform = open_clip.image_transform(32, is_train=False)
    benchmark = synthetic(("shapes", "colours"), train_size=12, test_size=12, train_transform=transform,
                          eval_transform=transform)
    metric = AccuracyMatrix()
    strategy = RAILPrimal(model=tiny_clip, tokenizer=tokenizer, hidden_dim=64, **quiet(metric))
    for experience in benchmark.train_stream:
        strategy.train(experience)
        strategy.eval(benchmark.test_stream)
    result = torch.as_tensor(metric.result())
    assert result.shape == (2, 2) and torch.isfinite(result).all()
