"""Replay composes with the package's strategies: each sample scored against its own domain's classes."""

import math
import warnings

import pytest
import torch
import torch.nn.functional as F
from avalanche.training.plugins import EvaluationPlugin, ReplayPlugin, SupervisedPlugin

from moram_avalanche.experiments.metrics import AccuracyMatrix
from moram_avalanche.strategies import MoRAM
from tiny_clip import STREAM_CLASSES

warnings.filterwarnings("ignore", message="No loggers specified")
warnings.filterwarnings("ignore", category=DeprecationWarning)

NAMES = list(STREAM_CLASSES)
OFFSETS = {"alpha": 0, "beta": 2, "gamma": 5}


class Batches(SupervisedPlugin):
    """The task labels of every training batch, per experience."""

    def __init__(self):
        super().__init__()
        self.tasks = []

    def before_training_exp(self, strategy, **kwargs):
        self.tasks.append([])

    def after_forward(self, strategy, **kwargs):
        self.tasks[-1].append(sorted(set(strategy.mb_task_id.tolist())))


@pytest.mark.parametrize("label_space", ["all", "domain"])
def test_moram_with_replay_over_three_experiences(label_space, tiny_clip, tokenizer, make_stream, one_thread):
    benchmark = make_stream(label_space, train_sizes=(8, 6, 6))
    matrix, batches = AccuracyMatrix(), Batches()
    strategy = MoRAM(model=tiny_clip, tokenizer=tokenizer, atoms_per_task=4, topk=2, iterations=3,
                     train_mb_size=4, plugins=[ReplayPlugin(mem_size=6), batches],
                     evaluator=EvaluationPlugin(matrix, loggers=[]), progress=False)
    for experience in benchmark.train_stream:
        strategy.train(experience)
        strategy.eval(benchmark.test_stream)
    assert matrix.result().shape == (3, 3)
    assert all(tasks == [0] for tasks in batches.tasks[0])
    # from the second experience on, batches mix the current domain with replayed ones
    assert any(len(tasks) > 1 for tasks in batches.tasks[1]) and any(len(tasks) > 1 for tasks in batches.tasks[2])
    assert {t for tasks in batches.tasks[2] for t in tasks} == {0, 1, 2}


def log_softmax(values):
    top = max(values)
    total = sum(math.exp(v - top) for v in values)
    return [v - top - math.log(total) for v in values]


def hand_loss(image, tasks, labels, text, scale, seen_names, current):
    """The loss of a mixed batch by loops: each image against its own domain's classes, then every
    class of the seen and current domains against the batch's images (the release's text->image
    term, mean over classes)."""
    def dot(a, b):
        return sum(x * y for x, y in zip(a, b))

    i2t = 0.0
    for f, task, label in zip(image, tasks, labels):
        i2t -= log_softmax([scale * dot(f, e) for e in text[NAMES[task]]])[label]
    i2t /= len(image)
    rows, start = {}, 0
    for name in [*seen_names, NAMES[current]]:
        rows[name] = start
        start += len(text[name])
    every = [e for name in [*seen_names, NAMES[current]] for e in text[name]]
    t2i = 0.0
    for c, e in enumerate(every):
        logp = log_softmax([scale * dot(e, f) for f in image])
        t2i -= sum(lp for b, lp in enumerate(logp) if rows[NAMES[tasks[b]]] + labels[b] == c)
    return i2t + t2i / len(every)


@pytest.mark.parametrize("label_space", ["all", "domain"])
def test_loss_of_a_mixed_batch_equals_a_hand_computation(label_space, tiny_clip, tokenizer, make_stream,
                                                        one_thread):
    benchmark = make_stream(label_space, train_sizes=(8, 6, 6))
    checked = []

    class HandCheck(SupervisedPlugin):
        def before_backward(self, strategy, **kwargs):
            tasks = strategy.mb_task_id.tolist()
            current = strategy.experience.current_experience
            if current == 0 or len(set(tasks)) == 1 or checked:
                return  # the first mixed step: the seen classes' text is this step's too
            model = strategy.model  # in training mode, before this step's update
            labels = [y - (OFFSETS[NAMES[t]] if label_space == "all" else 0)
                      for y, t in zip(strategy.mb_y.tolist(), tasks)]
            with torch.no_grad():
                image = F.normalize(model.encode_image(strategy.mb_x), dim=-1).double().tolist()
                text = {name: F.normalize(model.encode_text(tokenizer(
                    [f"a {c} from {name}." for c in STREAM_CLASSES[name]])), dim=-1).double().tolist()
                    for name in NAMES[:current + 1]}
                scale = model.logit_scale.exp().item()
            seen = [d.name for d in strategy.seen_domains]
            expected = hand_loss(image, tasks, labels, text, scale, seen, current)
            checked.append((strategy.loss.item(), expected, tasks))

    strategy = MoRAM(model=tiny_clip, tokenizer=tokenizer, atoms_per_task=4, topk=2, iterations=2,
                     train_mb_size=6, plugins=[ReplayPlugin(mem_size=8), HandCheck()],
                     evaluator=EvaluationPlugin(loggers=[]), progress=False)
    for experience in benchmark.train_stream[:2]:
        strategy.train(experience)
    assert len(checked) == 1  # a mixed batch was seen
    got, expected, tasks = checked[0]
    assert got == pytest.approx(expected, rel=1e-5), tasks
