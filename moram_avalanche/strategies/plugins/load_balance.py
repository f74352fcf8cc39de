"""LoadBalancePlugin: the load-balancing term of the MoRAM paper's routing ablation, added to the loss."""

from __future__ import annotations

from typing import Optional

import torch
from avalanche.core import SupervisedPlugin

from ...layers.base import find_layers
from ...layers.moram.variants import BALANCE_FORMS, MoRAMAblationLinear

#: the load-balancing coefficient: Switch Transformer's alpha, 0.01 (Fedus et al. 2022, section
#: 2.2); the MoRAM paper gives none
SWITCH_ALPHA = 0.01


class LoadBalancePlugin(SupervisedPlugin, supports_distributed=True):
    """Adds ``coef * mean over layers of the load-balancing term`` to the training loss.

    Before each experience every
    :class:`~moram_avalanche.layers.moram.variants.MoRAMAblationLinear` is set to record its
    term (``load_balance = form``) on every training forward; a layer called more than once in
    an iteration contributes the mean of its terms. The sum is added in ``before_backward``, after the
    strategy's criterion.

    Args:
        coef: the coefficient (default :data:`SWITCH_ALPHA`, Switch Transformer's alpha).
        form: ``"release"`` (default;
            :func:`~moram_avalanche.layers.moram.variants.release_balance_term`) or ``"switch"``
            (:func:`~moram_avalanche.layers.moram.variants.balance_term`).

    Attributes:
        last_term: the (detached) mean term of the last iteration, for logging.
    """

    def __init__(self, coef: float = SWITCH_ALPHA, form: str = BALANCE_FORMS[0]) -> None:
        super().__init__()
        if not coef >= 0:
            raise ValueError(f"coef must be >= 0, got {coef}")
        if form not in BALANCE_FORMS:
            raise ValueError(f"form must be one of {BALANCE_FORMS}, got {form!r}")
        self.coef = float(coef)
        self.form = form
        self.last_term: Optional[torch.Tensor] = None
        self._layers: list = []  # the experience's layers (found once per experience)

    def _clear(self) -> None:
        for layer in self._layers:
            layer.pop_balance_terms()

    def before_training_exp(self, strategy, **kwargs):
        self._layers = list(find_layers(strategy.model, MoRAMAblationLinear).values())
        if not self._layers:
            raise RuntimeError("LoadBalancePlugin found no MoRAMAblationLinear in the model: build "
                               "MoRAM with balance_coef > 0 (or inject_moram(..., load_balance=...))")
        for layer in self._layers:
            layer.load_balance = self.form
        self._clear()

    def before_training_iteration(self, strategy, **kwargs):
        self._clear()

    def before_backward(self, strategy, **kwargs):
        per_layer = []
        for layer in self._layers:
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
        self._clear()
        self._layers = []


__all__ = ["SWITCH_ALPHA", "LoadBalancePlugin"]
