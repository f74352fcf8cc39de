"""L2PPlugin: L2P's surrogate ("pull") term subtracted from the training loss."""

from __future__ import annotations

from typing import List

import torch

from ....text.prompt_pool import TRACE_L2P_SETTING, PromptPool
from .prompt_term import PromptTermPlugin


class L2PPlugin(PromptTermPlugin):
    """Subtracts ``coef`` times the pool's pull term from the loss, in ``before_backward``, after
    the strategy's token loss (L2P, Eq. 5; TRACE ``model/Dynamic_network/L2P.py``:
    ``loss -= reduce_sim * pull_constraint_coeff``, :mod:`moram_avalanche.text.prompt_pool`); the
    mechanics are :class:`~.prompt_term.PromptTermPlugin`'s.

    Args:
        coef: the coefficient (TRACE: 0.5).

    Attributes:
        last_term: the (detached) pull term of the last iteration, for logging.
    """

    prefix_type = PromptPool
    built_by = "the l2p strategy (TextL2P)"
    sign = -1.0

    def __init__(self, coef: float = TRACE_L2P_SETTING.pull_coef) -> None:
        super().__init__(coef)

    def pop_terms(self, prefix: PromptPool) -> List[torch.Tensor]:
        return prefix.pop_pulls()


__all__ = ["L2PPlugin"]
