"""``l2p``: L2P (Wang et al., CVPR 2022) on a language model, as TRACE runs it on causal LLMs and
as the T5 tables' L2P rows do on T5's encoder input: the model frozen, a pool of prompts and
their keys trained (:class:`~moram_avalanche.text.prompt_pool.PromptPool`, attached as the
:class:`~moram_avalanche.models.language_model.LanguageModel`'s ``prefix``), the pull term
subtracted from the token loss (:class:`~moram_avalanche.strategies.text.plugins.l2p.L2PPlugin`).
"""

from __future__ import annotations

import torch

from ...text.prompt_pool import TRACE_L2P, PromptPool, check_pool, embedding_rows_init
from ...utils.checks import check_number
from ..needs import StrategyNeeds
from .adapters import wrap
from .loop import TextStrategy
from .plugins.l2p import L2PPlugin


def check_l2p_options(options) -> None:
    """One-line errors for ``l2p``'s own options given in ``options``."""
    given = {**TRACE_L2P, **{k: v for k, v in options.items() if k in TRACE_L2P and v is not None}}
    check_pool(given["pool_size"], given["prompt_length"], 1, given["top_k"])
    check_number("pull_coef", given["pull_coef"], low=0, hint=f"TRACE's L2P: {TRACE_L2P['pull_coef']}")


def hidden_size(model) -> int:
    """The width of ``model``'s input embeddings (what a prompt vector must have)."""
    return int(model.model.get_input_embeddings().weight.shape[-1])


class PromptStrategy(TextStrategy):
    """A text strategy whose model is frozen and whose ``prefix`` (a
    :class:`~moram_avalanche.text.soft_prompt.PromptPrefix`) trains: run checkpoints hold the
    prefix's state only (``prefix.*``)."""

    def checkpoint_model_state(self) -> dict:
        """The prefix's state (its prompts, keys and buffers): nothing else trains."""
        return {f"prefix.{key}": value for key, value in self.model.prefix.state_dict().items()}

    def load_checkpoint_model_state(self, state: dict) -> None:
        own = {key[len("prefix."):]: value for key, value in state.items() if key.startswith("prefix.")}
        if len(own) != len(state):
            raise ValueError(f"this checkpoint should hold only the prompts (prefix.*), got {sorted(state)[:3]}...: "
                             "resume it with the strategy that wrote it")
        with torch.no_grad():
            self.model.prefix.load_state_dict(own)


class TextL2P(PromptStrategy):
    """L2P: every weight of the language model frozen; ``pool_size`` prompts of ``prompt_length``
    vectors and their keys train; each input reads the ``top_k`` prompts whose keys best match
    the mean of its input embeddings, in front of its prompt; the loss is the token loss minus
    ``pull_coef`` times the pull term (each row's chosen keys' cosines with its query, summed,
    averaged over the rows: TRACE's ``reduce_sim``).

    Args (besides TextStrategy's; defaults TRACE's, :data:`~moram_avalanche.text.prompt_pool.TRACE_L2P`):
        pool_size (10), prompt_length (5), top_k (3), pull_coef (0.5).

    The initial prompts are rows of the model's embedding table at random tokens, divided by 100
    (TRACE's ``convert_L2P_model``), drawn from torch's generator (the run's seed). Run
    checkpoints hold the pool and its keys only (the model never changes).
    """

    #: one process or data-parallel (the pool's gradients are averaged with the rest); not --fsdp
    #: (the input embeddings are read outside the sharded model's forward)
    needs = StrategyNeeds(data_parallel=True, fsdp=False)
    #: the value checks of its own options (run once, by check_strategy_options)
    check_values = staticmethod(lambda options: check_l2p_options(options))

    def __init__(self, *, model, tokenizer=None, pool_size: int = TRACE_L2P["pool_size"],
                 prompt_length: int = TRACE_L2P["prompt_length"], top_k: int = TRACE_L2P["top_k"],
                 pull_coef: float = TRACE_L2P["pull_coef"], plugins=None, **kwargs):
        check_l2p_options(dict(pool_size=pool_size, prompt_length=prompt_length, top_k=top_k, pull_coef=pull_coef))
        model = wrap(model, tokenizer)
        model.model.requires_grad_(False)
        pool = model.prefix
        if pool is None:
            table = model.model.get_input_embeddings().weight
            pool = PromptPool(pool_size, prompt_length, hidden_size(model), top_k,
                              init=embedding_rows_init(table, pool_size, prompt_length)).to(table.device)
            model.prefix = pool
        elif not isinstance(pool, PromptPool) or tuple(pool.weight.shape[:2]) != (pool_size, prompt_length) \
                or pool.top_k != top_k:
            raise ValueError(f"the model already carries a prefix ({pool!r}) other than a PromptPool of pool_size "
                             f"{pool_size}, prompt_length {prompt_length}, top_k {top_k}: pass a model without a "
                             "prefix (the strategy builds the pool)")
        pool.requires_grad_(True)
        self.l2p_plugin = L2PPlugin(pull_coef)
        super().__init__(model=model, tokenizer=tokenizer, plugins=[self.l2p_plugin, *(plugins or [])], **kwargs)


__all__ = ["PromptStrategy", "TextL2P", "check_l2p_options", "hidden_size"]
