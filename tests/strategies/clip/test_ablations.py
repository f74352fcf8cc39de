"""Routing ablations (SeqLoRA, MoE-LoRA, MoRAM variants): end to end, invariants, loss, resume."""

import inspect
import warnings

import open_clip
import pytest
import torch
from avalanche.core import SupervisedPlugin
from avalanche.training.plugins import EvaluationPlugin

from moram_avalanche.benchmarks.images.synthetic import synthetic
from moram_avalanche.experiments.metrics import AccuracyMatrix
from moram_avalanche.experiments.runner import run_stream
from moram_avalanche.layers.base import find_layers
from moram_avalanche.layers.lora import LoRALinear
from moram_avalanche.layers.moe_lora import MoELoRALinear
from moram_avalanche.layers.moram.layer import MoRAMLinear
from moram_avalanche.strategies import (
    ROUTING_ABLATIONS,
    STRATEGIES,
    MoELoRA,
    MoRAM,
    MoRAMLoadBalance,
    SeqLoRA,
    get_strategy,
)
from moram_avalanche.strategies.clip.moram import ABLATION_STRATEGIES
from tiny_clip import TINY_CONFIG

warnings.filterwarnings("ignore", message="No loggers specified")

NAMES = ("seq-lora", "moe-lora", *ABLATION_STRATEGIES)


def params(model):
    return {k: v.detach().clone() for k, v in model.named_parameters()}


def tiny_stream():
    transform = open_clip.image_transform(32, is_train=False)
    return synthetic(("shapes", "colours"), train_size=12, test_size=6,
                     train_transform=transform, eval_transform=transform)


def make(name, model, tokenizer, plugins=(), **kwargs):
    options = dict(iterations=2, lr=1e-3, train_mb_size=6, progress=False,
                   evaluator=EvaluationPlugin(loggers=[]))
    options.update(kwargs)
    return get_strategy(name)(model=model, tokenizer=tokenizer, plugins=list(plugins), **options)


class Snapshots(SupervisedPlugin):
    """The model's parameters (trainable or not) after each experience."""

    def __init__(self):
        super().__init__()
        self.states = []

    def after_training_exp(self, strategy, **kwargs):
        self.states.append({k: v.detach().clone() for k, v in strategy.model.state_dict().items()})


@pytest.mark.parametrize("name", NAMES)
def test_two_experiences_of_the_synthetic_stream(name, tiny_clip, tokenizer):
    benchmark = tiny_stream()
    clip_before = {k: v.clone() for k, v in tiny_clip.state_dict().items()}
    matrix = AccuracyMatrix()
    strategy = make(name, tiny_clip, tokenizer, evaluator=EvaluationPlugin(matrix, loggers=[]))
    for experience in benchmark.train_stream:
        strategy.train(experience)
        strategy.eval(benchmark.test_stream)
    result = torch.as_tensor(matrix.result())
    assert result.shape == (2, 2) and torch.isfinite(result).all()
    # CLIP's own weights never change (only adapters train)
    state = tiny_clip.state_dict()
    for key, value in clip_before.items():
        if key in state:
            assert torch.equal(state[key], value), key
    trained = strategy.checkpoint_model_state()
    assert trained and any(v.is_floating_point() and v.abs().sum() > 0 for v in trained.values())
    row = next((r for r in ROUTING_ABLATIONS.values() if r.strategy == name), None)
    for layer in find_layers(tiny_clip, MoRAMLinear).values():  # the layers carry the row's options
        assert layer.num_atoms == 32 and layer.num_frozen == 32
        for option, value in row.options.items():
            if option == "balance_coef":
                assert layer.load_balance
            else:
                assert getattr(layer, option) == (1.0 if option == "temperature" and value is None
                                                  else value), option


def test_the_table_names_registered_strategies_and_full_is_moram():
    assert set(ROUTING_ABLATIONS) == {"moe-lora", "external-router", "self-activation", "+top-k",
                                      "+temperature", "+threshold", "full", "load-balance"}
    for row in ROUTING_ABLATIONS.values():
        assert row.strategy in STRATEGIES
    defaults = {k: p.default for k, p in inspect.signature(MoRAM.__init__).parameters.items()}
    assert all(defaults[k] == v for k, v in ROUTING_ABLATIONS["full"].options.items())
    assert STRATEGIES["moram-load-balance"] is MoRAMLoadBalance
    assert STRATEGIES["seq-lora"] is SeqLoRA and STRATEGIES["moe-lora"] is MoELoRA


def test_the_package_exposes_the_ablations_lazily():
    import moram_avalanche

    assert moram_avalanche.SeqLoRA is SeqLoRA and moram_avalanche.MoELoRA is MoELoRA
    assert moram_avalanche.ROUTING_ABLATIONS is ROUTING_ABLATIONS
    assert moram_avalanche.MoELoRALinear.__name__ == "MoELoRALinear"


def test_seq_lora_keeps_training_the_same_lora(tiny_clip, tokenizer):
    snapshots = Snapshots()
    strategy = make("seq-lora", tiny_clip, tokenizer, plugins=[snapshots])
    layers = [m for m in tiny_clip.modules() if isinstance(m, LoRALinear)]
    assert len(layers) == 2 * 2 * 6 and all(layer.rank == 16 for layer in layers)
    for experience in tiny_stream().train_stream:
        strategy.train(experience)
    assert [m for m in tiny_clip.modules() if isinstance(m, LoRALinear)] == layers
    first, second = snapshots.states
    lora_keys = [k for k in first if k.endswith((".up", ".down"))]
    assert len(lora_keys) == 2 * len(layers)
    # every factor changed during experience 2 (nothing frozen, nothing merged)
    assert all(not torch.equal(first[k], second[k]) for k in lora_keys)
    assert all(torch.equal(first[k], second[k]) for k in first if k not in lora_keys)
    assert all(p.requires_grad for layer in layers for p in (layer.up, layer.down))


def test_moe_lora_freezes_old_experts_and_router_rows(tiny_clip, tokenizer):
    snapshots = Snapshots()
    strategy = make("moe-lora", tiny_clip, tokenizer, plugins=[snapshots], rank=4)
    for experience in tiny_stream().train_stream:
        strategy.train(experience)
    first, second = snapshots.states
    layers = find_layers(tiny_clip, MoELoRALinear)
    assert all(layer.num_experts == 2 and layer.num_frozen == 2 for layer in layers.values())
    changed = 0
    for name in layers:
        for key in ("expert_down", "expert_up", "router_weight"):
            assert torch.equal(second[f"{name}.{key}"][:1], first[f"{name}.{key}"]), (name, key)
        changed += bool(second[f"{name}.expert_up"][1].any())
    assert changed == len(layers)  # every new expert trained


class LossSpy(SupervisedPlugin):
    def __init__(self):
        super().__init__()
        self.losses = []

    def before_backward(self, strategy, **kwargs):
        self.losses.append(strategy.loss.item())


@pytest.mark.parametrize("form,topk", [("release", 4), ("switch", 2)])
def test_the_load_balancing_term_enters_the_loss(tiny_clip, tokenizer, form, topk):
    # the release's term is informative even with every atom kept (k = R = 4); the Switch
    # term needs top-k < R (else it is 1)
    import copy

    runs = {}
    for coef in (0.5, 0.0):
        torch.manual_seed(0)
        spy = LossSpy()
        # the plugin is present in both runs (same forward path); the second multiplies by 0
        strategy = make("moram-load-balance", copy.deepcopy(tiny_clip), tokenizer, plugins=[spy],
                        iterations=1, atoms_per_task=4, topk=topk, balance_coef=0.5,
                        balance_form=form)
        assert strategy.balance_plugin.form == form
        strategy.balance_plugin.coef = coef
        strategy.train(tiny_stream().train_stream[0])
        runs[coef] = (spy.losses[0], strategy.balance_plugin.last_term.item())
    (with_term, term), (without, term_again) = runs[0.5], runs[0.0]
    assert term == pytest.approx(term_again, rel=1e-6)
    assert term > 0 and term != pytest.approx(1.0)  # not trivially uniform
    assert with_term - without == pytest.approx(0.5 * term, rel=1e-4)


def test_balance_coefficient_is_validated(tiny_clip, tokenizer):
    with pytest.raises(ValueError, match="balance_coef"):
        make("moram", tiny_clip, tokenizer, balance_coef=-1.0)


def test_a_model_with_other_moram_layers_is_refused_not_silently_used(tiny_clip, tokenizer):
    make("moram-self-activation", tiny_clip, tokenizer)  # injects topk=None, tau 1, no gate
    make("moram-self-activation", tiny_clip, tokenizer)  # the same options: fine
    with pytest.raises(ValueError, match=r"topk=None \(asked: 16\).*temperature=1.0 \(asked: 0.01\)"):
        make("moram", tiny_clip, tokenizer)
    with pytest.raises(ValueError, match="router=False"):
        make("moram-external-router", tiny_clip, tokenizer)


def fresh_run(name, make_stream, tokenizer, **kwargs):
    torch.manual_seed(0)
    model = open_clip.CLIP(**TINY_CONFIG)
    metric = AccuracyMatrix()
    strategy = get_strategy(name)(model=model, tokenizer=tokenizer, iterations=3, train_mb_size=4,
                                  evaluator=EvaluationPlugin(metric, loggers=[]), progress=False,
                                  lr=1e-2, **kwargs)
    return strategy, make_stream("all", train_sizes=(8, 6, 6), test_size=4), metric


@pytest.mark.parametrize("name,kwargs", [
    ("moe-lora", {"rank": 4}),
    ("moram-external-router", {"atoms_per_task": 4, "topk": 2}),
    ("seq-lora", {"rank": 4}),
])
def test_resume_gives_the_identical_matrix(name, kwargs, make_stream, tokenizer, tmp_path):
    strategy, benchmark, metric = fresh_run(name, make_stream, tokenizer, **kwargs)
    # two experiences: the resumed run must rebuild experts/atoms/router rows of experience 1
    assert run_stream(strategy, benchmark, tmp_path / "whole", max_experiences=2,
                      progress=False) == 2
    expected_matrix, expected_state = metric.result(), strategy.model.state_dict()

    strategy, benchmark, metric = fresh_run(name, make_stream, tokenizer, **kwargs)
    assert run_stream(strategy, benchmark, tmp_path / "cut", max_experiences=1, progress=False) == 1
    checkpoint = torch.load(tmp_path / "cut" / "checkpoint.pt", weights_only=True)
    assert all(".base." not in key for key in checkpoint["model"])  # adapters only, not CLIP
    torch.rand(1000)  # a new process: new objects, and the global RNG moved on
    strategy, benchmark, metric = fresh_run(name, make_stream, tokenizer, **kwargs)
    assert run_stream(strategy, benchmark, tmp_path / "cut", max_experiences=2,
                      progress=False) == 2
    assert metric.result().tolist() == expected_matrix.tolist()
    state = strategy.model.state_dict()
    assert set(state) == set(expected_state)
    assert all(torch.equal(state[k], v) for k, v in expected_state.items())
