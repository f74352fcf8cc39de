"""MoRAM as an Avalanche strategy: CLIPStrategy + atom injection + MoRAMPlugin."""

from __future__ import annotations

from typing import Dict, List, Optional

import torch
from avalanche.core import SupervisedPlugin

from ..atoms import ROUTER_KEY, MoRAMLinear
from ..atoms import STATE_KEYS as ATOM_STATE_KEYS
from ..clip.inject import ENCODERS, TARGET_PATHS, inject_moram
from .base import CLIPStrategy


def moram_layers(model: torch.nn.Module) -> Dict[str, MoRAMLinear]:
    """Every MoRAMLinear of ``model`` by dotted name."""
    return {name: m for name, m in model.named_modules() if isinstance(m, MoRAMLinear)}


class MoRAMPlugin(SupervisedPlugin):
    """Grows the atom banks task by task ("little by little").

    * ``before_training_exp``: every MoRAMLinear freezes its atoms and appends
      ``atoms_per_task`` new ones; the strategy's optimizer is then rebuilt, since Avalanche
      builds it before this callback (integration guide, section 2.2).
    * during training: per-atom activation mass and hits are recorded (``record=True``).
    * ``after_training_exp``: the new atoms freeze; their statistics are kept in
      :attr:`history`; with ``prune_mass`` the atoms of the task outside the smallest set
      covering that share of the mass are dropped (paper: 0.99).

    Attributes:
        history: one entry per trained experience: ``{"experience", "domain", "layers":
            {name: {"mass", "hits", "atom_task"}}}`` (CPU tensors), for analysis and plots.
        pruned: atoms dropped per experience, ``{name: count}``.
    """

    def __init__(self, prune_mass: Optional[float] = None, record: bool = True) -> None:
        super().__init__()
        if prune_mass is not None and not 0 < prune_mass <= 1:
            raise ValueError(f"prune_mass must be in (0, 1] or None, got {prune_mass}")
        self.prune_mass = prune_mass
        self.record = record or prune_mass is not None
        self.history: List[dict] = []
        self.pruned: List[Dict[str, int]] = []

    def before_training_exp(self, strategy, **kwargs):
        layers = moram_layers(strategy.model)
        if not layers:
            raise RuntimeError("MoRAMPlugin found no MoRAMLinear in the model: call inject_moram first")
        for layer in layers.values():
            layer.expand()
            layer.reset_stats()
            if self.record:
                layer.start_recording()
        strategy.make_optimizer()

    def after_training_exp(self, strategy, **kwargs):
        layers = moram_layers(strategy.model)
        snapshot = {}
        for name, layer in layers.items():
            layer.stop_recording()
            layer.freeze()
            snapshot[name] = {"mass": layer.atom_mass.detach().cpu().clone(),
                              "hits": layer.atom_hits.detach().cpu().clone(),
                              "atom_task": layer.atom_task.detach().cpu().clone()}
        self.history.append({"experience": strategy.experience.current_experience,
                             "domain": getattr(strategy.experience, "domain", None),
                             "layers": snapshot})
        if self.prune_mass is not None:
            self.pruned.append({name: int(layer.prune(self.prune_mass).numel())
                                for name, layer in layers.items()})

    def state_dict(self) -> dict:
        return {"history": self.history, "pruned": self.pruned}

    def load_state_dict(self, state: dict) -> None:
        self.history, self.pruned = list(state["history"]), list(state["pruned"])


def _check_existing_layers(model, **options) -> None:
    """Refuse a model whose MoRAM layers were built with other routing options than asked for.

    A model that already carries MoRAM layers is used as it is; without this check a routing
    ablation run on such a model would silently be another variant.
    """
    if options["temperature"] is None:
        options["temperature"] = 1.0
    for name, layer in moram_layers(model).items():
        differ = {key: (getattr(layer, key), want) for key, want in options.items()
                  if getattr(layer, key) != want}
        if differ:
            what = ", ".join(f"{key}={have!r} (asked: {want!r})"
                             for key, (have, want) in differ.items())
            raise ValueError(
                f"the model already carries MoRAM layers, built with other options than this "
                f"strategy's: {name} has {what}. Pass the options the layers were built with, "
                f"or a model without MoRAM layers (the strategy injects them)")


class MoRAM(CLIPStrategy):
    """MoRAM (ICML 2026) for CLIP: rank-1 atom banks on every frozen linear, grown per task.

    Injects :class:`~moram_avalanche.atoms.MoRAMLinear` into ``model`` (unless it already holds
    them) and adds a :class:`MoRAMPlugin`. Defaults are the paper's CLIP setting: r = 16 atoms
    per task, top-k 16, temperature 0.01, threshold 0.2, both encoders, q/k/v/out/c_fc/c_proj,
    AdamW lr 5e-4, 500 iterations per task, batch 64 (method reference).

    Args (keyword-only, besides CLIPStrategy's): atoms_per_task, topk, temperature,
    threshold, encoders, targets, prune_mass (None: no pruning; paper's option: 0.99),
    record_activations.

    Routing ablations (paper's routing table; see
    :mod:`moram_avalanche.strategies.moram_ablations` for the named rows): ``topk=None`` (no
    sparsity), ``temperature=None`` (tau = 1), ``threshold=0`` (no gate), ``router=True`` (an
    external learned router over the atoms), ``balance_coef > 0`` (a load-balancing term
    added to the loss by a :class:`~moram_avalanche.strategies.moram_ablations.LoadBalancePlugin`;
    0 = the method) of form ``balance_form``: ``"release"`` (the release's commented-out
    ``R * sum_i Pbar_i^2``, default) or ``"switch"`` (Switch Transformer's).
    """

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
        lr: float = 5e-4,
        train_mb_size: int = 64,
        plugins=None,
        **kwargs,
    ):
        if balance_coef < 0:
            raise ValueError(
                f"balance_coef must be >= 0 (0: no load balancing), got {balance_coef}")
        if moram_layers(model):
            _check_existing_layers(model, atoms_per_task=atoms_per_task, topk=topk,
                                   temperature=temperature, threshold=threshold, router=router)
        else:
            inject_moram(model, encoders=encoders, targets=targets, atoms_per_task=atoms_per_task,
                         topk=topk, temperature=temperature, threshold=threshold, router=router,
                         load_balance=balance_form if balance_coef > 0 else False)
        self.moram_plugin = MoRAMPlugin(prune_mass=prune_mass, record=record_activations)
        own = [self.moram_plugin]
        self.balance_plugin = None
        if balance_coef > 0:
            from .moram_ablations import LoadBalancePlugin

            self.balance_plugin = LoadBalancePlugin(balance_coef, balance_form)
            own.append(self.balance_plugin)
        super().__init__(model=model, tokenizer=tokenizer, iterations=iterations, lr=lr,
                         train_mb_size=train_mb_size, plugins=[*own, *(plugins or [])], **kwargs)

    def checkpoint_model_state(self) -> dict:
        """The atom banks (and router rows) only: CLIP's own weights never change under MoRAM."""
        return {k: v for k, v in self.model.state_dict().items()
                if k.rpartition(".")[2] in (*ATOM_STATE_KEYS, ROUTER_KEY)}

    def load_checkpoint_model_state(self, state: dict) -> None:
        result = self.model.load_state_dict(state, strict=False)
        if result.unexpected_keys:
            raise ValueError(f"checkpoint atoms do not fit this model: {result.unexpected_keys[:5]}")
        missing = [k for k in result.missing_keys
                   if k.rpartition(".")[2] in (*ATOM_STATE_KEYS, ROUTER_KEY)]
        if missing:
            raise ValueError(f"checkpoint lacks atoms of this model: {missing[:5]}")
