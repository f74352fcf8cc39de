"""TextLFPT5: LFPT5 (Qin & Joty, ICLR 2022) as a language-model strategy, the T5 tables' "LFPT5" row.

The model is frozen; one soft prompt of :data:`~moram_avalanche.text.lfpt5_prompt.LFPT5_PROMPT_LENGTH`
(300) vectors, put after every prompt's tokens, is the only thing that trains, carried from task
to task (official code: each task starts from the previous task's best prompt). Its initial rows
are LFPT5's: word rows, then embeddings of frequent vocabulary tokens
(:mod:`~moram_avalanche.text.lfpt5_prompt`).
:class:`~moram_avalanche.strategies.text.plugins.lfpt5.LFPT5Plugin` adds the pseudo-samples of the
earlier tasks and the LM and distillation losses. Optimizer: LFPT5's Adafactor, lr 0.5, weight
decay 1e-5, update clipping 1.0, no schedule (:func:`~moram_avalanche.text.lfpt5_prompt.adafactor`);
``prompt_optimizer="adamw"`` uses the loop's AdamW instead.

The official code is few-shot: 16 examples per label, up to 420 epochs with the best epoch kept on
a validation set, batch 2 x 4 accumulated. The T5 tables run every row with the paper's loop (the
tables' tasks, batch 64, one epoch per task); this row takes LFPT5's optimizer, prompt and losses,
not its few-shot budget or its model selection.
"""

from __future__ import annotations

from typing import Optional

from ...models.language_model import LanguageModel
from ...text.lfpt5_prompt import (
    LFPT5_LR,
    LFPT5_OPTIMIZERS,
    LFPT5_WEIGHT_DECAY,
    AppendedSoftPrompt,
    LFPT5PromptConfig,
    adafactor,
    vocabulary_init,
)
from ...text.lfpt5_prompt import LFPT5_PROMPT_SETTING as PROMPT
from ..needs import StrategyNeeds
from .loop import TextStrategy
from .plugins.lfpt5 import LFPT5_PLUGIN_SETTING as PLUGIN
from .plugins.lfpt5 import LFPT5Plugin, LFPT5PluginConfig
from .settings import given_config


def check_text_lfpt5_options(options) -> None:
    """Value checks of :class:`TextLFPT5`'s own options given in ``options``: its plugin's
    configuration (:class:`~moram_avalanche.strategies.text.plugins.lfpt5.LFPT5PluginConfig`) and
    its prompt's (:class:`~moram_avalanche.text.lfpt5_prompt.LFPT5PromptConfig`)."""
    given_config(LFPT5PluginConfig, options)
    given_config(LFPT5PromptConfig, options)


class TextLFPT5(TextStrategy):
    """LFPT5: a frozen model, one soft prompt trained through the stream, pseudo-samples of the
    earlier tasks written by the model itself (module docstring).

    Args (besides TextStrategy's; lr 0.5 and weight_decay 1e-5 by default, LFPT5's):
        prompt_length: prompt vectors (300). prompt_position: ``"after"`` the prompt's tokens
            (LFPT5's code) or ``"before"``. prompt_init: ``"labels"`` (LFPT5's: rows of "sentence
            classification", the first task's name and labels, set as it starts, then frequent
            tokens) or ``"vocabulary"`` (frequent tokens only).
        prompt_optimizer: ``"adafactor"`` (LFPT5's) or ``"adamw"`` (the loop's).
        max_grad_norm: None (no clipping of the gradients' norm): LFPT5's code passes its
            ``--max_grad_norm 1.0`` to Adafactor as ``clip_threshold``, the update clipping
            :func:`~moram_avalanche.text.lfpt5_prompt.adafactor` keeps, and clips no gradient
            (qcwthu/Lifelong-Fewshot-Language-Learning ``Classification/Classification.py:59``);
            a number: the loop's global-norm clipping.
        lm_lambda (0.25), kd_lambda (0.01), pseudo_per_label (2), pseudo_draws (500),
        pseudo_top_k (64), pseudo_repetition_penalty (2.5), pseudo_max_tokens (128),
        lm_target_length (256), pseudo_seed (42):
        :class:`~moram_avalanche.strategies.text.plugins.lfpt5.LFPT5Plugin`'s.
    """

    #: one process: the pseudo-samples are drawn by one sampler (not synchronised across processes)
    needs = StrategyNeeds(data_parallel=False)
    #: what ``reproduce --rehearse`` caps (a tiny random model writes no parsable example; 500 draws of
    #: 128 tokens per earlier task would be most of a rehearsal's time): 8 draws of 8 tokens, 4 vectors
    rehearsal_options = {"pseudo_draws": 8, "pseudo_max_tokens": 8, "prompt_length": 4}
    #: the value checks of its own options (run once, by check_strategy_options)
    check_values = staticmethod(lambda options: check_text_lfpt5_options(options))

    # defaults: LFPT5's code, written once (LFPT5PromptConfig, LFPT5PluginConfig)
    def __init__(self, *, model, tokenizer=None, lr: float = LFPT5_LR, weight_decay: float = LFPT5_WEIGHT_DECAY,
                 prompt_length: int = PROMPT.prompt_length, prompt_position: str = PROMPT.prompt_position,
                 prompt_init: str = PROMPT.prompt_init, prompt_optimizer: str = PROMPT.prompt_optimizer,
                 lm_lambda: float = PLUGIN.lm_lambda, kd_lambda: float = PLUGIN.kd_lambda,
                 pseudo_per_label: int = PLUGIN.pseudo_per_label, pseudo_draws: int = PLUGIN.pseudo_draws,
                 pseudo_top_k: int = PLUGIN.pseudo_top_k,
                 pseudo_repetition_penalty: float = PLUGIN.pseudo_repetition_penalty,
                 pseudo_max_tokens: int = PLUGIN.pseudo_max_tokens, lm_target_length: int = PLUGIN.lm_target_length,
                 pseudo_seed: int = PLUGIN.pseudo_seed, max_grad_norm: Optional[float] = None, plugins=None,
                 **kwargs):
        #: the prompt's options, checked once (the plugin's are its own: :attr:`lfpt5_plugin` ``.config``)
        self.config = config = LFPT5PromptConfig(prompt_length, prompt_position, prompt_init, prompt_optimizer)
        model = model if isinstance(model, LanguageModel) else LanguageModel(model, tokenizer)
        if model.prefix is not None and not isinstance(model.prefix, AppendedSoftPrompt):
            raise ValueError(f"the model already carries a prefix of another kind ({type(model.prefix).__name__}): "
                             "pass a model without one (LFPT5 adds its soft prompt)")
        model.requires_grad_(False)
        if model.prefix is None:
            embedding = model.model.get_input_embeddings()
            special = [i for i in (model.pad_id, model.eos_id, getattr(model.tokenizer, "unk_token_id", None))
                       if i is not None]
            init = vocabulary_init(embedding, config.prompt_length, special)
            model.prefix = AppendedSoftPrompt(config.prompt_length, embedding.weight.shape[1], init=init,
                                              position=config.prompt_position).to(embedding.weight.device)
        model.prefix.requires_grad_(True)
        self.optimizer_name = config.prompt_optimizer
        self.lfpt5_plugin = LFPT5Plugin(lm_lambda=lm_lambda, kd_lambda=kd_lambda, pseudo_per_label=pseudo_per_label,
                                        pseudo_draws=pseudo_draws, pseudo_top_k=pseudo_top_k,
                                        pseudo_repetition_penalty=pseudo_repetition_penalty,
                                        pseudo_max_tokens=pseudo_max_tokens, lm_target_length=lm_target_length,
                                        pseudo_seed=pseudo_seed, label_rows=config.prompt_init == "labels")
        super().__init__(model=model, tokenizer=tokenizer, lr=lr, weight_decay=weight_decay,
                         max_grad_norm=max_grad_norm, plugins=[self.lfpt5_plugin, *(plugins or [])], **kwargs)

    def fresh_optimizer(self, params):
        """LFPT5's Adafactor (or the loop's AdamW); the loop clips its gradients and accumulates
        its steps (:meth:`~moram_avalanche.strategies.text.loop.TextStrategy.training_optimizer`)."""
        if self.optimizer_name == "adamw":
            return super().fresh_optimizer(params)
        return adafactor(params, lr=self.experience_lr(), weight_decay=self.weight_decay)

    def checkpoint_model_state(self) -> dict:
        """The prompt, the only weights that train (the frozen model and its added rows are rebuilt)."""
        return {f"prefix.{k}": v for k, v in self.model.prefix.state_dict().items()}

    def load_checkpoint_model_state(self, state: dict) -> None:
        keys = sorted(state)
        if any(not key.startswith("prefix.") for key in keys):
            raise ValueError(f"an LFPT5 checkpoint holds the soft prompt only (prefix.*), got keys {keys[:3]}: "
                             "was it written by another strategy?")
        self.model.prefix.load_state_dict({key[len("prefix."):]: value for key, value in state.items()})


__all__ = ["LFPT5_OPTIMIZERS", "TextLFPT5", "check_text_lfpt5_options"]
