"""``dualprompt``: DualPrompt (Wang et al., ECCV 2022) on a language model, prompt tuning at the
input (:mod:`moram_avalanche.text.dual_prompt` says what differs from the paper's prefix tuning
and from the TRACE code base's DualPrompt): the model frozen, a shared G-prompt and one E-prompt
and key per task trained."""

from __future__ import annotations

from ...text.dual_prompt import TREELORA_DUALPROMPT, DualPromptPrefix
from ...text.prompt_pool import embedding_rows_init
from ...text.soft_prompt import check_shape
from ...utils.checks import check_number
from ..needs import StrategyNeeds
from .adapters import wrap
from .l2p import PromptStrategy, hidden_size
from .plugins.dualprompt import DualPromptPlugin


def check_dualprompt_options(options) -> None:
    """One-line errors for ``dualprompt``'s own options given in ``options``."""
    given = {**TREELORA_DUALPROMPT, **{k: v for k, v in options.items() if k in TREELORA_DUALPROMPT and v is not None}}
    value = given["pool_size"]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"pool_size (E-prompts, one per task) must be a positive int (TreeLoRA's DualPrompt: 10), "
                         f"got {value!r}")
    for name in ("g_length", "e_length"):
        try:
            check_shape(given[name], 1)
        except ValueError:
            raise ValueError(f"{name} must be a positive int (TreeLoRA's DualPrompt: "
                             f"{TREELORA_DUALPROMPT[name]}), got {given[name]!r}") from None
    check_number("match_coef", given["match_coef"], low=0, hint="the DualPrompt paper's: 1")


class TextDualPrompt(PromptStrategy):
    """DualPrompt: every weight of the language model frozen; a G-prompt of ``g_length`` vectors
    shared by the tasks and one E-prompt of ``e_length`` vectors and a key per task (a pool of
    ``pool_size``: at least the stream's tasks) train; each row reads ``[E-prompt; G-prompt;
    prompt]``, the E-prompt its task's in training and the best-matching key's in evaluation; the
    loss adds ``match_coef`` x ``1 - cos(query, key)`` of the task's key.

    Args (besides TextStrategy's; defaults :data:`~moram_avalanche.text.dual_prompt.TREELORA_DUALPROMPT`):
        pool_size (10), g_length (2), e_length (3), match_coef (1).

    Prompts start as rows of the embedding table at random tokens (TreeLoRA's ``init_new_prompt``),
    keys N(0, 1), drawn from torch's generator (the run's seed).
    """

    #: one process or data-parallel; not --fsdp (the input embeddings are read outside the sharded forward)
    needs = StrategyNeeds(data_parallel=True, fsdp=False)
    #: the value checks of its own options (run once, by check_strategy_options)
    check_values = staticmethod(lambda options: check_dualprompt_options(options))

    def __init__(self, *, model, tokenizer=None, pool_size: int = TREELORA_DUALPROMPT["pool_size"],
                 g_length: int = TREELORA_DUALPROMPT["g_length"], e_length: int = TREELORA_DUALPROMPT["e_length"],
                 match_coef: float = TREELORA_DUALPROMPT["match_coef"], plugins=None, **kwargs):
        check_dualprompt_options(dict(pool_size=pool_size, g_length=g_length, e_length=e_length,
                                      match_coef=match_coef))
        model = wrap(model, tokenizer)
        model.model.requires_grad_(False)
        prefix = model.prefix
        if prefix is None:
            table = model.model.get_input_embeddings().weight
            dim = hidden_size(model)
            rows = embedding_rows_init(table, 1, g_length + pool_size * e_length, divisor=1.0).view(-1, dim)
            prefix = DualPromptPrefix(pool_size, g_length, e_length, dim, g_init=rows[:g_length],
                                      e_init=rows[g_length:].reshape(pool_size, e_length, dim)).to(table.device)
            model.prefix = prefix
        elif not isinstance(prefix, DualPromptPrefix) or prefix.pool_size != pool_size \
                or tuple(prefix.g_prompt.shape[:1]) != (g_length,) or prefix.e_prompts.shape[1] != e_length:
            raise ValueError(f"the model already carries a prefix ({prefix!r}) other than a DualPromptPrefix of "
                             f"pool_size {pool_size}, g_length {g_length}, e_length {e_length}: pass a model without "
                             "a prefix (the strategy builds it)")
        prefix.requires_grad_(True)
        self.dualprompt_plugin = DualPromptPlugin(match_coef)
        super().__init__(model=model, tokenizer=tokenizer, plugins=[self.dualprompt_plugin, *(plugins or [])],
                         **kwargs)


__all__ = ["TextDualPrompt", "check_dualprompt_options"]
