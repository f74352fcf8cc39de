"""DualPromptPlugin: which E-prompt a task trains, and DualPrompt's key-matching term in the loss."""

from __future__ import annotations

from typing import List

import torch

from ....text.dual_prompt import TREELORA_DUALPROMPT_SETTING, DualPromptPrefix
from .prompt_term import PromptTermPlugin


class DualPromptPlugin(PromptTermPlugin):
    """Before each experience, points the model's :class:`~moram_avalanche.text.dual_prompt.DualPromptPrefix`
    at the experience's E-prompt (the experience's index in the stream; refused when the pool
    holds fewer); after it, counts the task as trained (so evaluation selects among it) and
    clears the pointer. In ``before_backward`` adds ``coef`` times the mean matching term
    ``1 - cos(query, key)`` of the iteration's forwards (DualPrompt, Eq. 4: weight 1; the
    mechanics are :class:`~.prompt_term.PromptTermPlugin`'s).

    Attributes:
        last_term: the (detached) matching term of the last iteration, for logging.
    """

    prefix_type = DualPromptPrefix
    built_by = "the dualprompt strategy"

    def __init__(self, coef: float = TREELORA_DUALPROMPT_SETTING.match_coef) -> None:
        super().__init__(coef)

    def pop_terms(self, prefix: DualPromptPrefix) -> List[torch.Tensor]:
        return prefix.pop_matches()

    def before_training_exp(self, strategy, **kwargs):
        prefix = self.prefix(strategy)
        task = int(strategy.experience.current_experience)
        if task >= prefix.pool_size:
            raise ValueError(f"DualPrompt holds {prefix.pool_size} E-prompts (pool_size) and the stream's task "
                             f"{task + 1} needs one more: set pool_size to the number of tasks (or more)")
        prefix.task = task
        self.pop_terms(prefix)

    def after_training_exp(self, strategy, **kwargs):
        prefix = self.prefix(strategy)
        with torch.no_grad():
            prefix.seen.fill_(max(int(prefix.seen), prefix.task + 1))
        prefix.task = None


__all__ = ["DualPromptPlugin"]
