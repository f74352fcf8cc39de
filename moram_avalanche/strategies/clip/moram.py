"""MoRAM as an Avalanche strategy, and the paper's routing ablation as named variants of it.

:class:`MoRAM` is the shared CLIP loop (:class:`~moram_avalanche.strategies.clip.loop.CLIPStrategy`)
plus MoRAM layers injected into every target linear, plus the growth plugin
:class:`~moram_avalanche.strategies.plugins.moram.MoRAMPlugin` (and, for the load-balancing
row, :class:`~moram_avalanche.strategies.plugins.load_balance.LoadBalancePlugin`).

The paper's routing table (X-TAIL, ViT-B/16) as named strategies (the paper's numbers:
``moram-avalanche reproduce routing --paper``, from the paper's CSV files):

=====================  ==========================  ===========================================
row                    strategy name               options
=====================  ==========================  ===========================================
MoE-LoRA coarse        ``moe-lora``                (:class:`MoELoRA`)
external router        ``moram-external-router``   router, MoRAM's top-k, tau 1, no gate
self-activation        ``moram-self-activation``   no top-k, tau 1, no gate
+top-k                 ``moram-self+topk``         MoRAM's top-k
+temperature           ``moram-self+temperature``  MoRAM's tau
+threshold             ``moram-self+threshold``    MoRAM's delta
full                   ``moram``                   MoRAM's top-k, tau and delta
load balancing         ``moram-load-balance``      full + balance coefficient (Switch's alpha)
=====================  ==========================  ===========================================

Reading of the table: each "+X" row is self-activation plus that one component, not a
cumulative chain -- the paper's "+threshold" is far below "+temperature" in Last while the
full method (all three) is above both, so the rows cannot be successive additions.

The external router keeps top-k (as sparse MoE routers do) and uses tau = 1 (the router
learns the scale of its logits) and no eval gate (the gate compares a cosine-like relevance
in [-1, 1]; router logits are unbounded). Its new rows are Kaiming-uniform like an
``nn.Linear`` (see :mod:`moram_avalanche.layers.moram.variants`): zero rows would lose
every top-k slot to the frozen rows of earlier tasks, and later tasks would hardly train.

The load-balancing row adds ``alpha * mean_layers(term)`` to the full method's loss. The
term is by default the one of the release's commented-out training forward,
``R * sum_i Pbar_i^2`` with ``Pbar_i`` the mean over tokens of atom ``i``'s kept mixture
weight (:func:`moram_avalanche.layers.moram.variants.release_balance_term`;
Artificer-AI-Lab/MoRAM, ``XTAIL/loralib/moram.py``, ``forward_backup``), the likeliest source of the paper's row: the
active release returns a loss of 0, which its training loop discards (``XTAIL/models/moram.py``).
``balance_form="switch"`` uses Switch Transformer's ``R * sum_i f_i P_i`` instead (Fedus et
al. 2022, eq. 4; :func:`~moram_avalanche.layers.moram.variants.balance_term`), which is
exactly 1, with no gradient, while every atom is kept -- all of the first task at r = k. The coefficient
alpha is Switch Transformer's (:data:`SWITCH_ALPHA`); the paper does not give one.

Every variant is the :class:`MoRAM` strategy with other defaults (any of them can still be
overridden), so the CLIP loop, loss, optimiser and the paper's other hyper-parameters are
MoRAM's.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

from ...clip.inject import TARGET_PATHS, inject_adapters
from ...clip.towers import ENCODERS
from ...layers.base import find_layers
from ...layers.moram.config import MoRAMLayerConfig
from ...layers.moram.layer import MoRAMLinear
from ...layers.moram.variants import BALANCE_FORMS, moram_layer, moram_layer_type
from ...utils.checks import check_number
from ...utils.names import check_names
from ..moram_setting import MORAM
from ..needs import StrategyNeeds
from ..plugins.load_balance import SWITCH_ALPHA, LoadBalancePlugin
from ..plugins.moram import MoRAMPlugin
from .loop import CLIPStrategy


class AblationRow(NamedTuple):
    """One row of the paper's routing table (its numbers: the paper's CSV files, read by
    :mod:`moram_avalanche.experiments.clip.paper_tables`)."""

    strategy: str  # name in STRATEGIES
    options: dict  # keyword options of that strategy (on top of its defaults)


_NO_TOPK, _TAU_ONE, _NO_GATE = {"topk": None}, {"temperature": None}, {"threshold": 0.0}
_TOPK, _TAU, _DELTA = {"topk": MORAM.topk}, {"temperature": MORAM.temperature}, {"threshold": MORAM.threshold}

#: paper row -> (strategy name, options)
ROUTING_ABLATIONS = {
    "moe-lora": AblationRow("moe-lora", {}),
    "external-router": AblationRow("moram-external-router", {"router": True, **_TOPK, **_TAU_ONE, **_NO_GATE}),
    "self-activation": AblationRow("moram-self-activation", {**_NO_TOPK, **_TAU_ONE, **_NO_GATE}),
    "+top-k": AblationRow("moram-self+topk", {**_TOPK, **_TAU_ONE, **_NO_GATE}),
    "+temperature": AblationRow("moram-self+temperature", {**_NO_TOPK, **_TAU, **_NO_GATE}),
    "+threshold": AblationRow("moram-self+threshold", {**_NO_TOPK, **_TAU_ONE, **_DELTA}),
    "full": AblationRow("moram", {**_TOPK, **_TAU, **_DELTA}),
    "load-balance": AblationRow("moram-load-balance", {"balance_coef": SWITCH_ALPHA}),
}


class MoRAM(CLIPStrategy):
    """MoRAM (ICML 2026) for CLIP: rank-1 atom banks on every frozen linear, grown per task.

    Injects :class:`~moram_avalanche.layers.moram.layer.MoRAMLinear` into ``model`` (unless it already
    holds them) and adds a :class:`~moram_avalanche.strategies.plugins.moram.MoRAMPlugin`.
    Defaults are the paper's CLIP setting (:data:`~moram_avalanche.strategies.moram_setting.MORAM`,
    written there once with its source): r atoms per task, top-k, temperature and threshold
    here; AdamW lr, iterations per task and batch are CLIPStrategy's, which are MoRAM's; both
    encoders, q/k/v/out/c_fc/c_proj.

    Args (keyword-only, besides CLIPStrategy's): atoms_per_task, topk, temperature,
    threshold, encoders, targets, prune_mass (None: no pruning; paper's option: 0.99),
    record_activations.

    Routing ablations (paper's routing table; :data:`ROUTING_ABLATIONS` names the rows):
    ``topk=None`` (no sparsity), ``temperature=None`` (tau = 1), ``threshold=0`` (no gate) keep
    :class:`~moram_avalanche.layers.moram.layer.MoRAMLinear`; ``router=True`` (an external learned
    router over the atoms) and ``balance_coef > 0`` (a load-balancing term added to the loss by
    a :class:`~moram_avalanche.strategies.plugins.load_balance.LoadBalancePlugin`; 0 = the
    method) of form ``balance_form`` (``"release"``: the release's commented-out
    ``R * sum_i Pbar_i^2``, default; ``"switch"``: Switch Transformer's) build
    :class:`~moram_avalanche.layers.moram.variants.MoRAMAblationLinear` layers.

    A model that already carries MoRAM layers is used as it is when they were built with these
    options, and refused otherwise (a silently different variant would be run).
    """

    #: its banks grow by ``atoms_per_task`` atoms per task (a run checks they fit first)
    needs = StrategyNeeds(atoms="atoms_per_task")
    check_values = staticmethod(lambda options: check_moram_strategy_options(options))

    def __init__(
        self,
        *,
        model,
        tokenizer,
        atoms_per_task: int = MORAM.atoms_per_task,
        topk: Optional[int] = MORAM.topk,
        temperature: Optional[float] = MORAM.temperature,
        threshold: float = MORAM.threshold,
        router: bool = False,
        balance_coef: float = 0.0,
        balance_form: str = "release",
        encoders=ENCODERS,
        targets=tuple(TARGET_PATHS),
        prune_mass: Optional[float] = None,
        record_activations: bool = True,
        plugins=None,
        **kwargs,
    ):
        #: the layers' options, checked once (:class:`~moram_avalanche.layers.moram.config.MoRAMLayerConfig`)
        self.config = MoRAMLayerConfig(atoms_per_task, topk, temperature, threshold)
        load_balance = balance_form if balance_coef > 0 else False
        kind = moram_layer_type(router=router, load_balance=load_balance)
        if find_layers(model, MoRAMLinear):
            _check_existing_layers(model, kind, {**self.config.options(), "router": bool(router)})
        else:
            inject_adapters(model, lambda linear: moram_layer(linear, **vars(self.config), router=router,
                                                              load_balance=load_balance),
                            MoRAMLinear, encoders, targets)
        self.moram_plugin = MoRAMPlugin(prune_mass=prune_mass, record=record_activations)
        own = [self.moram_plugin]
        self.balance_plugin = None
        if balance_coef > 0:
            self.balance_plugin = LoadBalancePlugin(balance_coef, balance_form)
            own.append(self.balance_plugin)
        super().__init__(model=model, tokenizer=tokenizer, plugins=[*own, *(plugins or [])], **kwargs)


def check_moram_strategy_options(options) -> None:
    """The value checks of :class:`MoRAM`'s own options that are given in ``options``
    (``MoRAM.check_values``: nothing is built)."""
    MoRAMLayerConfig(**{k: options[k] for k in ("atoms_per_task", "topk", "temperature", "threshold") if k in options})
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
    """MoRAM with the defaults of one row of :data:`ROUTING_ABLATIONS` (overridable)."""

    ROW = "full"

    def __init__(self, **kwargs):
        super().__init__(**{**ROUTING_ABLATIONS[self.ROW].options, **kwargs})


class MoRAMExternalRouter(_RoutingVariant):
    """Ablation "external router over rank-1 atoms": a learned ``Linear(d_in -> atoms)``
    router (grown per task, new rows trainable and Kaiming-uniform, old rows frozen) replaces
    self-activation; MoRAM's top-k, tau 1, no gate."""

    ROW = "external-router"


class MoRAMSelfActivation(_RoutingVariant):
    """Ablation "self-activation": ``softmax(p / ||p||)`` over every atom (no top-k, tau 1,
    no gate)."""

    ROW = "self-activation"


class MoRAMSelfTopK(_RoutingVariant):
    """Ablation "+top-k": self-activation with MoRAM's top-k atoms kept (tau 1, no gate)."""

    ROW = "+top-k"


class MoRAMSelfTemperature(_RoutingVariant):
    """Ablation "+temperature": self-activation with MoRAM's tau (no top-k, no gate)."""

    ROW = "+temperature"


class MoRAMSelfThreshold(_RoutingVariant):
    """Ablation "+threshold": self-activation with MoRAM's eval gate delta (no top-k, tau 1)."""

    ROW = "+threshold"


class MoRAMLoadBalance(_RoutingVariant):
    """The full method plus :data:`SWITCH_ALPHA` x the release's load-balancing term (see the module docstring;
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


__all__ = ["ABLATION_STRATEGIES", "ROUTING_ABLATIONS", "SWITCH_ALPHA", "AblationRow",
           "MoRAM", "MoRAMExternalRouter", "check_moram_strategy_options",
           "MoRAMLoadBalance", "MoRAMSelfActivation", "MoRAMSelfTemperature", "MoRAMSelfThreshold",
           "MoRAMSelfTopK"]
