"""The WiSE-FT / weight-ensembling / L2 plugins in a run, against weights recorded step by step."""

import pytest
import torch
from avalanche.core import SupervisedPlugin
from avalanche.training.plugins import EvaluationPlugin

from moram_avalanche.strategies import ZSCL, WiSEFT


def params(model):
    return {k: v.detach().clone() for k, v in model.named_parameters()}


class Recorder(SupervisedPlugin):
    """Weights at each experience start, after every step, at the end; the L2 term each step."""

    def __init__(self):
        super().__init__()
        self.start, self.steps, self.end, self.l2 = [], [], [], []

    def before_training_exp(self, strategy, **kwargs):
        self.start.append(params(strategy.model))
        self.steps.append([])
        self.l2.append([])

    def before_backward(self, strategy, **kwargs):
        if getattr(strategy, "l2_anchor", None) is not None:
            start = self.start[-1]
            naive = sum(((p.detach().double() - start[k].double()) ** 2).sum()
                        for k, p in strategy.model.named_parameters())
            self.l2[-1].append((strategy.l2_anchor.last_loss.item(), naive.item()))

    def after_training_iteration(self, strategy, **kwargs):
        self.steps[-1].append(params(strategy.model))

    def after_training_exp(self, strategy, **kwargs):
        self.end.append(params(strategy.model))


def close(a, b, atol=1e-6):
    return all(torch.allclose(a[k], b[k], atol=atol) for k in a)


def reference_kwargs():
    gen = torch.Generator().manual_seed(5)
    images = torch.utils.data.TensorDataset(torch.randn(10, 3, 32, 32, generator=gen))
    return {"reference_images": images, "reference_sentences": ["a cat.", "a red dog.", "two birds."]}


@pytest.mark.parametrize("anchor", ["start", "zeroshot"])
def test_wiseft_merges_each_experience_with_its_anchor(anchor, tiny_clip, tokenizer, make_stream):
    zero_shot = params(tiny_clip)
    recorder = Recorder()
    strategy = WiSEFT(model=tiny_clip, tokenizer=tokenizer, anchor=anchor, iterations=2, warmup=0, lr=1e-3,
                      train_mb_size=2, plugins=[recorder], evaluator=EvaluationPlugin(loggers=[]),
                      progress=False)
    stream = make_stream("all").train_stream
    for exp in stream[:2]:
        strategy.train(exp)
    assert close(recorder.start[0], zero_shot)
    for index in range(2):
        finetuned = recorder.steps[index][-1]
        base = recorder.start[index] if anchor == "start" else zero_shot
        assert not close(finetuned, base)  # training moved the weights
        expected = {k: 0.8 * finetuned[k] + 0.2 * base[k] for k in finetuned}
        assert close(recorder.end[index], expected)
    assert close(recorder.start[1], recorder.end[0])  # the merged model is the next start


def test_zscl_averages_the_start_and_the_snapshots_and_anchors_l2_to_the_start(tiny_clip, tokenizer,
                                                                                make_stream):
    recorder = Recorder()
    strategy = ZSCL(model=tiny_clip, tokenizer=tokenizer, iterations=4, average_every=2, warmup=0, lr=1e-3,
                    train_mb_size=2, distill_batch_size=2, plugins=[recorder], evaluator=EvaluationPlugin(loggers=[]),
                    progress=False, **reference_kwargs())
    for exp in make_stream("all").train_stream[:2]:
        strategy.train(exp)
    for index in range(2):
        steps = recorder.steps[index]
        # snapshots after steps 0, 2 and the last (3), plus the start: 4 points
        points = [recorder.start[index]] + [steps[i] for i in (0, 2, 3)]
        expected = {k: sum(p[k] for p in points) / len(points) for k in points[0]}
        assert close(recorder.end[index], expected)
        assert not close(recorder.end[index], steps[-1])  # the average, not the last weights
        assert strategy.weight_ensemble.count == len(points)
        # L2 term = 1 * sum ||theta - theta_start||^2, zero at the first step
        l2 = recorder.l2[index]
        assert len(l2) == 4 and l2[0][0] == 0
        assert all(ours == pytest.approx(naive, rel=1e-4, abs=1e-12) for ours, naive in l2)
        assert l2[-1][0] > 0
    # the second experience starts from, and is anchored to, the first one's average
    assert close(recorder.start[1], recorder.end[0])
    assert strategy.l2_anchor.anchor is None  # released between experiences
