"""L2P's prompt pool (Wang et al., "Learning to Prompt for Continual Learning", CVPR 2022) as a
:class:`~moram_avalanche.text.soft_prompt.PromptPrefix` of a language model.

A pool of ``pool_size`` prompts, each ``length`` vectors of the model's hidden size, and one key
per prompt. For every row the query is the mean of the frozen input embeddings of its prompt
tokens; the ``top_k`` prompts whose keys are most similar to it (cosine) are put in front of the
row, most similar first (L2P's instance-wise selection; no task identity, in training or in
evaluation). The surrogate ("pull") term is the sum of the chosen keys' cosines with the row's
query, averaged over the rows; the strategy subtracts ``coef`` times it from the token loss, so
the chosen keys move towards their queries (L2P, Eq. 5; TRACE ``model/Dynamic_network/L2P.py``:
``loss -= reduce_sim * pull_constraint_coeff``).

Settings and where they come from (:class:`L2PConfig`, which checks them; :data:`TRACE_L2P_SETTING`):

* pool size 10, prompt length 5: BeyonderXX/TRACE ``training/main.py`` (``args.pool_size = 10``,
  ``args.prompt_length = 5``), also the L2P paper's M = 10, L_p = 5;
* top-k 3, coefficient 0.5, the query the mean of the input embeddings (``embedding_key='mean'``):
  TRACE ``model/Dynamic_network/L2P.py`` (``top_k=3``, ``pull_constraint_coeff=0.5``);
* initial prompts: rows of the embedding table at random tokens, copied as they are (TRACE
  ``convert_L2P_model``, ``prompt_init='uniform'``: ``model/Dynamic_network/L2P.py:29-32``):
  :func:`embedding_rows_init`, ``prompt_init_divisor`` 1. TRACE divided them by 100 in one
  commit (f6a7aa6) and stopped in the next (2eedb15), the code since; 0.6 followed the divided
  rows, which start the prompts 100 times smaller than the embeddings they sit beside (at lr
  1e-5 they barely move from there): ``prompt_init_divisor=100`` gives them back.

Where this differs from TRACE, and why:

* the keys are trainable parameters, initialised as each prompt's mean vector (TRACE computes that
  mean once at the start and keeps it as a constant tensor; the L2P paper's keys are learnable);
* the query averages the prompt's tokens only, its padding left out (TRACE averages the padded
  batch, so a row's selection depended on its batch mates' lengths; a causal model's training
  row there also included the answer, which evaluation does not have).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from types import MappingProxyType
from typing import List, Optional

import torch
from torch import nn

from ..utils.checks import check_number
from .soft_prompt import PromptPrefix, check_shape

#: what the initial prompts' embedding rows are divided by: 1, TRACE's current ``convert_L2P_model``
#: (``model/Dynamic_network/L2P.py:31``, the rows copied as they are since commit 2eedb15)
INIT_DIVISOR = 1.0
#: the divisor of TRACE's superseded commit f6a7aa6 (``w/100``) and of 0.6
SUPERSEDED_INIT_DIVISOR = 100.0
#: a pool's initial prompts when none are given are N(0, 1) / this (as 0.6 drew them; the strategy
#: always gives TRACE's embedding rows)
RANDOM_INIT_DIVISOR = 100.0


@dataclass(frozen=True)
class L2PConfig:
    """L2P's options (defaults TRACE's, module docstring: :data:`TRACE_L2P_SETTING`).

    Attributes:
        pool_size: the prompts in the pool (10).
        prompt_length: the vectors of each prompt (5).
        top_k: the prompts each input reads (3), at most ``pool_size``.
        pull_coef: the pull term's weight in the loss (0.5).
        prompt_init_divisor: what the initial prompts' embedding rows are divided by (1: TRACE's
            current code; 100: its superseded commit and 0.6; :data:`INIT_DIVISOR`).

    Checked once, when it is made: a ValueError naming the option, what was given and TRACE's value.
    """

    pool_size: int = 10
    prompt_length: int = 5
    top_k: int = 3
    pull_coef: float = 0.5
    prompt_init_divisor: float = INIT_DIVISOR

    def __post_init__(self) -> None:
        check_pool(self.pool_size, self.prompt_length, 1, self.top_k)
        check_number("pull_coef", self.pull_coef, low=0, hint=f"TRACE's L2P: {L2PConfig.pull_coef}")
        check_number("prompt_init_divisor", self.prompt_init_divisor, low=0, low_open=True,
                     hint=f"TRACE's L2P: {INIT_DIVISOR:g}, its superseded commit and 0.6: {SUPERSEDED_INIT_DIVISOR:g}")


def check_pool(pool_size, length, dim, top_k) -> None:
    """One-line errors for a pool's sizes (each a positive int, ``top_k <= pool_size``)."""
    check_shape(length, dim)
    for name, value in (("pool_size", pool_size), ("top_k", top_k)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int (TRACE's L2P: {getattr(L2PConfig, name)}), "
                             f"got {value!r}")
    if top_k > pool_size:
        raise ValueError(f"top_k ({top_k}) chooses from the pool, so it must be at most pool_size ({pool_size})")


#: TRACE's L2P setting (module docstring): the defaults of :class:`L2PConfig`
TRACE_L2P_SETTING = L2PConfig()
#: 0.6's name of :data:`TRACE_L2P_SETTING`, a read-only view with 0.6's keys; goes in 0.8
TRACE_L2P = MappingProxyType({key: value for key, value in dataclasses.asdict(TRACE_L2P_SETTING).items()
                              if key in ("pool_size", "prompt_length", "top_k", "pull_coef")})


def embedding_rows_init(table: torch.Tensor, pool_size: int, length: int,
                        generator: Optional[torch.Generator] = None, divisor: float = INIT_DIVISOR) -> torch.Tensor:
    """``[pool_size, length, H]`` rows of the ``[V, H]`` embedding ``table`` at random token ids,
    divided by ``divisor`` (TRACE ``convert_L2P_model``: the rows as they are, :data:`INIT_DIVISOR`)."""
    ids = torch.randint(table.shape[0], (pool_size * length,), generator=generator)
    return (table.detach().float().cpu()[ids] / divisor).view(pool_size, length, table.shape[1])


def l2_normalize(x: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    """``x`` divided by its L2 norm over the last dimension, the squared norm floored at ``eps``
    (L2P's and TRACE's ``l2_normalize``)."""
    return x * torch.rsqrt(torch.clamp(x.pow(2).sum(-1, keepdim=True), min=eps))


def mean_query(embeds: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``[B, H]``: the mean of each row's embeddings over its tokens (``mask`` 1), in float32,
    without gradient (the input embeddings are the frozen model's)."""
    weights = mask.to(torch.float32).unsqueeze(-1)
    return (embeds.detach().float() * weights).sum(1) / weights.sum(1).clamp(min=1.0)


class PromptPool(PromptPrefix):
    """L2P's pool: ``weight`` ``[pool_size, length, dim]`` prompts and ``keys`` ``[pool_size, dim]``.

    Args:
        pool_size, length, dim, top_k: the pool's size, a prompt's vectors, the hidden size, the
            prompts chosen per row.
        init: the initial prompts (default: N(0, 1) / :data:`RANDOM_INIT_DIVISOR`; the strategy passes
            :func:`embedding_rows_init`); the keys start as each prompt's mean vector.

    Attributes:
        last_selection: the ``[B, top_k]`` prompt indices chosen for the last batch.
    """

    def __init__(self, pool_size: int, length: int, dim: int, top_k: int, *,
                 init: Optional[torch.Tensor] = None) -> None:
        super().__init__()
        check_pool(pool_size, length, dim, top_k)
        if init is None:
            init = torch.randn(pool_size, length, dim) / RANDOM_INIT_DIVISOR
        elif tuple(init.shape) != (pool_size, length, dim):
            raise ValueError(f"the pool's init must be [pool_size, length, dim] = [{pool_size}, {length}, {dim}], "
                             f"got {tuple(init.shape)}")
        self.top_k = top_k
        self.weight = nn.Parameter(init.detach().clone().float())
        self.keys = nn.Parameter(self.weight.detach().mean(1).clone())
        self.last_selection: Optional[torch.Tensor] = None
        self._pulls: List[torch.Tensor] = []

    def query(self, embeds: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return mean_query(embeds, mask)

    def select(self, query: torch.Tensor):
        """``(indices [B, top_k], cosines [B, top_k])``: the keys most similar to each query, most
        similar first; the cosines carry the keys' gradient."""
        similarity = l2_normalize(query) @ l2_normalize(self.keys).t()
        cosines, indices = torch.topk(similarity, k=self.top_k, dim=1)
        return indices, cosines

    def prompts(self, embeds: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        indices, cosines = self.select(self.query(embeds, mask))
        self.last_selection = indices.detach()
        if torch.is_grad_enabled():
            self._pulls.append(cosines.sum() / embeds.shape[0])
        return self.weight[indices].reshape(embeds.shape[0], -1, self.weight.shape[-1])

    def pop_pulls(self) -> List[torch.Tensor]:
        """The pull terms recorded since the last call (one per forward with gradients), cleared."""
        pulls, self._pulls = self._pulls, []
        return pulls

    def extra_repr(self) -> str:
        size, length, dim = self.weight.shape
        return f"pool_size={size}, length={length}, dim={dim}, top_k={self.top_k}"


__all__ = ["INIT_DIVISOR", "L2PConfig", "PromptPool", "RANDOM_INIT_DIVISOR", "SUPERSEDED_INIT_DIVISOR", "TRACE_L2P",
           "TRACE_L2P_SETTING", "check_pool", "embedding_rows_init", "l2_normalize", "mean_query"]
