"""DualPrompt (Wang et al., "DualPrompt: Complementary Prompting for Rehearsal-Free Continual
Learning", ECCV 2022) as a :class:`~moram_avalanche.text.soft_prompt.PromptPrefix` of a language
model: **prompt tuning at the input**, not the paper's prefix tuning inside attention layers.

The paper attaches a shared G-prompt to the first blocks' attention and a task's E-prompt to the
next blocks' (prefix tuning). Here both are vectors put before the input embeddings, as
TreeLoRA's DualPrompt on TRACE does (ZinYY/TreeLoRA, built on TRACE's code,
``model/Dynamic_network/DualPrompt.py``: E-prompt, then G-prompt, then the input): every row reads
``[E-prompt; G-prompt; its prompt]``.

* G-prompt: ``g_length`` vectors shared by every task, trained on every task;
* E-prompts: one of ``e_length`` vectors per task (a pool of ``pool_size``), each with a key.
  In training the current task's E-prompt is used and its key is pulled towards the rows'
  queries, ``1 - cos(query, key)`` averaged over the rows (the paper's matching loss, weight 1);
  in evaluation each row takes the E-prompt whose key is most similar to its query, among the
  tasks trained so far (the paper's test-time matching: no task identity). The query is the mean
  of the row's frozen input embeddings (:func:`~moram_avalanche.text.prompt_pool.mean_query`, as
  L2P's here).

Settings (:class:`DualPromptConfig`, which checks them; :data:`TREELORA_DUALPROMPT_SETTING`): pool 10, G-prompt 2 vectors, E-prompt 3 (TreeLoRA
``training/main.py``: ``args.pool_size = 10``, ``g_prompt_length = 2``, ``e_prompt_length = 3``);
prompts start as embedding rows of random tokens (its ``init_new_prompt``, not divided), keys
N(0, 1) (its ``torch.randn``). Where this differs from that code: it selects the E-prompt of the
sample's own task at test time and has no key loss; here the paper's key matching is used.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from types import MappingProxyType
from typing import List, Optional

import torch
from torch import nn

from ..utils.checks import check_number
from .prompt_pool import l2_normalize, mean_query
from .soft_prompt import PromptPrefix, check_shape


@dataclass(frozen=True)
class DualPromptConfig:
    """DualPrompt's options (defaults TreeLoRA's DualPrompt and the paper's matching-loss weight,
    module docstring: :data:`TREELORA_DUALPROMPT_SETTING`).

    Attributes:
        pool_size: the E-prompts and keys, one per task (10): at least the stream's tasks.
        g_length: the G-prompt's vectors (2).
        e_length: each E-prompt's vectors (3).
        match_coef: the matching term's weight in the loss (the paper's: 1).

    Checked once, when it is made: a ValueError naming the option, what was given and TreeLoRA's value.
    """

    pool_size: int = 10
    g_length: int = 2
    e_length: int = 3
    match_coef: float = 1.0

    def __post_init__(self) -> None:
        _check_count("pool_size", self.pool_size, " (E-prompts, one per task)")
        _check_count("g_length", self.g_length)
        _check_count("e_length", self.e_length)
        check_number("match_coef", self.match_coef, low=0, hint="the DualPrompt paper's: 1")


def _check_count(name: str, value, what: str = "") -> None:
    """A one-line error unless ``value`` (option ``name`` of :class:`DualPromptConfig`) is a positive int."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name}{what} must be a positive int (TreeLoRA's DualPrompt: "
                         f"{getattr(DualPromptConfig, name)}), got {value!r}")


#: TreeLoRA's DualPrompt setting (module docstring): the defaults of :class:`DualPromptConfig`
TREELORA_DUALPROMPT_SETTING = DualPromptConfig()
#: 0.6's name of :data:`TREELORA_DUALPROMPT_SETTING`, a read-only view with its keys; goes in 0.8
TREELORA_DUALPROMPT = MappingProxyType(dataclasses.asdict(TREELORA_DUALPROMPT_SETTING))


class DualPromptPrefix(PromptPrefix):
    """``g_prompt`` ``[g_length, dim]``, ``e_prompts`` ``[pool_size, e_length, dim]``, ``keys``
    ``[pool_size, dim]`` and ``seen`` (the tasks trained so far, a buffer: it is checkpointed).

    Attributes:
        task: the task whose E-prompt training uses (set by the strategy; None: select by key).
        last_selection: the ``[B]`` E-prompt indices of the last batch.
    """

    def __init__(self, pool_size: int, g_length: int, e_length: int, dim: int, *,
                 g_init: Optional[torch.Tensor] = None, e_init: Optional[torch.Tensor] = None,
                 keys: Optional[torch.Tensor] = None) -> None:
        super().__init__()
        check_shape(g_length, dim)
        check_shape(e_length, dim)
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1:
            raise ValueError(f"pool_size (E-prompts, one per task) must be a positive int, got {pool_size!r}")
        shapes = {"g_init": (g_length, dim), "e_init": (pool_size, e_length, dim), "keys": (pool_size, dim)}
        given = {"g_init": g_init, "e_init": e_init, "keys": keys}
        for name, shape in shapes.items():
            if given[name] is None:
                given[name] = torch.randn(*shape)
            elif tuple(given[name].shape) != shape:
                raise ValueError(f"DualPrompt's {name} must be {list(shape)}, got {list(given[name].shape)}")
        self.g_prompt = nn.Parameter(given["g_init"].detach().clone().float())
        self.e_prompts = nn.Parameter(given["e_init"].detach().clone().float())
        self.keys = nn.Parameter(given["keys"].detach().clone().float())
        self.register_buffer("seen", torch.zeros((), dtype=torch.long))
        self.task: Optional[int] = None
        self.last_selection: Optional[torch.Tensor] = None
        self._matches: List[torch.Tensor] = []

    @property
    def pool_size(self) -> int:
        return self.e_prompts.shape[0]

    def cosines(self, query: torch.Tensor) -> torch.Tensor:
        """``[B, pool_size]`` cosine similarities of the queries with every key."""
        return l2_normalize(query) @ l2_normalize(self.keys).t()

    def prompts(self, embeds: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        rows = embeds.shape[0]
        similarity = self.cosines(mean_query(embeds, mask))
        if self.training and self.task is not None:
            indices = torch.full((rows,), self.task, dtype=torch.long, device=similarity.device)
            if torch.is_grad_enabled():
                self._matches.append((1.0 - similarity[:, self.task]).mean())
        else:  # among the trained tasks' keys (and the one in training, for an evaluation during it)
            candidates = max(int(self.seen), self.task + 1 if self.task is not None else 0)
            if candidates < 1:
                raise RuntimeError("DualPrompt selects among the E-prompts of trained tasks, and none is trained yet")
            indices = similarity[:, :candidates].argmax(1)
        self.last_selection = indices.detach()
        g = self.g_prompt.unsqueeze(0).expand(rows, -1, -1)
        return torch.cat([self.e_prompts[indices], g], dim=1)

    def pop_matches(self) -> List[torch.Tensor]:
        """The matching-loss terms recorded since the last call (one per training forward), cleared."""
        matches, self._matches = self._matches, []
        return matches

    def extra_repr(self) -> str:
        return (f"pool_size={self.pool_size}, g_length={self.g_prompt.shape[0]}, "
                f"e_length={self.e_prompts.shape[1]}, dim={self.keys.shape[1]}")


__all__ = ["DualPromptConfig", "DualPromptPrefix", "TREELORA_DUALPROMPT", "TREELORA_DUALPROMPT_SETTING"]
