"""MoEAdapters: end to end on the synthetic stream, freezing, routed evaluation, resume, defaults."""

import inspect
import warnings

import open_clip
import pytest
import torch
from avalanche.core import SupervisedPlugin
from avalanche.training.plugins import EvaluationPlugin
from torch import nn

from moram_avalanche.algorithms.schedules import MOE_FEWSHOT_MTIL_LR, MOE_FULLSHOT_MTIL_LR
from moram_avalanche.benchmarks.images.domains import SPECS
from moram_avalanche.benchmarks.images.reference_sets import synthetic_reference
from moram_avalanche.benchmarks.images.synthetic import synthetic
from moram_avalanche.clip.block_taps import inject_moe_adapters
from moram_avalanche.experiments.metrics import AccuracyMatrix
from moram_avalanche.experiments.runner import run_stream
from moram_avalanche.layers.base import find_layers
from moram_avalanche.layers.moe_adapter import MoEAdapterMixture, num_routers, routing
from moram_avalanche.strategies import MoEAdapters, ZeroShot, get_strategy
from moram_avalanche.strategies.clip.loop import EVAL_BATCH_FACTOR
from tiny_clip import TINY_CONFIG

warnings.filterwarnings("ignore", message="No loggers specified")


pytestmark = pytest.mark.usefixtures("one_thread")


def tiny_extractor():
    return nn.AvgPool2d(8)  # 3 x 4 x 4 = 48 features from a 32 x 32 image


TINY = dict(experts=4, bottleneck=8, iterations=3, warmup=1, lr=1e-2, train_mb_size=6, ae_iterations=3,
            ae_reference_iterations=3, ae_hidden=4, ae_batch_size=8, progress=False)


def make(model, tokenizer, plugins=(), metric=None, **kwargs):
    options = dict(TINY)
    options.update(kwargs)
    if options.get("selector", "ddas") == "ddas" and "reference_images" not in options:
        images = torch.randn(8, 3, 32, 32, generator=torch.Generator().manual_seed(5))
        options["reference_images"] = torch.utils.data.TensorDataset(images)
        options.setdefault("feature_extractor", tiny_extractor())
    return MoEAdapters(model=model, tokenizer=tokenizer, plugins=list(plugins),
                       evaluator=EvaluationPlugin(*([metric] if metric else []), loggers=[]), **options)


def adapter_state(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()
            if any(k.startswith(f"{n}.") for n in find_layers(model, MoEAdapterMixture))}


class Snapshots(SupervisedPlugin):
    """Adapter state after each experience's boundary work (runs after MoEAdaptersPlugin)."""

    def __init__(self):
        super().__init__()
        self.states = []

    def after_training_exp(self, strategy, **kwargs):
        self.states.append({n: {"experts": [[p.detach().clone() for p in e.parameters()] for e in m.experts],
                               "frozen": m.frozen.clone(), "gates": [g.detach().clone() for g in m.gates],
                               "trainable": [e.down.weight.requires_grad for e in m.experts]}
                           for n, m in find_layers(strategy.model, MoEAdapterMixture).items()})


def test_two_experiences_of_the_synthetic_stream_end_to_end(tiny_clip, tokenizer):
    transform = open_clip.image_transform(32, is_train=False)
    benchmark = synthetic(("shapes", "colours"), train_size=12, test_size=12, train_transform=transform,
                          eval_transform=transform)
    reference, _ = synthetic_reference(transform, images=8, sentences=1)
    clip_before = {k: v.clone() for k, v in tiny_clip.state_dict().items()}
    metric, snapshots = AccuracyMatrix(), Snapshots()
    strategy = get_strategy("moe-adapters")(
        model=tiny_clip, tokenizer=tokenizer, plugins=[snapshots], reference_images=reference,
        feature_extractor=tiny_extractor(), evaluator=EvaluationPlugin(metric, loggers=[]),
        **{**TINY, "train_mb_size": 4})
    for experience in benchmark.train_stream:
        strategy.train(experience)
        strategy.eval(benchmark.test_stream)
    result = torch.as_tensor(metric.result())
    assert result.shape == (2, 2) and torch.isfinite(result).all()
    assert num_routers(tiny_clip) == 2
    assert len(strategy.ddas.tasks) == 2 and strategy.ddas.reference is not None
    # CLIP's own weights never change
    state = tiny_clip.state_dict()
    for key, value in clip_before.items():
        renamed = key.replace("ln_2.", "ln_2.base.").replace("ls_2.", "ls_2.base.")
        assert torch.equal(state[key if key in state else renamed], value)
    first, second = snapshots.states
    for name in first:
        frozen = first[name]["frozen"]
        assert 1 <= int(frozen.sum()) <= 2  # the top-2 used experts of experience 1
        assert (second[name]["frozen"] | frozen).equal(second[name]["frozen"])  # cumulative
        for index in frozen.nonzero().flatten().tolist():  # frozen experts: bit-identical
            assert all(torch.equal(a, b) for a, b in
                       zip(first[name]["experts"][index], second[name]["experts"][index]))
        assert torch.equal(first[name]["gates"][0], second[name]["gates"][0])  # old router: fixed
    history = strategy.moe_plugin.history
    assert [h["domain"] for h in history] == ["shapes", "colours"]
    prompts = len(benchmark.train_stream[0].classnames)
    assert prompts == 6
    for name, block in history[0]["blocks"].items():  # 3 iterations x top-2 x (4 images or 6 prompts)
        assert sorted(block["frozen"]) == first[name]["frozen"].nonzero().flatten().tolist()
        assert sum(block["counts"]) == 3 * 2 * (4 if name.startswith("visual.") else prompts)
    prompts = len(benchmark.train_stream[1].classnames)
    for name, block in history[1]["blocks"].items():  # counts restart: experience 2's selections only
        assert sum(block["counts"]) == 3 * 2 * (4 if name.startswith("visual.") else prompts)
    moved = sum(not all(torch.equal(a, b) for a, b in zip(first[n]["experts"][i], second[n]["experts"][i]))
                for n in first for i in range(4) if not first[n]["frozen"][i])
    assert moved > 0  # while free experts still train


def test_routed_evaluation_scores_each_image_against_text_under_its_own_router(tiny_clip, tokenizer,
                                                                            make_stream):
    captured = []

    class Capture(SupervisedPlugin):
        def after_eval_forward(self, strategy, **kwargs):
            captured.append((strategy.mb_x.clone(), strategy.mb_output.clone(), strategy.last_routes.clone()))

    benchmark = make_stream("all")
    strategy = make(tiny_clip, tokenizer, plugins=[Capture()], selector="oracle")
    strategy.train(benchmark.train_stream[0])
    strategy.train(benchmark.train_stream[1])
    strategy.eval(benchmark.test_stream)
    prompts = [p for d in benchmark.train_stream[0].domains for p in d.prompts()]
    tokens = tokenizer(prompts)
    tiny_clip.eval()  # Avalanche gives the model back in its training mode
    by_route = {}
    for images, logits, routes in captured:
        route = int(routes[0])
        by_route[route] = by_route.get(route, 0) + 1
        assert (routes == route).all()
        with torch.no_grad(), routing(tiny_clip, route):
            img = torch.nn.functional.normalize(tiny_clip.encode_image(images), dim=-1)
            txt = torch.nn.functional.normalize(tiny_clip.encode_text(tokens), dim=-1)
        assert torch.allclose(logits, tiny_clip.logit_scale.exp() * img @ txt.t(), atol=1e-4)
    assert set(by_route) == {0, 1, -1}  # alpha, beta: their routers; gamma unseen: plain CLIP


def test_rejected_images_get_zero_shot_clip(tiny_clip, tokenizer, make_stream):
    """A threshold of 0 rejects every image: the matrix is ZeroShot's, under the MTIL label space."""
    benchmark = make_stream("domain")
    plain = open_clip.CLIP(**TINY_CONFIG).eval()
    plain.load_state_dict(tiny_clip.state_dict())
    plain.requires_grad_(False)
    expected = AccuracyMatrix()
    zero_shot = ZeroShot(model=plain, tokenizer=tokenizer, progress=False, train_mb_size=6,
                         evaluator=EvaluationPlugin(expected, loggers=[]))
    metric = AccuracyMatrix()
    strategy = make(tiny_clip, tokenizer, metric=metric, threshold=0.0)
    for experience in benchmark.train_stream[:2]:
        zero_shot.train(experience)
        zero_shot.eval(benchmark.test_stream)
        strategy.train(experience)
        strategy.eval(benchmark.test_stream)
        assert (strategy.last_routes == -1).all()
    assert metric.result().tolist() == expected.result().tolist()


class Routes(SupervisedPlugin):
    def __init__(self):
        super().__init__()
        self.seen = []

    def after_eval_forward(self, strategy, **kwargs):
        self.seen.append(strategy.last_routes.tolist())


def fresh_run(make_stream, tokenizer, **kwargs):
    torch.manual_seed(0)
    model = open_clip.CLIP(**TINY_CONFIG)
    metric = AccuracyMatrix()
    torch.manual_seed(1)
    strategy = make(model, tokenizer, metric=metric, plugins=[Routes()], **kwargs)
    return strategy, make_stream("all", train_sizes=(8, 6, 6)), metric


@pytest.mark.parametrize("kwargs", [{}, {"selector": "latest"}])
def test_resume_after_interruption_gives_the_identical_matrix(make_stream, tokenizer, tmp_path, kwargs):
    strategy, benchmark, metric = fresh_run(make_stream, tokenizer, **kwargs)
    assert run_stream(strategy, benchmark, tmp_path / "whole", progress=False) == 3
    expected, expected_state = metric.result(), adapter_state(strategy.model)
    expected_ddas = strategy.ddas.state_dict() if strategy.ddas else None
    if expected_ddas:  # the run exercises per-sample routing: batches mixing plain CLIP and routers
        assert any(-1 in batch and max(batch) >= 0 for batch in next(p for p in strategy.plugins if isinstance(p, Routes)).seen)

    strategy, benchmark, metric = fresh_run(make_stream, tokenizer, **kwargs)
    assert run_stream(strategy, benchmark, tmp_path / "cut", max_experiences=1, progress=False) == 1
    torch.rand(1000)  # a new process: new objects, and the global RNG moved on
    strategy, benchmark, metric = fresh_run(make_stream, tokenizer, **kwargs)
    assert run_stream(strategy, benchmark, tmp_path / "cut", progress=False) == 3
    assert metric.result().tolist() == expected.tolist()
    state = adapter_state(strategy.model)
    assert state.keys() == expected_state.keys() and all(torch.equal(state[k], v) for k, v in expected_state.items())
    if expected_ddas:
        ddas = strategy.ddas.state_dict()
        assert len(ddas["tasks"]) == 3
        for got, want in zip([ddas["reference"], *ddas["tasks"]], [expected_ddas["reference"], *expected_ddas["tasks"]]):
            assert all(torch.equal(got[k], want[k]) for k in want)


def test_checkpoint_holds_adapters_not_clip(make_stream, tokenizer, tmp_path):
    strategy, benchmark, _ = fresh_run(make_stream, tokenizer)
    run_stream(strategy, benchmark, tmp_path, max_experiences=1, progress=False)
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=True)
    names = set(state["model"])
    assert names == set(adapter_state(strategy.model))
    assert any(".gates.0" in n for n in names) and any(n.endswith(".frozen") for n in names)
    assert not any("c_fc" in n or "attn" in n for n in names)


def test_defaults_follow_the_release():
    defaults = {k: p.default for k, p in inspect.signature(MoEAdapters).parameters.items()}
    assert defaults["experts"] == 22 and defaults["bottleneck"] == 64 and defaults["topk"] == 2
    assert defaults["label_smoothing"] == 0.2 and defaults["betas"] == (0.9, 0.999)
    assert defaults["warmup"] == 100 and defaults["train_mb_size"] == 64
    assert defaults["text_to_image_loss"] is False and defaults["recipe"] == "few-shot"
    assert defaults["ae_iterations"] == 300 and defaults["ae_hidden"] == 100
    assert defaults["freeze_per_task"] == 2 and defaults["ae_workers"] is None
    # the per-domain lr arrays of the release's few-shot and full-shot train scripts, order I
    few = {"Aircraft": 8e-3, "Caltech101": 5e-4, "CIFAR100": 2e-4, "DTD": 5e-3, "EuroSAT": 1e-3,
           "Flowers": 1e-3, "Food": 1e-2, "MNIST": 1e-4, "OxfordPet": 1e-2, "StanfordCars": 1e-2,
           "SUN397": 1e-2}
    full = {"Aircraft": 5e-3, "Caltech101": 1e-3, "CIFAR100": 5e-3, "DTD": 1e-3, "EuroSAT": 1e-4,
            "Flowers": 1e-3, "Food": 1e-3, "MNIST": 1e-4, "OxfordPet": 1e-3, "StanfordCars": 1e-3,
            "SUN397": 1e-3}
    assert set(few) == set(full) == set(SPECS)
    for name, spec in SPECS.items():
        for alias in (name, *spec.aliases):
            assert MOE_FEWSHOT_MTIL_LR(alias) == few[name], alias
            assert MOE_FULLSHOT_MTIL_LR(alias) == full[name], alias


def bare(model, tokenizer, **kwargs):
    return MoEAdapters(model=model, tokenizer=tokenizer, feature_extractor=tiny_extractor(),
                       reference_images="none", **kwargs)


def test_the_recipe_fills_only_the_arguments_not_given(tiny_clip, tokenizer):
    def settings(strategy):
        return strategy.iterations, strategy.lr, strategy.ddas.threshold, strategy.ddas.lr

    assert settings(bare(tiny_clip, tokenizer)) == (500, MOE_FEWSHOT_MTIL_LR, 0.0585, 3e-3)
    full = bare(tiny_clip, tokenizer, recipe="full-shot")
    assert settings(full) == (1000, MOE_FULLSHOT_MTIL_LR, 0.0655, 1e-2)
    mixed = bare(tiny_clip, tokenizer, recipe="full-shot", iterations=7, ae_lr=0.5)
    assert settings(mixed) == (7, MOE_FULLSHOT_MTIL_LR, 0.0655, 0.5)
    explicit = bare(tiny_clip, tokenizer, recipe="full-shot", lr=2e-3, threshold=0.0)
    assert settings(explicit) == (1000, 2e-3, 0.0, 1e-2)
    with pytest.raises(ValueError, match="recipe must be one of .*'few-shot', 'full-shot'.*'fullshot'"):
        bare(tiny_clip, tokenizer, recipe="fullshot")


def test_the_few_shot_recipe_warns_once_on_an_experience_with_many_images_per_class(tiny_clip, tokenizer,
                                                                                  make_stream):
    def trained(sizes, **kwargs):
        strategy = make(tiny_clip, tokenizer, **{"iterations": 1, "ae_iterations": 1,
                                                 "ae_reference_iterations": 1, **kwargs})
        benchmark = make_stream("domain", train_sizes=sizes)  # alpha has 2 classes, beta 3
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            strategy.train(benchmark.train_stream[0])
            strategy.train(benchmark.train_stream[1])
        return [str(w.message) for w in caught if "recipe" in str(w.message)]

    warned = trained((102, 153, 3))  # 51 per class, twice: one warning
    assert len(warned) == 1 and 'recipe="full-shot"' in warned[0]
    assert "'alpha' (51 images per class" in warned[0]
    assert trained((100, 150, 3)) == []  # 50 per class: few-shot enough
    assert trained((102, 153, 3), recipe="full-shot") == []
    assert trained((102, 153, 3), iterations=1, lr=1e-3, threshold=0.1, ae_lr=1e-3) == []  # all explicit


def test_batch_routing_evaluates_in_the_release_batches_of_128(tiny_clip, tokenizer):
    assert bare(tiny_clip, tokenizer, ddas_routing="batch").eval_mb_size == 128
    assert bare(tiny_clip, tokenizer, ddas_routing="batch", eval_mb_size=32).eval_mb_size == 32
    default = EVAL_BATCH_FACTOR * 16  # CLIPStrategy's default for a training batch of 16
    assert bare(tiny_clip, tokenizer, train_mb_size=16).eval_mb_size == default  # per sample
    assert bare(tiny_clip, tokenizer, ddas_routing="batch", selector="latest",
                train_mb_size=16).eval_mb_size == default  # DDAS does not route


@pytest.mark.parametrize("argument, value, built", [
    ("experts", 22, "experts=4"), ("bottleneck", 64, "bottleneck=8"), ("topk", 3, "topk=2"),
    ("dropout", 0.0, "dropout=0.1"), ("adapter_scale", 1.0, "scale=0.1"),
    ("encoders", ("visual",), "('visual', 'text')")])
def test_a_model_with_other_adapters_is_refused(tiny_clip, tokenizer, argument, value, built):
    inject_moe_adapters(tiny_clip, experts=4, bottleneck=8)
    options = {"experts": 4, "bottleneck": 8, argument: value}
    with pytest.raises(ValueError, match="already holds MoE adapters built with other arguments") as error:
        bare(tiny_clip, tokenizer, **options)
    message = str(error.value)
    assert f"{argument}={value!r}" in message and f"the model's: {built.partition('=')[2] or built}" in message
    bare(tiny_clip, tokenizer, experts=4, bottleneck=8)  # the arguments it was built with: accepted


def test_a_model_with_adapters_in_one_encoder_is_refused_for_both(tiny_clip, tokenizer):
    inject_moe_adapters(tiny_clip, ("text",), experts=4, bottleneck=8)
    with pytest.raises(ValueError, match=r"encoders=\('visual', 'text'\) \(the model's: \('text',\)\)"):
        bare(tiny_clip, tokenizer, experts=4, bottleneck=8)
    bare(tiny_clip, tokenizer, experts=4, bottleneck=8, encoders=("text",))


def test_ddas_loaders_follow_the_run_num_workers(tiny_clip, tokenizer, make_stream):
    strategy = make(tiny_clip, tokenizer, iterations=1, ae_iterations=1, ae_reference_iterations=1)
    calls = []
    for method in ("fit_reference", "fit_task"):
        original = getattr(strategy.ddas, method)

        def spy(dataset, num_workers=None, original=original, method=method):
            calls.append((method, num_workers))
            return original(dataset, num_workers=0)  # no worker processes in the test

        setattr(strategy.ddas, method, spy)
    benchmark = make_stream("all")
    strategy.train(benchmark.train_stream[0], num_workers=1)  # Avalanche: train kwargs reach the hooks
    assert calls == [("fit_reference", 1), ("fit_task", 1)]
    strategy.moe_plugin.ae_workers = 0  # an explicit ae_workers wins
    strategy.train(benchmark.train_stream[1], num_workers=1)
    strategy.moe_plugin.ae_workers = None
    strategy.train(benchmark.train_stream[2])  # no num_workers given: 0
    assert calls[2:] == [("fit_task", 0), ("fit_task", 0)]


def test_only_the_current_router_and_free_experts_train(tiny_clip, tokenizer, make_stream):
    strategy = make(tiny_clip, tokenizer)
    benchmark = make_stream("all")
    strategy.train(benchmark.train_stream[0])
    trainable_names = {n for n, p in tiny_clip.named_parameters() if p.requires_grad}
    assert not trainable_names  # between experiences nothing trains

    class Check(SupervisedPlugin):
        def before_training_iteration(self, strategy, **kwargs):
            optimized = {id(p) for g in strategy.optimizer.param_groups for p in g["params"]}
            for m in find_layers(strategy.model, MoEAdapterMixture).values():
                assert id(m.gates[1]) in optimized and id(m.gates[0]) not in optimized
                for expert, frozen in zip(m.experts, m.frozen.tolist()):
                    assert (id(expert.up.weight) in optimized) == (not frozen)
            assert all(id(p) not in optimized for n, p in strategy.model.named_parameters()
                       if ".moe." not in n)
            self.checked = True

    check = Check()
    strategy.plugins.append(check)
    strategy.train(benchmark.train_stream[1])
    assert check.checked


def test_bad_arguments_say_what_to_do(tiny_clip, tokenizer):
    with pytest.raises(ValueError, match="needs reference_images.*reference_images='none'"):
        MoEAdapters(model=tiny_clip, tokenizer=tokenizer, feature_extractor=tiny_extractor())
    with pytest.raises(ValueError, match="reference_transform"):
        MoEAdapters(model=tiny_clip, tokenizer=tokenizer, feature_extractor=tiny_extractor(),
                    reference_images="/some/folder")
    with pytest.raises(ValueError, match="selector"):
        MoEAdapters(model=tiny_clip, tokenizer=tokenizer, selector="random")
    with pytest.raises(ValueError, match="either feature_extractor or ddas_weights"):
        MoEAdapters(model=tiny_clip, tokenizer=tokenizer, feature_extractor=tiny_extractor(),
                    ddas_weights="alexnet.pth", reference_images="none")
    strategy = MoEAdapters(model=tiny_clip, tokenizer=tokenizer, feature_extractor=tiny_extractor(),
                           reference_images="none")
    assert strategy.moe_plugin.reference_images is None
