"""PromptStrategy: what the prompt rows share (L2P, :mod:`.l2p`; DualPrompt, :mod:`.dualprompt`).

The language model is frozen and a prefix trains
(a :class:`~moram_avalanche.text.soft_prompt.PromptPrefix`, attached as the
:class:`~moram_avalanche.models.language_model.LanguageModel`'s ``prefix``): the strategy builds it
from its configuration, or accepts the one a model already carries when it is of the same kind
and shape (:meth:`PromptStrategy.prompted`); run checkpoints hold the prefix's state only.
"""

from __future__ import annotations

from typing import Tuple, Type

import torch

from ...models.language_model import LanguageModel
from ...text.soft_prompt import PromptPrefix
from .loop import TextStrategy


def hidden_size(model) -> int:
    """The width of ``model``'s input embeddings (what a prompt vector must have)."""
    return int(model.model.get_input_embeddings().weight.shape[-1])


class PromptStrategy(TextStrategy):
    """A text strategy whose model is frozen and whose ``prefix`` trains: run checkpoints hold the
    prefix's state only (``prefix.*``).

    A subclass that builds its prefix from a configuration (its :attr:`config`, set before
    :meth:`prompted` is called) declares :attr:`prefix_type` and :attr:`shape_options` and
    implements :meth:`build_prefix` and :meth:`prefix_shape`.
    """

    #: the prefix the strategy trains
    prefix_type: Type[PromptPrefix] = PromptPrefix
    #: the options of :attr:`config` that fix the prefix's shape, in :meth:`prefix_shape`'s order
    shape_options: Tuple[str, ...] = ()

    def build_prefix(self, model: LanguageModel) -> PromptPrefix:
        """A new prefix for ``model`` (on its embeddings' device), as :attr:`config` sets it."""
        raise NotImplementedError(f"{type(self).__name__} must implement build_prefix(model)")

    @staticmethod
    def prefix_shape(prefix) -> tuple:
        """The values of :attr:`shape_options` that ``prefix`` (a :attr:`prefix_type`) was built with."""
        raise NotImplementedError("a PromptStrategy must implement prefix_shape(prefix)")

    def prompted(self, model: LanguageModel) -> LanguageModel:
        """``model`` frozen, with a trainable prefix: a new one (:meth:`build_prefix`), or the one
        it carries when that is a :attr:`prefix_type` of :attr:`config`'s shape (a ValueError
        naming both otherwise)."""
        model.model.requires_grad_(False)
        shape = tuple(getattr(self.config, name) for name in self.shape_options)
        if model.prefix is None:
            model.prefix = self.build_prefix(model)
        elif not isinstance(model.prefix, self.prefix_type) or self.prefix_shape(model.prefix) != shape:
            settings = ", ".join(f"{name} {value}" for name, value in zip(self.shape_options, shape))
            raise ValueError(f"the model already carries a prefix ({model.prefix!r}) other than a "
                             f"{self.prefix_type.__name__} of {settings}: pass a model without a prefix (the "
                             "strategy builds it)")
        model.prefix.requires_grad_(True)
        return model

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


__all__ = ["PromptStrategy", "hidden_size"]
