"""DualPromptPlugin: which E-prompt a task trains, and DualPrompt's key-matching term in the loss."""

from __future__ import annotations

from typing import Optional

import torch
from avalanche.core import SupervisedPlugin

from ....text.dual_prompt import TREELORA_DUALPROMPT, DualPromptPrefix


class DualPromptPlugin(SupervisedPlugin, supports_distributed=True):
    """Before each experience, points the model's :class:`~moram_avalanche.text.dual_prompt.DualPromptPrefix`
    at the experience's E-prompt (the experience's index in the stream; refused when the pool
    holds fewer); after it, counts the task as trained (so evaluation selects among it) and
    clears the pointer. In ``before_backward`` adds ``coef`` times the mean matching term
    ``1 - cos(query, key)`` of the iteration's forwards (DualPrompt, Eq. 4: weight 1).

    Attributes:
        last_term: the (detached) matching term of the last iteration, for logging.
    """

    def __init__(self, coef: float = TREELORA_DUALPROMPT["match_coef"]) -> None:
        super().__init__()
        self.coef = float(coef)
        self.last_term: Optional[torch.Tensor] = None

    @staticmethod
    def prefix(strategy) -> DualPromptPrefix:
        prefix = getattr(strategy.model, "prefix", None)
        if not isinstance(prefix, DualPromptPrefix):
            raise RuntimeError(f"DualPromptPlugin needs a DualPromptPrefix as the model's prefix, found "
                               f"{type(prefix).__name__}: build the model through the dualprompt strategy")
        return prefix

    def before_training_exp(self, strategy, **kwargs):
        prefix = self.prefix(strategy)
        task = int(strategy.experience.current_experience)
        if task >= prefix.pool_size:
            raise ValueError(f"DualPrompt holds {prefix.pool_size} E-prompts (pool_size) and the stream's task "
                             f"{task + 1} needs one more: set pool_size to the number of tasks (or more)")
        prefix.task = task
        prefix.pop_matches()

    def before_training_iteration(self, strategy, **kwargs):
        self.prefix(strategy).pop_matches()

    def before_backward(self, strategy, **kwargs):
        matches = self.prefix(strategy).pop_matches()
        if not matches:
            self.last_term = None
            return
        term = torch.stack(matches).mean()
        self.last_term = term.detach()
        strategy.loss = strategy.loss + self.coef * term.to(strategy.loss.dtype)

    def after_training_exp(self, strategy, **kwargs):
        prefix = self.prefix(strategy)
        with torch.no_grad():
            prefix.seen.fill_(max(int(prefix.seen), prefix.task + 1))
        prefix.task = None


__all__ = ["DualPromptPlugin"]
