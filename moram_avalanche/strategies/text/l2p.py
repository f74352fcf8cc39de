"""``l2p``: L2P (Wang et al., CVPR 2022) on a language model, as TRACE runs it on causal LLMs and
as the T5 tables' L2P rows do on T5's encoder input: the model frozen, a pool of prompts and
their keys trained (:class:`~moram_avalanche.text.prompt_pool.PromptPool`, attached as the
:class:`~moram_avalanche.models.language_model.LanguageModel`'s ``prefix``), the pull term
subtracted from the token loss (:class:`~moram_avalanche.strategies.text.plugins.l2p.L2PPlugin`).
"""

from __future__ import annotations

from ...text.prompt_pool import TRACE_L2P_SETTING as TRACE
from ...text.prompt_pool import L2PConfig, PromptPool, embedding_rows_init
from ..needs import StrategyNeeds
from .adapters import wrap
from .plugins.l2p import L2PPlugin
from .prompt import PromptStrategy, hidden_size
from .settings import given_config


def check_l2p_options(options) -> None:
    """One-line errors for ``l2p``'s own options given in ``options``: its configuration
    (:class:`~moram_avalanche.text.prompt_pool.L2PConfig`, the others TRACE's)."""
    given_config(L2PConfig, options)


class TextL2P(PromptStrategy):
    """L2P: every weight of the language model frozen; ``pool_size`` prompts of ``prompt_length``
    vectors and their keys train; each input reads the ``top_k`` prompts whose keys best match
    the mean of its input embeddings, in front of its prompt; the loss is the token loss minus
    ``pull_coef`` times the pull term (each row's chosen keys' cosines with its query, summed,
    averaged over the rows: TRACE's ``reduce_sim``).

    Args (besides TextStrategy's; defaults TRACE's, :class:`~moram_avalanche.text.prompt_pool.L2PConfig`):
        pool_size (10), prompt_length (5), top_k (3), pull_coef (0.5), prompt_init_divisor (1).

    The initial prompts are rows of the model's embedding table at random tokens, as they are
    (TRACE's ``convert_L2P_model``, ``model/Dynamic_network/L2P.py:31``; divided by
    ``prompt_init_divisor``, 100 in TRACE's superseded commit and in 0.6), drawn from torch's
    generator (the run's seed). Run checkpoints hold the pool and its keys only (the model never
    changes).
    """

    #: one process or data-parallel (the pool's gradients are averaged with the rest); not --fsdp
    #: (the input embeddings are read outside the sharded model's forward)
    needs = StrategyNeeds(data_parallel=True, fsdp=False)
    #: the value checks of its own options (run once, by check_strategy_options)
    check_values = staticmethod(lambda options: check_l2p_options(options))
    prefix_type = PromptPool
    shape_options = ("pool_size", "prompt_length", "top_k")

    # defaults: TRACE's L2P, written once (moram_avalanche.text.prompt_pool.L2PConfig)
    def __init__(self, *, model, tokenizer=None, pool_size: int = TRACE.pool_size,
                 prompt_length: int = TRACE.prompt_length, top_k: int = TRACE.top_k,
                 pull_coef: float = TRACE.pull_coef, prompt_init_divisor: float = TRACE.prompt_init_divisor,
                 plugins=None, **kwargs):
        #: the options, checked once (:class:`~moram_avalanche.text.prompt_pool.L2PConfig`)
        self.config = L2PConfig(pool_size, prompt_length, top_k, pull_coef, prompt_init_divisor)
        model = self.prompted(wrap(model, tokenizer))
        self.l2p_plugin = L2PPlugin(self.config.pull_coef)
        super().__init__(model=model, tokenizer=tokenizer, plugins=[self.l2p_plugin, *(plugins or [])], **kwargs)

    def build_prefix(self, model) -> PromptPool:
        """A pool of TRACE's initial prompts (:func:`~moram_avalanche.text.prompt_pool.embedding_rows_init`)."""
        config, table = self.config, model.model.get_input_embeddings().weight
        init = embedding_rows_init(table, config.pool_size, config.prompt_length, divisor=config.prompt_init_divisor)
        return PromptPool(config.pool_size, config.prompt_length, hidden_size(model), config.top_k,
                          init=init).to(table.device)

    @staticmethod
    def prefix_shape(pool: PromptPool) -> tuple:
        return (*pool.weight.shape[:2], pool.top_k)


__all__ = ["PromptStrategy", "TextL2P", "check_l2p_options", "hidden_size"]
