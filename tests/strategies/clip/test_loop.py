"""The shared CLIP loop: iteration budget, optimizer, label spaces, text cache."""

import warnings

import pytest
import torch
from avalanche.core import SupervisedPlugin
from avalanche.training.plugins import EvaluationPlugin

from moram_avalanche.experiments.metrics import AccuracyMatrix
from moram_avalanche.strategies import FineTune, MoRAM, ZeroShot

warnings.filterwarnings("ignore", message="No loggers specified")


class StepCounter(SupervisedPlugin):
    def __init__(self):
        super().__init__()
        self.steps, self.lrs = [], []

    def before_training_exp(self, strategy, **kwargs):
        self.steps.append(0)
        self.lrs.append([])

    def after_update(self, strategy, **kwargs):
        self.steps[-1] += 1
        self.lrs[-1].append(strategy.optimizer.param_groups[0]["lr"])


def evaluator(metric=None):
    return EvaluationPlugin(*([metric] if metric else []), loggers=[])


def test_exactly_n_steps_per_experience_even_with_less_data_than_a_batch(tiny_clip, tokenizer, make_stream):
    benchmark = make_stream("all", train_sizes=(8, 5, 3))  # the last domain: 3 images < batch 4
    counter = StepCounter()
    strategy = FineTune(model=tiny_clip, tokenizer=tokenizer, iterations=7, train_mb_size=4, lr=1e-4,
                        warmup=2, plugins=[counter], evaluator=evaluator(), progress=False)
    strategy.train(benchmark.train_stream)  # one train() call over the whole stream
    assert counter.steps == [7, 7, 7]
    assert strategy.clock.train_iterations == 21
    # per-iteration schedule, rebuilt each experience: warm-up then cosine
    assert counter.lrs[0][:2] == pytest.approx([0.5e-4, 1e-4])
    assert counter.lrs[2][:2] == pytest.approx([0.5e-4, 1e-4])
    assert counter.lrs[0][-1] < counter.lrs[0][2]


def test_zero_shot_trains_nothing_and_caches_text(tiny_clip, tokenizer, make_stream):
    benchmark = make_stream("domain")
    before = {k: v.clone() for k, v in tiny_clip.state_dict().items()}
    strategy = ZeroShot(model=tiny_clip, tokenizer=tokenizer, evaluator=evaluator(), progress=False)
    strategy.train(benchmark.train_stream[0])
    strategy.eval(benchmark.test_stream)
    strategy.eval(benchmark.test_stream)
    assert all(torch.equal(v, tiny_clip.state_dict()[k]) for k, v in before.items())
    assert len(strategy.text_head._cache) == 3  # one classifier per domain, computed once


def test_all_label_space_predicts_over_every_class_with_offset_labels(tiny_clip, tokenizer, make_stream):
    benchmark = make_stream("all")
    seen = []

    class Spy(SupervisedPlugin):
        def after_eval_forward(self, strategy, **kwargs):
            seen.append((strategy.experience.current_experience, strategy.mb_output.shape[1],
                         strategy.mb_y.min().item(), strategy.mb_y.max().item()))

    strategy = ZeroShot(model=tiny_clip, tokenizer=tokenizer, plugins=[Spy()], evaluator=evaluator(),
                        progress=False, eval_mb_size=6)
    strategy.eval(benchmark.test_stream)
    # 7 classes in all; domain labels shifted by 0, 2, 5
    assert seen == [(0, 7, 0, 1), (1, 7, 2, 4), (2, 7, 5, 6)]


def test_domain_label_space_uses_the_domain_classes(tiny_clip, tokenizer, make_stream):
    benchmark = make_stream("domain")
    widths = []

    class Spy(SupervisedPlugin):
        def after_eval_forward(self, strategy, **kwargs):
            widths.append((strategy.mb_output.shape[1], strategy.mb_y.max().item()))

    strategy = ZeroShot(model=tiny_clip, tokenizer=tokenizer, plugins=[Spy()], evaluator=evaluator(),
                        progress=False, eval_mb_size=6)
    strategy.eval(benchmark.test_stream)
    assert widths == [(2, 1), (3, 2), (2, 1)]


def test_accuracy_matrix_rows_fill_after_each_experience(tiny_clip, tokenizer, make_stream, tmp_path):
    benchmark = make_stream("all")
    metric = AccuracyMatrix(out_dir=tmp_path)
    strategy = MoRAM(model=tiny_clip, tokenizer=tokenizer, atoms_per_task=4, topk=2, iterations=2,
                     train_mb_size=4, evaluator=evaluator(metric), progress=False)
    for experience in benchmark.train_stream[:2]:
        strategy.train(experience)
        strategy.eval(benchmark.test_stream)
    matrix = metric.result()
    assert matrix.shape == (2, 3) and ((matrix >= 0) & (matrix <= 100)).all()
    assert (tmp_path / "results.json").exists() and (tmp_path / "accuracy_matrix.png").exists()


def test_misspelled_keyword_is_an_error(tiny_clip, tokenizer):
    with pytest.raises(TypeError):
        MoRAM(model=tiny_clip, tokenizer=tokenizer, iteratons=3)
