"""PromptTermPlugin: a prompt method's own term, recorded by the model's prefix, weighted into the loss.

L2P (:class:`~.l2p.L2PPlugin`) and DualPrompt (:class:`~.dualprompt.DualPromptPlugin`) share it:
their prefix (a :class:`~moram_avalanche.text.soft_prompt.PromptPrefix` attached to the
:class:`~moram_avalanche.models.language_model.LanguageModel`) records one term per forward with
gradients; the plugin clears them as each iteration starts and, in ``before_backward`` (after the
strategy's token loss), adds ``sign * coef`` times their mean to the loss. A subclass names its
prefix, the sign and how its terms are read, and adds its own hooks.
"""

from __future__ import annotations

from typing import List, Optional, Type

import torch
from avalanche.core import SupervisedPlugin

from ....text.soft_prompt import PromptPrefix


class PromptTermPlugin(SupervisedPlugin, supports_distributed=True):
    """Adds ``sign * coef`` times the mean of the terms the model's prefix recorded in the
    iteration to ``strategy.loss``, in ``before_backward`` (module docstring); several forwards in
    one iteration (a plugin scoring the same batch again) contribute their mean.

    Args:
        coef: the term's weight.

    Attributes:
        last_term: the (detached) term of the last iteration, for logging; None when the
            iteration recorded none.
    """

    #: the prefix the plugin reads
    prefix_type: Type[PromptPrefix] = PromptPrefix
    #: what builds a model with that prefix (the error for a model without one names it)
    built_by: str = "its strategy"
    #: +1: the term is added to the loss; -1: subtracted
    sign: float = 1.0

    def __init__(self, coef: float) -> None:
        super().__init__()
        self.coef = float(coef)
        self.last_term: Optional[torch.Tensor] = None

    @classmethod
    def prefix(cls, strategy) -> PromptPrefix:
        """The strategy's model's prefix; a RuntimeError when it is not a :attr:`prefix_type`."""
        prefix = getattr(strategy.model, "prefix", None)
        if not isinstance(prefix, cls.prefix_type):
            raise RuntimeError(f"{cls.__name__} needs a {cls.prefix_type.__name__} as the model's prefix, found "
                               f"{type(prefix).__name__}: build the model through {cls.built_by}")
        return prefix

    def pop_terms(self, prefix) -> List[torch.Tensor]:
        """The terms ``prefix`` recorded since the last call (one per forward with gradients), cleared."""
        raise NotImplementedError(f"{type(self).__name__} must implement pop_terms(prefix)")

    def before_training_iteration(self, strategy, **kwargs):
        self.pop_terms(self.prefix(strategy))

    def before_backward(self, strategy, **kwargs):
        terms = self.pop_terms(self.prefix(strategy))
        if not terms:
            self.last_term = None
            return
        term = torch.stack(terms).mean()
        self.last_term = term.detach()
        strategy.loss = strategy.loss + self.sign * self.coef * term.to(strategy.loss.dtype)


__all__ = ["PromptTermPlugin"]
