"""The MoRAM paper's routing ablations that need differentiable routing: external router, load balancing.

:class:`MoRAMAblationLinear` is :class:`~moram_avalanche.layers.moram.layer.MoRAMLinear` (same bank,
growth, pruning, statistics and state) with two options the method does not have:

* ``router=True``: an external learned router replaces the self-activation relevance: the
  relevance is ``s = G x`` with router rows ``G`` ``[R, d_in]``, one per atom, kept by this
  layer like the atoms (``frozen_router`` buffer, ``new_router`` parameter): grown, frozen,
  pruned, saved and loaded with them. New rows
  are Kaiming-uniform like the keys (a router is an ``nn.Linear`` in sparse MoE layers), not
  zero: top-k runs over the whole bank without noise, so zero rows (logit 0) would lose every
  slot to the trained frozen rows whose logits are positive, and the new atoms would hardly
  train. Top-k, temperature and the eval gate then act on these logits as they act on
  ``p / ||p||``. Extra state dict key ``router_weight`` ``[R, d_in]`` (:data:`ROUTER_KEY`).
* ``load_balance="release"`` (or ``True``) / ``"switch"``: every training forward with grad
  appends the layer's load-balancing term to :attr:`~MoRAMAblationLinear.balance_terms`, for a
  plugin to add to the loss: the MoRAM release's ``R * sum_i Pbar_i^2`` over the kept mixture
  weights (:func:`release_balance_term`) or Switch Transformer's ``R * sum_i f_i P_i``
  (:func:`balance_term`; constant while every atom is kept).

Both run :func:`plain_mixture`: ordinary autograd over ``[frozen; trainable]`` concatenated
per call (the method's paths give no gradient to routing probabilities). With both options off
the layer takes the method's paths. Pure torch.
"""

from __future__ import annotations

from typing import NamedTuple, Optional

import torch
import torch.nn.functional as F
from torch import nn

from .bank import check_finite, joined, new_rows
from .config import PAPER_CLIP
from .layer import MoRAMLinear, routing_options
from .paths.reference import RELEVANCE_EPS, route_dtype

#: the state-dict key of the external router's rows ``[R, d_in]`` (``router=True`` only)
ROUTER_KEY = "router_weight"
#: load-balancing terms a layer keeps uncollected before it reports a missing consumer
MAX_BALANCE_TERMS = 256

class PlainResult(NamedTuple):
    """Output of :func:`plain_mixture`."""

    out: torch.Tensor  # [N, d_out]
    idx: torch.Tensor  # [N, k] kept atoms (not differentiable)
    weights: torch.Tensor  # [N, k] mixture weights (detached, for activation statistics)
    balance: Optional[torch.Tensor]  # 0-d load-balancing term, or None


#: the load-balancing terms :func:`plain_mixture` can return (``balance=``)
BALANCE_FORMS = ("release", "switch")


def release_balance_term(weights: torch.Tensor, idx: torch.Tensor, num_atoms: int) -> torch.Tensor:
    """The MoRAM release's load-balancing term ``R * sum_i Pbar_i^2`` of one layer.

    ``Pbar_i`` is the mean over tokens of atom ``i``'s mixture weight: the post-top-k
    ``softmax(s_I / tau)`` of ``weights`` ``[N, k]``, scattered to the bank by ``idx`` (0 where
    not kept); the weights are differentiable. Perfectly uniform use gives 1; one atom taking
    every token gives ``R``. This is the term of the release's commented-out training forward
    (Artificer-AI-Lab/MoRAM, ``XTAIL/loralib/moram.py``, ``forward_backup``:
    ``P = weights.reshape(-1, R).mean(0); loss = R * (P ** 2).sum()``); unlike the Switch form
    it still pushes towards balance when every atom is kept (``k >= R``, e.g. all of the first
    task at r = k = 16), because ``tau = 0.01`` makes the kept weights far from uniform.
    """
    tokens = max(weights.shape[0], 1)
    mass = weights.new_zeros(num_atoms).index_add(0, idx.reshape(-1), weights.reshape(-1))
    mean_weight = mass / tokens
    return num_atoms * (mean_weight * mean_weight).sum()


def balance_term(relevance: torch.Tensor, idx: torch.Tensor, temperature: float) -> torch.Tensor:
    """Switch-Transformer load-balancing term ``R * sum_i f_i P_i`` of one layer.

    Fedus, Zoph and Shazeer, "Switch Transformers" (JMLR 2022), eq. 4-6: ``P_i`` is the mean
    over tokens of the router probability of atom ``i``, here ``softmax(s / tau)`` over the
    whole bank (before top-k and gate; differentiable), and ``f_i`` the fraction of routing
    assignments that go to atom ``i``: the share of (token, kept slot) pairs of the top-k
    selection ``idx`` ``[N, k]``, so ``sum_i f_i = 1`` (Switch's top-1 fraction when k = 1;
    Hugging Face's top-k variant sums over slots instead, which multiplies the term by k).
    Perfectly uniform routing gives 1.

    When every atom is kept (``k >= R``: no top-k, or all of the first task at r = k = 16)
    ``f_i = 1/R`` and the term is exactly 1, with no gradient, whatever the routing: the
    Switch form balances only what top-k selects. :func:`release_balance_term` is the form
    of the MoRAM release and the default of the load-balancing ablation.
    """
    num_atoms = relevance.shape[-1]
    probs = torch.softmax(relevance / temperature, dim=-1)
    mean_prob = probs.mean(0)
    counts = torch.zeros(num_atoms, dtype=probs.dtype, device=probs.device)
    ones = torch.ones(idx.numel(), dtype=probs.dtype, device=probs.device)
    counts.index_add_(0, idx.reshape(-1), ones)
    fraction = counts / max(idx.numel(), 1)
    return num_atoms * (fraction * mean_prob).sum()


def plain_mixture(tokens, weight, bias, keys, values, k, temperature, threshold, *,
                  router=None, balance=None) -> PlainResult:
    """The layer with ordinary autograd, for the routing ablations that need it.

    ``keys`` ``[R, d_in]`` and ``values`` ``[R, d_out]`` are the whole bank (frozen rows and
    trainable rows concatenated by the caller; gradients reach whatever requires grad).
    The relevance is the self-activation ``s = p / max(||p||, eps)`` or, with ``router``
    ``[R, d_in]``, the external router's logits ``s = router x``; steps 3-6 then run on it as
    :mod:`~moram_avalanche.layers.moram.paths.reference` states them (for self-activation the
    top-k is selected on ``p``, the same order as the method's paths; ``threshold`` None: no
    gate). With ``balance`` (one of :data:`BALANCE_FORMS`) the layer's load-balancing term is
    returned too: :func:`release_balance_term` (``"release"``) or :func:`balance_term` (``"switch"``).
    """
    if balance not in (None, *BALANCE_FORMS):
        raise ValueError(f"balance must be None or one of {BALANCE_FORMS}, got {balance!r}")
    wide = route_dtype(tokens.dtype)
    proj = F.linear(tokens, keys).to(wide)
    if router is None:
        norm = torch.linalg.vector_norm(proj, dim=-1, keepdim=True).clamp_min(RELEVANCE_EPS)
        _, idx = proj.topk(k, dim=-1, sorted=False)
        relevance = proj / norm
        kept_relevance = relevance.gather(1, idx)
    else:
        relevance = F.linear(tokens, router).to(wide)
        kept_relevance, idx = relevance.topk(k, dim=-1, sorted=False)
    soft = torch.softmax(kept_relevance / temperature, dim=-1)
    weights = soft if threshold is None else soft * (kept_relevance >= threshold)
    coef = (weights * proj.gather(1, idx)).to(tokens.dtype)
    mix = coef.new_zeros(proj.shape).scatter(1, idx, coef)
    out = mix @ values
    if bias is not None:
        out = out + bias
    if weight is not None:
        out = out + tokens @ weight.t()
    term = None
    if balance == "release":
        term = release_balance_term(soft, idx, relevance.shape[-1])
    elif balance == "switch":
        term = balance_term(relevance, idx, temperature)
    return PlainResult(out, idx, weights.detach(), term)


class MoRAMAblationLinear(MoRAMLinear):
    """MoRAMLinear with the routing ablations ``router`` and ``load_balance`` (module docstring).

    Args:
        base, atoms_per_task, topk, temperature, threshold: as :class:`MoRAMLinear`.
        router: route with an external learned router instead of self-activation.
        load_balance: record a load-balancing term per training forward (the paper reports
            that it hurts: X-TAIL Last 80.9 -> 77.3): ``"release"`` (or ``True``),
            ``"switch"``, or ``False``; settable later.
    """

    def __init__(self, base: nn.Linear, atoms_per_task: int = PAPER_CLIP.atoms_per_task,
                 topk: Optional[int] = PAPER_CLIP.topk, temperature: Optional[float] = PAPER_CLIP.temperature,
                 threshold: float = PAPER_CLIP.threshold, *,
                 router: bool = False, load_balance: bool | str = False) -> None:
        self.router = bool(router)
        super().__init__(base, atoms_per_task, topk, temperature, threshold)
        if self.router:
            self.register_buffer("frozen_router", self.template.new_zeros(0, self.in_features), persistent=False)
            self.register_parameter("new_router", None)
        self.load_balance = load_balance
        #: load-balancing terms of the training forwards since the last :meth:`pop_balance_terms`
        self.balance_terms: list = []

    # ------------------------------------------------------------------ the router's rows
    @property
    def options(self):
        return {**super().options, "router": self.router}

    @property
    def state_keys(self):
        return super().state_keys + ((ROUTER_KEY,) if self.router else ())

    @property
    def router_weight(self) -> Optional[torch.Tensor]:
        """The external router's rows ``[num_atoms, in_features]`` (detached), or None."""
        return joined(self.frozen_router, self.new_router).detach() if self.router else None

    def expand(self) -> int:
        count = super().expand()  # freezes the router's rows too (freeze below)
        if self.router:
            self.new_router = new_rows(self.atoms_per_task, self.in_features, "kaiming", self.frozen_router)
        return count

    def freeze(self) -> None:
        super().freeze()
        if self.router and self.new_router is not None:
            self.frozen_router = joined(self.frozen_router, self.new_router.detach())
            self.new_router = None

    def select_atoms(self, keep: torch.Tensor) -> None:
        super().select_atoms(keep)
        if self.router:
            self.frozen_router = self.frozen_router[keep]

    def load_atoms(self, keys, values, num_frozen, atom_task=None, *, assign: bool = False, **extra) -> None:
        """:meth:`MoRAMLinear.load_atoms`, and the router's rows ``router_weight`` ``[R, in_features]``
        when the layer has a router (zero when left out)."""
        keys = torch.as_tensor(keys)
        if not self.router or keys.dim() != 2:  # without a router, or keys the method refuses
            return super().load_atoms(keys, values, num_frozen, atom_task, assign=assign, **extra)
        num_atoms = keys.shape[0]
        router = extra.pop(ROUTER_KEY, None)
        if router is None:
            router = self.template.new_zeros(num_atoms, self.in_features)
        router = torch.as_tensor(router)
        check_finite(ROUTER_KEY, router)
        if router.shape != (num_atoms, self.in_features):
            raise ValueError(f"{ROUTER_KEY} must be [{num_atoms}, {self.in_features}] (num_atoms={num_atoms}), "
                             f"got {tuple(router.shape)}")
        in_place = not self.replaces(assign) and self.splits_as(num_atoms, int(num_frozen))
        super().load_atoms(keys, values, num_frozen, atom_task, assign=assign, **extra)
        self.frozen_router, self.new_router = self.split_rows(router, int(num_frozen), self.frozen_router,
                                                              self.new_router, in_place, self.frozen_keys.device)

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        if self.router:
            destination[prefix + ROUTER_KEY] = self.router_weight

    # ------------------------------------------------------------------ load balancing
    @property
    def load_balance(self) -> Optional[str]:
        """The load-balancing term recorded in training (one of ``BALANCE_FORMS``), or None."""
        return self._load_balance

    @load_balance.setter
    def load_balance(self, form) -> None:
        self._load_balance = balance_form(form)

    def pop_balance_terms(self) -> list:
        """The load-balancing terms recorded since the last call (and forget them)."""
        terms, self.balance_terms = self.balance_terms, []
        return terms

    def stacks_base(self, weight) -> bool:
        """Never with an external router: the routing reads the router's rows, not the keys."""
        return not self.router and super().stacks_base(weight)

    def mixture(self, tokens, weight, bias, k, threshold):
        """The plain-autograd path (:func:`plain_mixture`) when routing needs gradients, else the method's."""
        balance = self.load_balance if self.training and torch.is_grad_enabled() else None
        if not (self.router or balance):
            return super().mixture(tokens, weight, bias, k, threshold)
        dtype = tokens.dtype
        result = plain_mixture(  # ordinary autograd over the whole bank, frozen rows first
            tokens, weight, bias, joined(self.frozen_keys, self.new_keys, dtype),
            joined(self.frozen_values, self.new_values, dtype), k, self.temperature, threshold,
            router=joined(self.frozen_router, self.new_router, dtype) if self.router else None,
            balance=balance,
        )
        if result.balance is not None:
            if len(self.balance_terms) >= MAX_BALANCE_TERMS:
                raise RuntimeError(
                    f"{len(self.balance_terms)} load-balancing terms (each holding its autograd "
                    "graph) were recorded and never collected: call pop_balance_terms() after "
                    "each forward (LoadBalancePlugin does), or build the layer with "
                    "load_balance=False"
                )
            self.balance_terms.append(result.balance)
        return result.out, result.idx, result.weights

    def extra_repr(self) -> str:
        return (super().extra_repr() + (", router=True" if self.router else "")
                + (f", load_balance={self.load_balance!r}" if self.load_balance else ""))


def balance_form(value) -> Optional[str]:
    """``load_balance`` normalised: None (off), or one of :data:`BALANCE_FORMS` (``True``: the first)."""
    if value is True:
        return BALANCE_FORMS[0]
    if value is False or value is None:
        return None
    if value not in BALANCE_FORMS:
        raise ValueError(f"load_balance must be False, True or one of {BALANCE_FORMS}, got {value!r}")
    return value


def check_moram_options(*, router: bool = False, load_balance: bool | str = False, **options) -> None:
    """Check the options of :func:`moram_layer` without building a layer (nothing allocated, no
    random draw): a ValueError names the first bad one."""
    routing_options(**options)
    balance_form(load_balance)


def moram_layer_type(*, router: bool = False, load_balance: bool | str = False, **_options) -> type:
    """The layer class for these options: the method's :class:`MoRAMLinear` unless an ablation
    needs :class:`MoRAMAblationLinear` (``router`` or ``load_balance`` set). Other options are
    the layers' own and do not choose the class."""
    return MoRAMAblationLinear if router or load_balance else MoRAMLinear


def moram_layer(base: nn.Linear, *, router: bool = False, load_balance: bool | str = False,
                **options) -> MoRAMLinear:
    """A MoRAM layer over ``base`` of the class :func:`moram_layer_type` picks for the options."""
    if moram_layer_type(router=router, load_balance=load_balance) is MoRAMLinear:
        return MoRAMLinear(base, **options)
    return MoRAMAblationLinear(base, **options, router=router, load_balance=load_balance)


__all__ = ["BALANCE_FORMS", "MAX_BALANCE_TERMS", "ROUTER_KEY", "MoRAMAblationLinear", "PlainResult",
           "balance_form", "balance_term", "check_moram_options", "moram_layer", "moram_layer_type",
           "plain_mixture", "release_balance_term"]
