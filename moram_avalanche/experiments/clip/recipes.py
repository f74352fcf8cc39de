"""The CLIP family's recipes for each strategy, as data: the demo's, the paper's, the cost measurement's.

A strategy declares its options once (its signature and ``check_values``;
:mod:`~moram_avalanche.strategies.options`), with the paper's values as defaults (MoRAM's in
:data:`~moram_avalanche.strategies.moram_setting.MORAM`). What the app runs each strategy
with is here, keyed by registry name, and read by the app alone:

* :data:`DEMO_OPTIONS`: its options at the demo's small budget, a function of the demo's
  settings (:class:`~moram_avalanche.experiments.clip.demo.DemoConfig`) -- read by ``demo``;
* :data:`PAPER_OPTIONS` (with :data:`PAPER_SOURCES`): the settings of the paper's runs --
  read by ``reproduce`` (:mod:`.reproduce`), which writes every one out in its plan and in
  each run's folder. They are the strategy's own defaults, read from its declaration
  (:func:`declared`), plus the values where the paper's run differs from a default (none is
  written twice); the same on every protocol of the paper's tables (each source runs X-TAIL and
  5-shot MTIL alike);
* :data:`REFERENCE_PATHS`: where the paper's reference data lie under a data root, by kind;
* :data:`SHORT_BUDGET`: what keeps its share of the budget when the iterations per experience
  are cut to ``n`` (``reproduce --rehearse``, smoke runs);
* :data:`COST_OPTIONS`: stand-ins for what needs a download or trains outside the measured loop,
  for ``moram-avalanche cost`` (:mod:`..cost.measure`).

A strategy missing from a table gets nothing from it ({}): its defaults.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Mapping

from ...algorithms.analytic import DUAL_REGULARIZATION, PRIMAL_REGULARIZATION
from ...algorithms.ddas import random_conv_features
from ...strategies.clip.moe_adapters import RECIPES as MOE_RECIPES
from ...strategies.clip.moe_adapters import untrained_alexnet_features
from ...strategies.clip.moram import ABLATION_STRATEGIES, ROUTING_ABLATIONS
from ...strategies.moram_setting import MORAM
from ...strategies.options import strategy_parameters
from ...strategies.registry import get_strategy


def declared(name: str, *options: str) -> Dict[str, Any]:
    """``{option: default}`` of registered strategy ``name`` as it declares them (its
    signature, or a class it derives from): a recipe reads a default, never copies it."""
    parameters = strategy_parameters(get_strategy(name))
    missing = [option for option in options if parameters.get(option) is None
               or parameters[option].default is parameters[option].empty]
    if missing:
        raise ValueError(f"{name} declares no default for {missing}")
    return {option: parameters[option].default for option in options}


def scaled(value: int, iterations: int, of: int, *, at_least: int = 0) -> int:
    """``value`` (set for a budget of ``of`` iterations) scaled to ``iterations``, rounded down,
    never below ``at_least``."""
    return max(at_least, value * iterations // of)


# ---------------------------------------------------------------- the paper's runs
_OPTIMISATION = ("iterations", "lr", "train_mb_size", "betas", "weight_decay")
_ZSCL_OPTIMISATION = ("lr", "iterations", "warmup", "label_smoothing", "train_mb_size", "betas", "weight_decay",
                      "text_to_image_loss")
_DISTILLATION = ("temperature", "image_weight", "text_weight")

_MORAM_PAPER = {**MORAM.options(), **declared("moram", "encoders", "targets")}
_ZSCL_PAPER = declared("wiseft", *_ZSCL_OPTIMISATION)  # ZSCLFineTune's, which WiSE-FT keeps

#: registry name -> keyword arguments of the paper's runs of it
PAPER_OPTIONS: Dict[str, Dict[str, Any]] = {
    "zeroshot": {},
    "moram": _MORAM_PAPER,
    **{name: {**_MORAM_PAPER, **ROUTING_ABLATIONS[cls.ROW].options} for name, cls in ABLATION_STRATEGIES.items()},
    "moe-lora": declared("moe-lora", "rank", "temperature", "encoders", "targets", *_OPTIMISATION),
    "codyra": declared("codyra", "rank", "encoders", "targets", "max_kappa", "kappa_steps", "dense_fraction",
                       *_OPTIMISATION, "warmup"),
    "finetune-alone": dict(_ZSCL_PAPER),
    "wiseft": {**_ZSCL_PAPER, **declared("wiseft", "alpha", "anchor")},
    "lwf": {**_ZSCL_PAPER, **declared("lwf", *_DISTILLATION)},
    "lwf-vr": {**_ZSCL_PAPER, **declared("lwf-vr", *_DISTILLATION, "sentences", "words")},
    "zscl": {**_ZSCL_PAPER, **declared("zscl", *_DISTILLATION, "l2_weight", "average_every")},
    # the ZSCL code's iCaRL: no label smoothing (icarl.sh sets none), ICaRL's own default
    "icarl": {**_ZSCL_PAPER, **declared("icarl", "label_smoothing", "memory_size", "balanced", "max_read",
                                        "teacher", *_DISTILLATION)},
    "inflora": declared("inflora", "rank", "encoders", "targets", "lambda_b", "lambda_e", "memory", "lr_schedule",
                        *_OPTIMISATION, "text_to_image_loss"),
    # the release's few-shot recipe (5-shot MTIL; on X-TAIL, where MoE-Adapters has no release, the same)
    "moe-adapters": {**declared("moe-adapters", "recipe", "experts", "bottleneck", "topk", "dropout",
                                "adapter_scale", "freeze_per_task", "warmup", "label_smoothing", "betas",
                                "train_mb_size", "selector", "ddas_routing", "ae_iterations",
                                "ae_reference_iterations", "text_to_image_loss"),
                     **MOE_RECIPES["few-shot"]},
    "rail-primal": {"form": "primal", **declared("rail-primal", "fusion_weight", "hidden_dim"),
                    "regularization": PRIMAL_REGULARIZATION, **declared("rail-primal", "passes", "train_mb_size")},
    "rail-dual": {"form": "dual", **declared("rail-dual", "fusion_weight", "kernel", "gamma"),
                  "regularization": DUAL_REGULARIZATION, **declared("rail-dual", "passes", "train_mb_size")},
}

_MORAM_SOURCE = ("the MoRAM paper's CLIP setting and its release [Artificer-AI-Lab/MoRAM "
                 "XTAIL/runner_moram.sh, main.py]")
_ZSCL_SOURCE = ("ZSCL's official MTIL scripts [Thunderbeee/ZSCL mtil/scripts/*.sh, "
                "src/args.py]; 500 iterations per task is our few-shot budget: the MoRAM "
                "paper does not give its re-run settings and ZSCL trains 1000 full-shot")
_RAIL_SOURCE = ("RAIL's official code [linghan1997/Regression-based-Analytic-Incremental-Learning "
                "configs/analytic_clip.yaml, dual_RAIL.py]; the benchmark's prompts for the "
                "zero-shot classifier (every row of a table shares one)")

#: registry name -> where its paper settings come from, and what is our choice (``reproduce --dry-run``)
PAPER_SOURCES: Dict[str, str] = {
    "zeroshot": "pre-trained CLIP, evaluated as it is",
    "moram": _MORAM_SOURCE,
    **{name: f"{_MORAM_SOURCE}, with the routing table's row {cls.ROW!r}: {ROUTING_ABLATIONS[cls.ROW].options}"
       for name, cls in ABLATION_STRATEGIES.items()},
    "moe-lora": "the MoRAM paper's routing table, coarse-grained baseline: one rank-16 LoRA "
                "expert per task behind a softmax router (rank = MoRAM's r), MoRAM's "
                "optimisation; router temperature 1 (tau* of the next row is not given)",
    "codyra": "CoDyRA's release [Artificer-AI-Lab/CoDyRA runner_codyra.sh, main.py]",
    "finetune-alone": f"{_ZSCL_SOURCE}; each domain from the pre-trained weights (the paper "
                      "does not say how its per-domain upper bound was fine-tuned: our choice)",
    "wiseft": f"{_ZSCL_SOURCE}; alpha 0.8 and the start anchor of [ZSCL mtil/scripts/WiSE_finetune.sh]",
    "lwf": f"{_ZSCL_SOURCE}; distillation of [ZSCL mtil/scripts/lwf.sh]",
    "lwf-vr": f"{_ZSCL_SOURCE}; distillation of [ZSCL mtil/scripts/lwf_vr.sh]",
    "zscl": f"{_ZSCL_SOURCE}; distillation, L2 and weight ensembling of [ZSCL mtil/scripts/ZSCL.sh]",
    "icarl": f"{_ZSCL_SOURCE}; memory, herding and distillation of [ZSCL "
             "mtil/src/models/icarl.py, mtil/scripts/icarl.sh]; both distillation terms "
             "weighted 1 (icarl.sh adds neither: our choice, as ZSCL.sh)",
    "inflora": "InfLoRA's ViT settings [liangyanshuo/InfLoRA configs, methods/inflora.py], "
               "the image encoder only as LibContinual's CLIP port [RL-VIG/LibContinual "
               "config/InfLoRA_opt_clip.yaml]; 500 iterations of batch 64 is the harness's "
               "budget (the MoRAM paper does not give its InfLoRA settings)",
    "moe-adapters": "MoE-Adapters' few-shot MTIL recipe [JiazuoYu/MoE-Adapters4CL mtil/scripts/"
                    "train/train_few_shot_router11_experts22_1000iters.sh, src/args.py]; on X-TAIL "
                    "the same recipe (no release: our choice); DDAS routes each image (the "
                    "release routes a test batch: ddas_routing='batch')",
    "rail-primal": _RAIL_SOURCE,
    "rail-dual": _RAIL_SOURCE,
}

#: registry name -> {reference kind: path under a data root} of the paper's reference data
REFERENCE_PATHS: Dict[str, Dict[str, str]] = {
    # ZSCL's --data-location [ZSCL mtil/src/datasets/imagenet.py, cc.py; mtil/datasets.md]:
    # ImageNet's training images, Conceptual Captions' validation captions
    "zscl": {"images": "ImageNet/train", "sentences": "Validation_GCC-1.1.0-Validation_output.csv"},
    # DDAS's reference images, TinyImageNet [MoE-Adapters4CL mtil/src/datasets/collections.py]
    "moe-adapters": {"images": "tiny-imagenet-200/train"},
}


def _keep_share(*options: str, at_least: int = 0):
    """A short budget keeping the share of the paper's budget of each of ``options``."""
    def short(name: str, n: int) -> Dict[str, int]:
        paper = PAPER_OPTIONS[name]
        return {option: scaled(paper[option], n, paper["iterations"], at_least=at_least) for option in options}
    return short


_WARMUP = _keep_share("warmup")

#: registry name -> the options that keep their share of a budget cut to ``n`` iterations
SHORT_BUDGET: Dict[str, Callable[[str, int], Dict[str, Any]]] = {
    **{name: _WARMUP for name in ("finetune-alone", "wiseft", "lwf", "lwf-vr", "icarl")},
    "zscl": lambda name, n: {**_WARMUP(name, n), **_keep_share("average_every", at_least=1)(name, n)},
    "moe-adapters": lambda name, n: {**_WARMUP(name, n), **{
        option: min(PAPER_OPTIONS[name][option], n) for option in ("ae_iterations", "ae_reference_iterations")}},
    "codyra": lambda name, n: {"kappa_steps": max(1, min(PAPER_OPTIONS[name]["kappa_steps"], n // 10))},
}

# ---------------------------------------------------------------- the demo
_MORAM_DEMO = lambda demo: {"lr": demo.moram_lr, "topk": demo.topk, "atoms_per_task": demo.atoms_per_task}  # noqa: E731
_FINETUNE_DEMO = lambda demo: {"lr": demo.finetune_lr, "warmup": demo.baseline_warmup}  # noqa: E731
_DISTILL_DEMO = lambda demo: {**_FINETUNE_DEMO(demo), "distill_batch_size": demo.distill_batch_size}  # noqa: E731

#: registry name -> its options at the demo's small budget, from the demo's settings (the
#: shared budget -- iterations and batch -- is the demo's own)
DEMO_OPTIONS: Dict[str, Callable[[Any], Dict[str, Any]]] = {
    "zeroshot": lambda demo: {},
    "finetune": lambda demo: {"lr": demo.finetune_lr},
    **{name: _FINETUNE_DEMO for name in ("wiseft", "finetune-alone")},
    **{name: _DISTILL_DEMO for name in ("lwf", "lwf-vr", "icarl")},
    "zscl": lambda demo: {**_DISTILL_DEMO(demo), "average_every": demo.zscl_average_every},
    # DDAS on seeded random convolution features: the release's ImageNet AlexNet is not offline
    "moe-adapters": lambda demo: {
        "lr": demo.moe_lr, "warmup": demo.baseline_warmup,
        "feature_extractor": random_conv_features(demo.seed + 3000),
        "ae_iterations": demo.ae_iterations, "ae_reference_iterations": demo.ae_reference_iterations},
    "inflora": lambda demo: {"lr": demo.inflora_lr},
    "codyra": lambda demo: {"kappa_steps": max(1, demo.iterations // 10)},
    "moram": _MORAM_DEMO,
    **{name: _MORAM_DEMO for name in ABLATION_STRATEGIES},
    **{name: (lambda demo: {}) for name in ("seq-lora", "moe-lora", "rail-primal", "rail-dual")},
}

# ---------------------------------------------------------------- the cost measurement
#: registry name -> stand-ins of the same compute for ``moram-avalanche cost`` (offline, random
#: weights): MoE-Adapters' DDAS on an untrained AlexNet, its autoencoders trained one step
COST_OPTIONS: Dict[str, Callable[[], Dict[str, Any]]] = {
    "moe-adapters": lambda: {"feature_extractor": untrained_alexnet_features(), "ae_iterations": 1,
                             "ae_reference_iterations": 1},
}


# ---------------------------------------------------------------- readers
def demo_recipe(name: str, config) -> Dict[str, Any]:
    """The demo options of strategy ``name`` for demo settings ``config`` ({} without any)."""
    recipe = DEMO_OPTIONS.get(name)
    return dict(recipe(config)) if recipe is not None else {}


def paper_options(name: str, protocol=None) -> Dict[str, Any]:
    """The keyword arguments of the paper's runs of ``name`` on ``protocol`` ({}: its defaults)."""
    return dict(PAPER_OPTIONS.get(name, {}))


def short_budget_options(name: str, iterations: int) -> Dict[str, Any]:
    """What ``name`` shortens with a budget of ``iterations`` per experience ({}: nothing)."""
    short = SHORT_BUDGET.get(name)
    return dict(short(name, iterations)) if short is not None else {}


def cost_options(name: str) -> Dict[str, Any]:
    """The stand-ins ``cost`` builds ``name`` with ({}: none)."""
    recipe = COST_OPTIONS.get(name)
    return dict(recipe()) if recipe is not None else {}


def check_recipes(paper: Mapping[str, Mapping[str, Any]] = PAPER_OPTIONS,
                  reference_paths: Mapping[str, Mapping[str, str]] = REFERENCE_PATHS) -> None:
    """Every recipe names a registered strategy, and reference paths only kinds it takes
    (ValueError). Run by the tests (nothing runs on import)."""
    from ...strategies.registry import all_strategies

    known = all_strategies()
    for table, names in (("PAPER_OPTIONS", paper), ("REFERENCE_PATHS", reference_paths),
                         ("DEMO_OPTIONS", DEMO_OPTIONS), ("SHORT_BUDGET", SHORT_BUDGET),
                         ("COST_OPTIONS", COST_OPTIONS)):
        unknown = sorted(set(names) - set(known))
        if unknown:
            raise ValueError(f"{table} names unregistered strategies {unknown}")
    for name, paths in reference_paths.items():
        takes = known[name].needs.references
        stray = sorted(set(paths) - set(takes))
        if stray:
            raise ValueError(f"reference_paths names kinds the strategy does not take: {stray} "
                             f"({name} references: {takes})")


__all__ = ["COST_OPTIONS", "DEMO_OPTIONS", "PAPER_OPTIONS", "PAPER_SOURCES", "REFERENCE_PATHS", "SHORT_BUDGET",
           "check_recipes", "cost_options", "declared", "demo_recipe", "paper_options", "scaled",
           "short_budget_options"]
