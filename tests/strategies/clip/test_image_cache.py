"""Image features of an unchanged image tower: computed once, replayed with the same numbers."""

import copy
import warnings

import torch
from avalanche.core import SupervisedPlugin
from avalanche.training.plugins import EvaluationPlugin
from torch import nn

from moram_avalanche.layers.moram.layer import MoRAMLinear
from moram_avalanche.strategies import MoRAM, ZeroShot
from moram_avalanche.strategies.clip.image_cache import ImageFeatureCache, module_fingerprint

warnings.filterwarnings("ignore", message="No loggers specified")


class Outputs(SupervisedPlugin):
    """Every evaluation minibatch's logits and labels, per evaluation."""

    def __init__(self):
        super().__init__()
        self.runs = []

    def before_eval(self, strategy, **kwargs):
        self.runs.append([])

    def after_eval_iteration(self, strategy, **kwargs):
        self.runs[-1].append((strategy.experience.current_experience, strategy.mb_output.clone(),
                              strategy.mb_y.clone()))


def count_image_passes(model):
    calls = [0]
    model.visual.register_forward_hook(lambda *args: calls.__setitem__(0, calls[0] + 1))
    return calls


def same_runs(a, b):
    return len(a) == len(b) and all(
        ea == eb and torch.equal(oa, ob) and torch.equal(ya, yb)
        for (ea, oa, ya), (eb, ob, yb) in zip(a, b))


def test_fingerprint_sees_every_change_that_alters_the_output():
    torch.manual_seed(0)
    layer = MoRAMLinear(nn.Linear(4, 3), atoms_per_task=2, topk=2)
    layer.expand()
    tower = nn.Sequential(layer, nn.ReLU())
    base = module_fingerprint(tower)
    assert module_fingerprint(copy.deepcopy(tower)) == base
    changed = copy.deepcopy(tower)
    with torch.no_grad():  # one ulp in one weight
        changed[0].base.weight[0, 0] = torch.nextafter(changed[0].base.weight[0, 0], torch.tensor(2.0))
    assert module_fingerprint(changed) != base
    changed = copy.deepcopy(tower)
    with torch.no_grad():
        changed[0].new_values.add_(1.0)  # a trainable atom (a view of the bank buffer)
    assert module_fingerprint(changed) != base
    changed = copy.deepcopy(tower)
    changed[0].threshold = 0.3  # an option, not a tensor
    assert module_fingerprint(changed) != base
    changed = copy.deepcopy(tower)
    changed[0].expand()  # the bank grows (new values are zero: same output, other bank)
    assert module_fingerprint(changed) != base
    assert module_fingerprint(copy.deepcopy(tower).train(False)) != module_fingerprint(tower.train(True))


def test_cache_keeps_only_complete_experiences_of_the_current_tower():
    tower = nn.Linear(2, 2)
    cache = ImageFeatureCache()
    cache.start(tower)
    cache.add("a", torch.ones(1, 2), torch.zeros(1))
    assert cache.get("a") is None  # not finished: an interrupted evaluation keeps nothing
    cache.finish("a")
    assert len(cache.get("a")) == 1
    cache.start(tower)
    assert cache.get("a") is not None
    with torch.no_grad():
        tower.weight.add_(1)
    cache.start(tower)
    assert cache.get("a") is None


def test_zero_shot_replays_features_with_identical_logits(tiny_clip, tokenizer, make_stream):
    benchmark = make_stream("all")
    runs = {}
    for cached in (True, False):
        model = copy.deepcopy(tiny_clip)
        passes = count_image_passes(model)
        spy = Outputs()
        strategy = ZeroShot(model=model, tokenizer=tokenizer, plugins=[spy], progress=False,
                            evaluator=EvaluationPlugin(loggers=[]), eval_mb_size=4,
                            cache_image_features=cached)
        strategy.eval(benchmark.test_stream)
        first = passes[0]
        strategy.eval(benchmark.test_stream)
        runs[cached] = spy.runs
        if cached:
            assert first > 0 and passes[0] == first  # the second evaluation read no image
        else:
            assert passes[0] == 2 * first
    assert same_runs(runs[True][0], runs[True][1])
    assert same_runs(runs[True][1], runs[False][1])


def test_a_trained_tower_is_evaluated_afresh(tiny_clip, tokenizer, make_stream):
    benchmark = make_stream("all", train_sizes=(6, 6, 6))
    runs, passes = {}, {}
    for cached in (True, False):
        torch.manual_seed(0)
        model = copy.deepcopy(tiny_clip)
        passes[cached] = count_image_passes(model)
        spy = Outputs()
        strategy = MoRAM(model=model, tokenizer=tokenizer, iterations=2, train_mb_size=3,
                         plugins=[spy], progress=False, evaluator=EvaluationPlugin(loggers=[]),
                         cache_image_features=cached)
        for experience in benchmark.train_stream[:2]:
            strategy.train(experience)
            strategy.eval(benchmark.test_stream)
        strategy.eval(benchmark.test_stream)  # nothing trained since: replayed
        runs[cached] = spy.runs
    assert all(same_runs(a, b) for a, b in zip(runs[True], runs[False]))
    assert not same_runs(runs[True][0], runs[True][1])  # training changed the tower
    assert same_runs(runs[True][1], runs[True][2])
    assert passes[False][0] > passes[True][0]


def test_a_strategy_with_its_own_forward_is_never_replayed(tiny_clip, tokenizer, make_stream):
    import torch.nn.functional as F

    class OwnForward(ZeroShot):  # computes its features itself (as RAIL does), not via eval_image_features
        def forward(self):
            image = F.normalize(self.model.encode_image(self.mb_x), dim=-1)
            return self.model.logit_scale.exp() * image @ self.eval_classifier(self.experience).t()

    benchmark = make_stream("all")
    passes = count_image_passes(tiny_clip)
    spy = Outputs()
    strategy = OwnForward(model=tiny_clip, tokenizer=tokenizer, plugins=[spy], progress=False,
                          evaluator=EvaluationPlugin(loggers=[]))
    strategy.eval(benchmark.test_stream)
    first = passes[0]
    strategy.eval(benchmark.test_stream)
    assert first > 0 and passes[0] == 2 * first and len(strategy.image_cache) == 0
    assert same_runs(spy.runs[0], spy.runs[1])
