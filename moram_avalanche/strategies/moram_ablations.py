"""The MoRAM paper's routing ablation as named strategies, plus the load-balancing plugin.

Paper (routing table, X-TAIL, ViT-B/16; Transfer / Average / Last):

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
``nn.Linear`` (see :meth:`~moram_avalanche.atoms.MoRAMLinear.expand`): zero rows would lose
every top-k slot to the frozen rows of earlier tasks, and later tasks would hardly train.

The load-balancing row adds ``0.01 * mean_layers(term)`` to the full method's loss. The
term is by default the one of the release's commented-out training forward,
``R * sum_i Pbar_i^2`` with ``Pbar_i`` the mean over tokens of atom ``i``'s kept mixture
weight (:func:`moram_avalanche.atom_ops.release_balance_term`; Artificer-AI-Lab/MoRAM,
``XTAIL/loralib/moram.py``, ``forward_backup``), the likeliest source of the paper's row: the
active release returns a loss of 0, which its training loop discards (``XTAIL/models/moram.py``).
``balance_form="switch"`` uses Switch Transformer's ``R * sum_i f_i P_i`` instead (Fedus et
al. 2022, eq. 4; :func:`~moram_avalanche.atom_ops.balance_term`), which is exactly 1, with no
gradient, while every atom is kept -- all of the first task at r = k = 16. The coefficient
0.01 is Switch Transformer's alpha; the paper does not give one.

Every variant is the :class:`~moram_avalanche.strategies.moram.MoRAM` strategy with other
defaults (any of them can still be overridden), so the CLIP loop, loss, optimiser and the
paper's other hyper-parameters are MoRAM's.
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Tuple

import torch
from avalanche.core import SupervisedPlugin

from ..atom_ops import BALANCE_FORMS
from .moram import MoRAM, moram_layers


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


class LoadBalancePlugin(SupervisedPlugin):
    """Adds ``coef * mean over layers of the load-balancing term`` to the training loss.

    Before each experience every MoRAMLinear is set to record its term (``load_balance =
    form``) on every training forward; a layer called more than once in an iteration
    contributes the mean of its terms. The sum is added in ``before_backward``, after the
    strategy's criterion.

    Args:
        coef: the coefficient (Switch Transformer's alpha: 0.01).
        form: ``"release"`` (:func:`~moram_avalanche.atom_ops.release_balance_term`, default)
            or ``"switch"`` (:func:`~moram_avalanche.atom_ops.balance_term`).

    Attributes:
        last_term: the (detached) mean term of the last iteration, for logging.
    """

    def __init__(self, coef: float = 0.01, form: str = BALANCE_FORMS[0]) -> None:
        super().__init__()
        if not coef >= 0:
            raise ValueError(f"coef must be >= 0, got {coef}")
        if form not in BALANCE_FORMS:
            raise ValueError(f"form must be one of {BALANCE_FORMS}, got {form!r}")
        self.coef = float(coef)
        self.form = form
        self.last_term: Optional[torch.Tensor] = None

    @staticmethod
    def _clear(strategy) -> None:
        for layer in moram_layers(strategy.model).values():
            layer.pop_balance_terms()

    def before_training_exp(self, strategy, **kwargs):
        for layer in moram_layers(strategy.model).values():
            layer.load_balance = self.form
        self._clear(strategy)

    def before_training_iteration(self, strategy, **kwargs):
        self._clear(strategy)

    def before_backward(self, strategy, **kwargs):
        per_layer = []
        for layer in moram_layers(strategy.model).values():
            terms = layer.pop_balance_terms()
            if terms:
                per_layer.append(torch.stack(terms).mean())
        if not per_layer:
            self.last_term = None
            return
        term = torch.stack(per_layer).mean()
        self.last_term = term.detach()
        strategy.loss = strategy.loss + self.coef * term.to(strategy.loss.dtype)

    def after_training_exp(self, strategy, **kwargs):
        self._clear(strategy)


class _RoutingVariant(MoRAM):
    """MoRAM with the defaults of one row of :data:`ROUTING_ABLATIONS` (overridable)."""

    ROW = "full"

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


#: strategy name -> class, for the registry
ABLATION_STRATEGIES = {
    "moram-external-router": MoRAMExternalRouter,
    "moram-self-activation": MoRAMSelfActivation,
    "moram-self+topk": MoRAMSelfTopK,
    "moram-self+temperature": MoRAMSelfTemperature,
    "moram-self+threshold": MoRAMSelfThreshold,
    "moram-load-balance": MoRAMLoadBalance,
}
