"""MoRAM as an Avalanche strategy, and the paper's routing ablation as named variants of it.

:class:`MoRAM` is the shared CLIP loop (:class:`~moram_avalanche.strategies.base.CLIPStrategy`)
plus MoRAM layers injected into every target linear, plus the growth plugin
:class:`~moram_avalanche.strategies.plugins.moram.MoRAMPlugin` (and, for the load-balancing
row, :class:`~moram_avalanche.strategies.plugins.load_balance.LoadBalancePlugin`).

The paper's routing table (X-TAIL, ViT-B/16; Transfer / Average / Last) as named strategies:

=====================  ==========================  =====================  ======================
row                    strategy name               options                paper
=====================  ==========================  =====================  ======================
MoE-LoRA coarse        ``moe-lora``                (:class:`MoELoRA`)     62.56 / 69.45 / 74.53
external router        ``moram-external-router``   router, top-k 16,      60.09 / 65.97 / 69.76
                                                   tau 1, no gate
self-activation        ``moram-self-activation``   no top-k, tau 1,       60.26 / 65.94 / 69.85
                                                   no gate
+top-k                 ``moram-self+topk``         top-k 16               60.69 / 66.52 / 70.62
+temperature           ``moram-self+temperature``  tau 0.01               62.07 / 71.15 / 79.62
+threshold             ``moram-self+threshold``    delta 0.2              60.78 / 66.83 / 71.08
full                   ``moram``                   16 / 0.01 / 0.2        63.30 / 72.70 / 80.90
load balancing         ``moram-load-balance``      full + balance 0.01    Last 77.3 (vs 80.9)
=====================  ==========================  =====================  ======================

Reading of the table: each "+X" row is self-activation plus that one component, not a
cumulative chain -- "+threshold" (71.08) is far below "+temperature" (79.62) while the full
method (all three) is above both, so the rows cannot be successive additions.

The external router keeps top-k (as sparse MoE routers do) and uses tau = 1 (the router
learns the scale of its logits) and no eval gate (the gate compares a cosine-like relevance
in [-1, 1]; router logits are unbounded). Its new rows are Kaiming-uniform like an
``nn.Linear`` (see :mod:`moram_avalanche.layers.moram_variants`): zero rows would lose
every top-k slot to the frozen rows of earlier tasks, and later tasks would hardly train.

The load-balancing row adds ``0.01 * mean_layers(term)`` to the full method's loss. The
term is by default the one of the release's commented-out training forward,
``R * sum_i Pbar_i^2`` with ``Pbar_i`` the mean over tokens of atom ``i``'s kept mixture
weight (:func:`moram_avalanche.layers.moram_variants.release_balance_term`;
Artificer-AI-Lab/MoRAM, ``XTAIL/loralib/moram.py``, ``forward_backup``), the likeliest source of the paper's row: the
active release returns a loss of 0, which its training loop discards (``XTAIL/models/moram.py``).
``balance_form="switch"`` uses Switch Transformer's ``R * sum_i f_i P_i`` instead (Fedus et
al. 2022, eq. 4; :func:`~moram_avalanche.layers.moram_variants.balance_term`), which is
exactly 1, with no gradient, while every atom is kept -- all of the first task at r = k = 16. The coefficient
0.01 is Switch Transformer's alpha; the paper does not give one.

Every variant is the :class:`MoRAM` strategy with other defaults (any of them can still be
overridden), so the CLIP loop, loss, optimiser and the paper's other hyper-parameters are
MoRAM's.
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple, Optional, Tuple

from ..algorithms.schedules import DomainLR
from ..clip.inject import TARGET_PATHS, inject_moram
from ..clip.towers import ENCODERS
from ..layers.base import find_layers
from ..layers.moram import MoRAMLinear, routing_options
from ..layers.moram_variants import BALANCE_FORMS, moram_layer_type
from ..utils.checks import check_number
from ..utils.names import check_names
from .base import CLIPStrategy
from .needs import StrategyNeeds
from .plugins.load_balance import LoadBalancePlugin
from .plugins.moram import MoRAMPlugin


class AblationRow(NamedTuple):
    """One row of the paper's routing table."""

    strategy: str  # name in STRATEGIES
    options: dict  # keyword options of that strategy (on top of its defaults)
    paper: Tuple[Optional[float], Optional[float], Optional[float]]  # Transfer, Average, Last


_NO_TOPK, _TAU_ONE, _NO_GATE = {"topk": None}, {"temperature": None}, {"threshold": 0.0}

#: paper row -> (strategy name, options, paper numbers on X-TAIL)
ROUTING_ABLATIONS = {
    "moe-lora": AblationRow("moe-lora", {}, (62.56, 69.45, 74.53)),
    "external-router": AblationRow(
        "moram-external-router", {"router": True, "topk": 16, **_TAU_ONE, **_NO_GATE},
        (60.09, 65.97, 69.76)),
    "self-activation": AblationRow(
        "moram-self-activation", {**_NO_TOPK, **_TAU_ONE, **_NO_GATE}, (60.26, 65.94, 69.85)),
    "+top-k": AblationRow(
        "moram-self+topk", {"topk": 16, **_TAU_ONE, **_NO_GATE}, (60.69, 66.52, 70.62)),
    "+temperature": AblationRow(
        "moram-self+temperature", {**_NO_TOPK, "temperature": 0.01, **_NO_GATE},
        (62.07, 71.15, 79.62)),
    "+threshold": AblationRow(
        "moram-self+threshold", {**_NO_TOPK, **_TAU_ONE, "threshold": 0.2}, (60.78, 66.83, 71.08)),
    "full": AblationRow(
        "moram", {"topk": 16, "temperature": 0.01, "threshold": 0.2}, (63.30, 72.70, 80.90)),
    "load-balance": AblationRow("moram-load-balance", {"balance_coef": 0.01}, (None, None, 77.3)),
}


#: the MoRAM paper's CLIP setting, written out (method reference; [Artificer-AI-Lab/MoRAM
#: XTAIL/runner_moram.sh, main.py]): r = 16 atoms per task, top-k 16, tau 0.01, delta 0.2, both
#: encoders, q/k/v/out/c_fc/c_proj, AdamW (0.9, 0.9999) lr 5e-4 without weight decay, cosine,
#: 500 iterations per task, batch 64 -- the same on X-TAIL (16 shots) and 5-shot MTIL
MORAM_PAPER_SETTINGS = {
    "atoms_per_task": 16, "topk": 16, "temperature": 0.01, "threshold": 0.2,
    "encoders": tuple(ENCODERS), "targets": tuple(TARGET_PATHS), "iterations": 500, "lr": 5e-4,
    "train_mb_size": 64, "betas": (0.9, 0.9999), "weight_decay": 0.0, "warmup": 0,
}
MORAM_PAPER_SOURCE = ("the MoRAM paper's CLIP setting and its release [Artificer-AI-Lab/MoRAM "
                      "XTAIL/runner_moram.sh, main.py]")


class MoRAM(CLIPStrategy):
    """MoRAM (ICML 2026) for CLIP: rank-1 atom banks on every frozen linear, grown per task.

    Injects :class:`~moram_avalanche.layers.moram.MoRAMLinear` into ``model`` (unless it already
    holds them) and adds a :class:`~moram_avalanche.strategies.plugins.moram.MoRAMPlugin`.
    Defaults are the paper's CLIP setting: r = 16 atoms per task, top-k 16, temperature 0.01,
    threshold 0.2, both encoders, q/k/v/out/c_fc/c_proj, AdamW lr 5e-4, 500 iterations per
    task, batch 64 (method reference).

    Args (keyword-only, besides CLIPStrategy's): atoms_per_task, topk, temperature,
    threshold, encoders, targets, prune_mass (None: no pruning; paper's option: 0.99),
    record_activations.

    Routing ablations (paper's routing table; :data:`ROUTING_ABLATIONS` names the rows):
    ``topk=None`` (no sparsity), ``temperature=None`` (tau = 1), ``threshold=0`` (no gate) keep
    :class:`~moram_avalanche.layers.moram.MoRAMLinear`; ``router=True`` (an external learned
    router over the atoms) and ``balance_coef > 0`` (a load-balancing term added to the loss by
    a :class:`~moram_avalanche.strategies.plugins.load_balance.LoadBalancePlugin`; 0 = the
    method) of form ``balance_form`` (``"release"``: the release's commented-out
    ``R * sum_i Pbar_i^2``, default; ``"switch"``: Switch Transformer's) build
    :class:`~moram_avalanche.layers.moram_variants.MoRAMAblationLinear` layers.

    A model that already carries MoRAM layers is used as it is when they were built with these
    options, and refused otherwise (a silently different variant would be run).
    """

    needs = StrategyNeeds(demo=lambda demo: {"lr": demo.moram_lr, "topk": demo.topk,
                                             "atoms_per_task": demo.atoms_per_task},
                          paper=lambda protocol: dict(MORAM_PAPER_SETTINGS),
                          paper_source=MORAM_PAPER_SOURCE,
                          check=lambda options: check_moram_strategy_options(options))

    def __init__(
        self,
        *,
        model,
        tokenizer,
        atoms_per_task: int = 16,
        topk: Optional[int] = 16,
        temperature: Optional[float] = 0.01,
        threshold: float = 0.2,
        router: bool = False,
        balance_coef: float = 0.0,
        balance_form: str = "release",
        encoders=ENCODERS,
        targets=tuple(TARGET_PATHS),
        prune_mass: Optional[float] = None,
        record_activations: bool = True,
        iterations: int = 500,
        lr: float | DomainLR = 5e-4,
        train_mb_size: int = 64,
        plugins=None,
        **kwargs,
    ):
        options = routing_options(atoms_per_task, topk, temperature, threshold)
        load_balance = balance_form if balance_coef > 0 else False
        kind = moram_layer_type(router=router, load_balance=load_balance)
        options["router"] = bool(router)
        if find_layers(model, MoRAMLinear):
            _check_existing_layers(model, kind, options)
        else:
            inject_moram(model, encoders=encoders, targets=targets, atoms_per_task=atoms_per_task,
                         topk=topk, temperature=temperature, threshold=threshold, router=router,
                         load_balance=load_balance)
        self.moram_plugin = MoRAMPlugin(prune_mass=prune_mass, record=record_activations)
        own = [self.moram_plugin]
        self.balance_plugin = None
        if balance_coef > 0:
            self.balance_plugin = LoadBalancePlugin(balance_coef, balance_form)
            own.append(self.balance_plugin)
        super().__init__(model=model, tokenizer=tokenizer, iterations=iterations, lr=lr,
                         train_mb_size=train_mb_size, plugins=[*own, *(plugins or [])], **kwargs)


def check_moram_strategy_options(options) -> None:
    """The value checks of :class:`MoRAM`'s own options that are given in ``options``
    (``needs.check``: nothing is built)."""
    routing_options(**{k: options[k] for k in ("atoms_per_task", "topk", "temperature", "threshold")
                       if k in options})
    if "balance_coef" in options:
        check_number("balance_coef", options["balance_coef"], low=0, hint="0: no load balancing")
    if "balance_form" in options and options["balance_form"] not in BALANCE_FORMS:
        raise ValueError(f"balance_form must be one of {BALANCE_FORMS}, got {options['balance_form']!r}")
    if options.get("prune_mass") is not None:
        check_number("prune_mass", options["prune_mass"], low=0, low_open=True, high=1,
                     hint="the share of activation mass kept; the paper's option: 0.99")
    if "encoders" in options:
        check_names(options["encoders"], ENCODERS, "encoder")
    if "targets" in options:
        check_names(options["targets"], tuple(TARGET_PATHS), "target")


def _check_existing_layers(model, kind: type, options: dict) -> None:
    """Refuse a model whose MoRAM layers are not of ``kind`` built with ``options``.

    A model that already carries MoRAM layers is used as it is; without this check a routing
    ablation run on such a model would silently be another variant.
    """
    for name, layer in find_layers(model, MoRAMLinear).items():
        have = {"router": False, **layer.options}  # the method's layer routes without a router
        differ = [f"{key}={value!r} (asked: {options[key]!r})" for key, value in have.items()
                  if key in options and value != options[key]]
        if type(layer) is not kind:
            differ.insert(0, f"type {type(layer).__name__} (asked: {kind.__name__})")
        if differ:
            raise ValueError(
                f"the model already carries MoRAM layers, built with other options than this "
                f"strategy's: {name} has {', '.join(differ)}. Pass the options the layers were "
                "built with, or a model without MoRAM layers (the strategy injects them)")


class _RoutingVariant(MoRAM):
    """MoRAM with the defaults of one row of :data:`ROUTING_ABLATIONS` (overridable).

    Each variant declares its own paper settings: MoRAM's with its row's options on top."""

    ROW = "full"

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        row = ROUTING_ABLATIONS[cls.ROW].options
        cls.needs = replace(MoRAM.needs, paper=lambda protocol: {**MORAM_PAPER_SETTINGS, **row},
                            paper_source=f"{MORAM_PAPER_SOURCE}, with the routing table's row "
                                         f"{cls.ROW!r}: {row}")

    def __init__(self, **kwargs):
        super().__init__(**{**ROUTING_ABLATIONS[self.ROW].options, **kwargs})


class MoRAMExternalRouter(_RoutingVariant):
    """Ablation "external router over rank-1 atoms": a learned ``Linear(d_in -> atoms)``
    router (grown per task, new rows trainable and Kaiming-uniform, old rows frozen) replaces
    self-activation; top-k 16, tau 1, no gate."""

    ROW = "external-router"


class MoRAMSelfActivation(_RoutingVariant):
    """Ablation "self-activation": ``softmax(p / ||p||)`` over every atom (no top-k, tau 1,
    no gate)."""

    ROW = "self-activation"


class MoRAMSelfTopK(_RoutingVariant):
    """Ablation "+top-k": self-activation with the top-16 atoms kept (tau 1, no gate)."""

    ROW = "+top-k"


class MoRAMSelfTemperature(_RoutingVariant):
    """Ablation "+temperature": self-activation with tau = 0.01 (no top-k, no gate)."""

    ROW = "+temperature"


class MoRAMSelfThreshold(_RoutingVariant):
    """Ablation "+threshold": self-activation with the eval gate delta = 0.2 (no top-k, tau 1)."""

    ROW = "+threshold"


class MoRAMLoadBalance(_RoutingVariant):
    """The full method plus 0.01 x the release's load-balancing term (see the module docstring;
    ``balance_form="switch"`` for Switch Transformer's)."""

    ROW = "load-balance"

#: strategy name -> class of the routing-ablation variants (for the registry)
ABLATION_STRATEGIES = {
    "moram-external-router": MoRAMExternalRouter,
    "moram-self-activation": MoRAMSelfActivation,
    "moram-self+topk": MoRAMSelfTopK,
    "moram-self+temperature": MoRAMSelfTemperature,
    "moram-self+threshold": MoRAMSelfThreshold,
    "moram-load-balance": MoRAMLoadBalance,
}


__all__ = ["ABLATION_STRATEGIES", "MORAM_PAPER_SETTINGS", "MORAM_PAPER_SOURCE", "ROUTING_ABLATIONS", "AblationRow",
           "MoRAM", "MoRAMExternalRouter", "check_moram_strategy_options",
           "MoRAMLoadBalance", "MoRAMSelfActivation", "MoRAMSelfTemperature", "MoRAMSelfThreshold",
           "MoRAMSelfTopK"]
