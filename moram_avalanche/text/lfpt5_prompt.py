"""LFPT5's soft prompt and its added tokens (Qin & Joty, ICLR 2022; official code
qcwthu/Lifelong-Fewshot-Language-Learning, ``Classification/``).

* :class:`AppendedSoftPrompt` -- a :class:`~moram_avalanche.text.soft_prompt.SoftPrompt` whose
  vectors go **after** the prompt's tokens (official ``model.py`` ``_step``: ``torch.cat([input
  embeddings, prompt], 1)``, the mask extended by ones; padding stays between the tokens and the
  prompt, as there); ``position="before"`` is prompt tuning's place (Lester et al., 2021).
* :func:`vocabulary_init` and :func:`word_rows` -- the prompt's initial rows (official ``utils.py``
  ``getpromptembedding``): first the mean embeddings of "sentence classification", of the first
  task's name and of each of its labels (:data:`PROMPT_INIT_WORDS`; set when the first task
  starts, ``prompt_init="labels"``), then embeddings of tokens drawn at random among T5's 5,000
  most frequent ones (counts shipped as ``allnumber.pickle``). Without those counts, the
  vocabulary's first :data:`FREQUENT_TOKENS` ids stand in (a SentencePiece vocabulary is ordered
  by piece score, close to frequency).
* :func:`add_tokens` -- the separator and generation tokens added to the tokenizer (official:
  ``tokenizer.add_tokens``; T5's embedding matrix has spare rows past its 32,100 pieces, so the
  frozen model reads their untrained rows). When the matrix has no room, it is grown and every
  new row set from a generator seeded by the token's text, so a rebuilt model gets the same rows.
* :class:`LFPT5PromptConfig` -- the prompt's options and its optimizer's, checked once (defaults
  LFPT5's code).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Sequence

import torch
from torch import nn

from ..utils import checks
from ..utils.checks import check_int_range
from ..utils.random_state import kept_rng_state
from .soft_prompt import SoftPrompt

#: LFPT5's prompt length (official ``Classification.sh --prompt_number 300``)
LFPT5_PROMPT_LENGTH = 300
#: the ids the initial prompt rows are drawn from (official: T5's 5,000 most frequent tokens)
FREQUENT_TOKENS = 5000
#: where the prompt vectors go: after the tokens (official code) or before them (prompt tuning)
PROMPT_POSITIONS = ("after", "before")
#: the longest prompt taken (a mistyped length would put thousands of vectors before every input)
MAX_PROMPT_LENGTH = 4096


def check_choice(name: str, value, choices: Sequence[str]) -> str:
    """``value`` if it is one of ``choices`` (the first: LFPT5's code's); else a one-line ValueError."""
    return checks.check_choice(name, value, choices, hint=f"LFPT5's code: {choices[0]!r}")


class AppendedSoftPrompt(SoftPrompt):
    """A soft prompt put after (``position="after"``, LFPT5's code) or before the prompt's tokens."""

    def __init__(self, length: int, dim: int, *, init: torch.Tensor = None, position: str = "after") -> None:
        super().__init__(length, dim, init=init)
        self.position = check_choice("prompt_position", position, PROMPT_POSITIONS)

    def forward(self, embeds: torch.Tensor, mask: torch.Tensor):
        if self.position == "before":
            return super().forward(embeds, mask)
        prompts = self.prompts(embeds, mask)
        if prompts.shape[2] != embeds.shape[2]:
            raise ValueError(f"prompt vectors of size {prompts.shape[2]} cannot follow embeddings of size "
                             f"{embeds.shape[2]}: build the prompt with the model's hidden size")
        ones = torch.ones(mask.shape[0], prompts.shape[1], dtype=mask.dtype, device=mask.device)
        return torch.cat([embeds, prompts.to(embeds.dtype)], dim=1), torch.cat([mask, ones], dim=1)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, position={self.position}"


def vocabulary_init(embedding: nn.Embedding, length: int, special_ids: Sequence[int] = (), *,
                    generator: torch.Generator = None) -> torch.Tensor:
    """``[length, dim]`` rows of ``embedding`` at ids drawn (``generator``) among the first
    :data:`FREQUENT_TOKENS` ids that are not ``special_ids``, with replacement only when there
    are fewer such ids than ``length``."""
    rows = embedding.weight.shape[0]
    special = set(int(i) for i in special_ids)
    pool = torch.tensor([i for i in range(min(rows, FREQUENT_TOKENS)) if i not in special] or [0])
    if len(pool) >= length:
        picks = pool[torch.randperm(len(pool), generator=generator)[:length]]
    else:
        picks = pool[torch.randint(len(pool), (length,), generator=generator)]
    return embedding.weight.detach()[picks.to(embedding.weight.device)].float().cpu().clone()


#: the first initial row's words (official ``utils.py`` ``getpromptembedding``: ``alllabel = ["sentence
#: classification"]``, then the first task's name and its labels)
PROMPT_INIT_WORDS = "sentence classification"
#: how the prompt starts: the official rows of words, then frequent tokens ("labels"), or frequent tokens only
PROMPT_INITS = ("labels", "vocabulary")


def word_rows(embedding: nn.Embedding, tokenizer, texts: Sequence[str]) -> torch.Tensor:
    """``[len(texts), dim]``: each text's mean token embedding, without the special tokens the
    tokenizer adds (official ``getpromptembedding``: the ids but the closing EOS, averaged)."""
    rows = []
    for text in texts:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        if not ids:
            raise ValueError(f"LFPT5's prompt initialisation: {text!r} has no tokens; pass prompt_init='vocabulary'")
        index = torch.tensor(ids, device=embedding.weight.device)
        rows.append(embedding(index).detach().float().mean(0).cpu())
    return torch.stack(rows) if rows else torch.zeros(0, embedding.weight.shape[1])


def add_tokens(model: nn.Module, tokenizer, tokens: Sequence[str]) -> None:
    """Add ``tokens`` the tokenizer lacks; grow ``model``'s embeddings (frozen) when they do not fit,
    each new row drawn from N(0, std of the existing rows) seeded by its token's text. The global
    random generators are left as they were (``transformers`` initialises the grown rows from torch's
    before they are set): a run resumed after its first task grows the embeddings then, not at the
    first task, and must draw the numbers an uninterrupted run draws
    (:func:`~moram_avalanche.utils.random_state.kept_rng_state`)."""
    missing = [token for token in dict.fromkeys(tokens) if token not in tokenizer.get_vocab()]
    if not missing:
        return
    tokenizer.add_tokens(missing)
    embedding = model.get_input_embeddings()
    rows = embedding.weight.shape[0]
    if len(tokenizer) <= rows:
        return
    std = float(embedding.weight.detach().float().std())
    with kept_rng_state():
        model.resize_token_embeddings(len(tokenizer), mean_resizing=False)
    weights = [model.get_input_embeddings().weight]
    output = model.get_output_embeddings()
    if output is not None and output.weight.data_ptr() != weights[0].data_ptr():  # untied: its rows too
        weights.append(output.weight)
    with torch.no_grad():
        for place, weight in enumerate(weights):
            for index in range(rows, min(len(tokenizer), weight.shape[0])):
                text = tokenizer.convert_ids_to_tokens(index)
                seed = zlib.crc32(f"{place}:{text}".encode("utf-8"))
                row = torch.randn(weight.shape[1], generator=torch.Generator().manual_seed(seed)) * std
                weight[index] = row.to(weight.dtype)
    model.requires_grad_(False)




#: LFPT5's optimizer (official ``Classification.py``: ``Adafactor(lr=0.5, clip_threshold=1.0,
#: decay_rate=-0.8, weight_decay=1e-5, scale_parameter=False, relative_step=False)``;
#: ``Classification.sh --lr 5e-1 --weight_decay 1e-5 --max_grad_norm 1.0``)
LFPT5_LR = 0.5
LFPT5_WEIGHT_DECAY = 1e-5
ADAFACTOR_OPTIONS = {"clip_threshold": 1.0, "decay_rate": -0.8, "scale_parameter": False, "relative_step": False}


#: the optimizers the prompt can train with: LFPT5's Adafactor (:func:`adafactor`), or the loop's AdamW
LFPT5_OPTIMIZERS = ("adafactor", "adamw")


def adafactor(params, *, lr: float = LFPT5_LR, weight_decay: float = LFPT5_WEIGHT_DECAY):
    """``transformers``' Adafactor over ``params`` as LFPT5's code builds it (a fixed ``lr``)."""
    from transformers.optimization import Adafactor

    return Adafactor(params, lr=lr, weight_decay=weight_decay, **ADAFACTOR_OPTIONS)


@dataclass(frozen=True)
class LFPT5PromptConfig:
    """LFPT5's prompt options (defaults LFPT5's code: :data:`LFPT5_PROMPT_LENGTH` vectors, after the
    tokens, the official initial rows, Adafactor).

    Attributes:
        prompt_length: the prompt's vectors (at most :data:`MAX_PROMPT_LENGTH`).
        prompt_position: one of :data:`PROMPT_POSITIONS`.
        prompt_init: one of :data:`PROMPT_INITS`.
        prompt_optimizer: one of :data:`LFPT5_OPTIMIZERS`.

    Checked once, when it is made: a ValueError naming the option, what was given and LFPT5's value.
    """

    prompt_length: int = LFPT5_PROMPT_LENGTH
    prompt_position: str = PROMPT_POSITIONS[0]
    prompt_init: str = PROMPT_INITS[0]
    prompt_optimizer: str = LFPT5_OPTIMIZERS[0]

    def __post_init__(self) -> None:
        check_int_range("prompt_length", self.prompt_length, high=MAX_PROMPT_LENGTH,
                        hint=f"LFPT5: {LFPT5_PROMPT_LENGTH}")
        check_choice("prompt_position", self.prompt_position, PROMPT_POSITIONS)
        check_choice("prompt_init", self.prompt_init, PROMPT_INITS)
        check_choice("prompt_optimizer", self.prompt_optimizer, LFPT5_OPTIMIZERS)


#: LFPT5's code's prompt: the defaults of :class:`LFPT5PromptConfig`
LFPT5_PROMPT_SETTING = LFPT5PromptConfig()

__all__ = ["ADAFACTOR_OPTIONS", "AppendedSoftPrompt", "FREQUENT_TOKENS", "LFPT5PromptConfig", "LFPT5_LR",
           "LFPT5_OPTIMIZERS", "LFPT5_PROMPT_LENGTH", "LFPT5_PROMPT_SETTING", "LFPT5_WEIGHT_DECAY", "MAX_PROMPT_LENGTH", "PROMPT_INITS",
           "PROMPT_INIT_WORDS", "PROMPT_POSITIONS", "adafactor", "add_tokens", "check_choice", "vocabulary_init",
           "word_rows"]
