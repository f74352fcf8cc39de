"""``dualprompt``: DualPrompt (Wang et al., ECCV 2022) on a language model, prompt tuning at the
input (:mod:`moram_avalanche.text.dual_prompt` says what differs from the paper's prefix tuning
and from the TRACE code base's DualPrompt): the model frozen, a shared G-prompt and one E-prompt
and key per task trained."""

from __future__ import annotations

from ...text.dual_prompt import TREELORA_DUALPROMPT_SETTING as TREELORA
from ...text.dual_prompt import DualPromptConfig, DualPromptPrefix
from ...text.prompt_pool import embedding_rows_init
from ..needs import StrategyNeeds
from .adapters import wrap
from .plugins.dualprompt import DualPromptPlugin
from .prompt import PromptStrategy, hidden_size
from .settings import given_config


def check_dualprompt_options(options) -> None:
    """One-line errors for ``dualprompt``'s own options given in ``options``: its configuration
    (:class:`~moram_avalanche.text.dual_prompt.DualPromptConfig`, the others TreeLoRA's)."""
    given_config(DualPromptConfig, options)


def check_pool_covers_stream(options, benchmark) -> None:
    """A one-line error when the pool of ``options`` (``pool_size``, default TreeLoRA's 10) holds
    fewer E-prompts than ``benchmark``'s training stream has tasks: each task trains its own
    E-prompt (the experience's index in the stream), so task ``pool_size + 1`` would find none and
    the run would stop there, after the earlier tasks trained."""
    pool = options.get("pool_size")
    pool = TREELORA.pool_size if pool is None else pool
    tasks = len(benchmark.train_stream)
    if isinstance(pool, int) and not isinstance(pool, bool) and pool < tasks:
        raise ValueError(f"dualprompt: pool_size {pool} holds fewer E-prompts than the stream has tasks ({tasks}); "
                         f"DualPrompt trains one E-prompt per task, so task {pool + 1} would find none: give "
                         f"pool_size={tasks} or more")


class TextDualPrompt(PromptStrategy):
    """DualPrompt: every weight of the language model frozen; a G-prompt of ``g_length`` vectors
    shared by the tasks and one E-prompt of ``e_length`` vectors and a key per task (a pool of
    ``pool_size``: at least the stream's tasks) train; each row reads ``[E-prompt; G-prompt;
    prompt]``, the E-prompt its task's in training and the best-matching key's in evaluation; the
    loss adds ``match_coef`` x ``1 - cos(query, key)`` of the task's key.

    Args (besides TextStrategy's; defaults :class:`~moram_avalanche.text.dual_prompt.DualPromptConfig`):
        pool_size (10), g_length (2), e_length (3), match_coef (1).

    Prompts start as rows of the embedding table at random tokens (TreeLoRA's ``init_new_prompt``),
    keys N(0, 1), drawn from torch's generator (the run's seed).
    """

    #: one process or data-parallel; not --fsdp (the input embeddings are read outside the sharded forward)
    needs = StrategyNeeds(data_parallel=True, fsdp=False)
    #: the value checks of its own options (run once, by check_strategy_options)
    check_values = staticmethod(lambda options: check_dualprompt_options(options))
    prefix_type = DualPromptPrefix

    @classmethod
    def check_benchmark(cls, options, benchmark) -> None:
        """The loop's checks against the stream, then the pool against its tasks
        (:func:`check_pool_covers_stream`), before anything is built."""
        super().check_benchmark(options, benchmark)
        check_pool_covers_stream(options, benchmark)

    shape_options = ("pool_size", "g_length", "e_length")

    # defaults: TreeLoRA's DualPrompt, written once (moram_avalanche.text.dual_prompt.DualPromptConfig)
    def __init__(self, *, model, tokenizer=None, pool_size: int = TREELORA.pool_size,
                 g_length: int = TREELORA.g_length, e_length: int = TREELORA.e_length,
                 match_coef: float = TREELORA.match_coef, plugins=None, **kwargs):
        #: the options, checked once (:class:`~moram_avalanche.text.dual_prompt.DualPromptConfig`)
        self.config = DualPromptConfig(pool_size, g_length, e_length, match_coef)
        model = self.prompted(wrap(model, tokenizer))
        self.dualprompt_plugin = DualPromptPlugin(self.config.match_coef)
        super().__init__(model=model, tokenizer=tokenizer, plugins=[self.dualprompt_plugin, *(plugins or [])],
                         **kwargs)

    def build_prefix(self, model) -> DualPromptPrefix:
        """G- and E-prompts from embedding rows at random tokens (TreeLoRA's ``init_new_prompt``), keys N(0, 1)."""
        config, table, dim = self.config, model.model.get_input_embeddings().weight, hidden_size(model)
        g_length, pool_size, e_length = config.g_length, config.pool_size, config.e_length
        rows = embedding_rows_init(table, 1, g_length + pool_size * e_length, divisor=1.0).view(-1, dim)
        return DualPromptPrefix(pool_size, g_length, e_length, dim, g_init=rows[:g_length],
                                e_init=rows[g_length:].reshape(pool_size, e_length, dim)).to(table.device)

    @staticmethod
    def prefix_shape(prefix: DualPromptPrefix) -> tuple:
        return (prefix.pool_size, prefix.g_prompt.shape[0], prefix.e_prompts.shape[1])


__all__ = ["TextDualPrompt", "check_dualprompt_options", "check_pool_covers_stream"]
