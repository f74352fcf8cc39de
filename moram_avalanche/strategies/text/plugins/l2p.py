"""L2PPlugin: L2P's surrogate ("pull") term subtracted from the training loss."""

from __future__ import annotations

from typing import Optional

import torch
from avalanche.core import SupervisedPlugin

from ....text.prompt_pool import TRACE_L2P, PromptPool


class L2PPlugin(SupervisedPlugin, supports_distributed=True):
    """Subtracts ``coef`` times the pool's pull term from the loss, in ``before_backward``, after
    the strategy's token loss (L2P, Eq. 5; TRACE ``model/Dynamic_network/L2P.py``:
    ``loss -= reduce_sim * pull_constraint_coeff``, :mod:`moram_avalanche.text.prompt_pool`).

    The pool records one term per forward with gradients; several forwards in one iteration (a
    plugin scoring the same batch again) contribute their mean.

    Args:
        coef: the coefficient (TRACE: 0.5).

    Attributes:
        last_term: the (detached) pull term of the last iteration, for logging.
    """

    def __init__(self, coef: float = TRACE_L2P["pull_coef"]) -> None:
        super().__init__()
        self.coef = float(coef)
        self.last_term: Optional[torch.Tensor] = None

    @staticmethod
    def pool(strategy) -> PromptPool:
        pool = getattr(strategy.model, "prefix", None)
        if not isinstance(pool, PromptPool):
            raise RuntimeError(f"L2PPlugin needs a PromptPool as the model's prefix, found {type(pool).__name__}: "
                               "build the model through the l2p strategy (TextL2P)")
        return pool

    def before_training_iteration(self, strategy, **kwargs):
        self.pool(strategy).pop_pulls()

    def before_backward(self, strategy, **kwargs):
        pulls = self.pool(strategy).pop_pulls()
        if not pulls:
            self.last_term = None
            return
        term = torch.stack(pulls).mean()
        self.last_term = term.detach()
        strategy.loss = strategy.loss - self.coef * term.to(strategy.loss.dtype)


__all__ = ["L2PPlugin"]
