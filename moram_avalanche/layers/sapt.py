"""SAPT's shared attentive learning and selection: per-task LoRA blocks mixed by an attention
over task keys (Zhao et al., ACL 2024, "SAPT: A Shared Attentive Framework for
Parameter-Efficient Continual Learning of Large Language Models", Sec. 3; facts read from its
T5 code, circle-hit/SAPT ``src/t5_prompt.py``, not copied):

* query: the input's token embeddings (the model's frozen input embedding table), max-pooled
  over every position of the padded batch (``cal_attention``: ``text_input.max(dim=1)``, no
  mask), then a trainable projection shared by all tasks (``trans_input``:
  ``Linear(d, 100, bias=False) -> Linear(100, d, bias=False) -> SiLU -> LayerNorm(d)``);
* keys: one ``d``-vector per task, drawn from ``U(-1, 1)`` when the task starts
  (``prompt_key``), the earlier tasks' frozen;
* attention: ``softmax_t(k_t . q / temperature)`` over the tasks so far, temperature
  ``sqrt(d)`` (``--attn_temperature 1``; otherwise ``sqrt(2 d)``);
* combination: in every wrapped linear (T5: the query and value projections of every
  attention block, encoder self-, decoder self- and cross-attention), ``W x + scale * sum_t
  a_t U_t D_t x`` with one LoRA block per task (``lora_q``, ``lora_v`` and
  ``previous_lora_weights_*``); the earlier tasks' blocks are frozen and their outputs carry no
  gradient (computed under ``torch.no_grad()`` in SAPT), the weights ``a`` do; the weights the
  encoder's input gives are used by the decoder too.

:class:`SAPTRouter` holds the query projection, the keys and the reflection targets (the mean
attention weights each task ended with, :mod:`moram_avalanche.strategies.text.plugins.sapt`);
:class:`SAPTLoRALinear` holds one layer's blocks and reads the batch's weights from the
:class:`SAPTSelection` the router fills. Pure torch.
"""

from __future__ import annotations

import math
from typing import Optional

import torch
from torch import nn
from torch.nn import functional as F

from ..utils.checks import check_positive_int
from .base import GrowingAdapter
from .task_lora import TaskLoRALinear

#: SAPT's query projection width (``src/t5_prompt.py``: ``nn.Linear(config.d_model, 100, bias=False)``)
SAPT_QUERY_HIDDEN = 100


class SAPTSelection:
    """The current batch's attention weights over the tasks, ``[batch, tasks]``: written by the
    router for each encoder input, read by every :class:`SAPTLoRALinear` (a plain holder, not a
    module: it carries no state)."""

    def __init__(self) -> None:
        self.weights: Optional[torch.Tensor] = None


def sapt_temperature(d_model: int) -> float:
    """SAPT's softmax temperature, ``sqrt(d_model)`` (``--attn_temperature 1``, its scripts' value)."""
    return math.sqrt(d_model)


class SAPTRouter(GrowingAdapter):
    """The query projection, one key per task and the tasks' reflection targets (module docstring).

    Declared state: ``query`` (the shared projection), ``keys`` (``keys.0``, ``keys.1``, ...) and
    ``reflection``, ``[tasks settled, tasks settled]``: row ``i`` holds the mean weights task
    ``i`` ended with over tasks ``0..i``, zeros after.

    Args:
        d_model: the width of the token embeddings.
        hidden: the projection's inner width (SAPT: 100).
        temperature: the softmax's (None: ``sqrt(d_model)``, SAPT's).
    """

    STATE_KEYS = ("query", "keys", "reflection")

    def __init__(self, d_model: int, hidden: int = SAPT_QUERY_HIDDEN, temperature: Optional[float] = None) -> None:
        super().__init__()
        check_positive_int("d_model", d_model)
        check_positive_int("hidden", hidden)
        self.d_model = d_model
        self.temperature = float(temperature) if temperature is not None else sapt_temperature(d_model)
        if not self.temperature > 0:
            raise ValueError(f"temperature must be > 0, got {temperature!r} (SAPT: sqrt(d_model))")
        self.query = nn.Sequential(nn.Linear(d_model, hidden, bias=False), nn.Linear(hidden, d_model, bias=False),
                                   nn.SiLU(), nn.LayerNorm(d_model))
        self.keys = nn.ParameterList()
        self.register_buffer("reflection", torch.zeros(0, 0))
        self.selection = SAPTSelection()

    @property
    def num_tasks(self) -> int:
        return len(self.keys)

    def _append(self) -> None:
        like = self.query[0].weight
        self.keys.append(nn.Parameter(like.new_empty(self.d_model).uniform_(-1.0, 1.0)))

    def expand(self) -> int:
        """Freeze the keys so far, append this task's (``U(-1, 1)``); the query projection trains."""
        for key in self.keys:
            key.requires_grad_(False)
        self._append()
        self.query.requires_grad_(True)
        return self.num_tasks

    def freeze(self) -> None:
        self.query.requires_grad_(False)
        for key in self.keys:
            key.requires_grad_(False)

    def logits(self, embeddings: torch.Tensor) -> torch.Tensor:
        """``[batch, tasks]`` scores ``k_t . q / temperature`` of ``[batch, length, d]`` token embeddings."""
        if self.num_tasks == 0:
            raise RuntimeError("SAPTRouter has no task key yet: expand() it before the first task")
        if embeddings.dim() != 3 or embeddings.shape[-1] != self.d_model:
            raise ValueError(f"SAPTRouter reads [batch, length, {self.d_model}] token embeddings, got "
                             f"{tuple(embeddings.shape)}")
        pooled = embeddings.max(dim=1).values  # every position, padding included (SAPT's cal_attention)
        query = self.query(pooled.to(self.query[0].weight.dtype))
        keys = torch.stack(list(self.keys)).to(query.dtype)
        return query @ keys.t() / self.temperature

    def weights(self, embeddings: torch.Tensor) -> torch.Tensor:
        """``[batch, tasks]`` attention weights: the softmax of :meth:`logits` over the tasks."""
        return torch.softmax(self.logits(embeddings), dim=-1)

    def select(self, embeddings: torch.Tensor) -> torch.Tensor:
        """Compute the batch's weights and hand them to every block (:class:`SAPTSelection`)."""
        self.selection.weights = self.weights(embeddings)
        return self.selection.weights

    def target(self, task: int, tasks: int) -> torch.Tensor:
        """Task ``task``'s reflection target over ``tasks`` keys: its stored weights, zeros after."""
        if not 0 <= task < self.reflection.shape[0]:
            raise ValueError(f"no reflection target for task {task}: {self.reflection.shape[0]} task(s) settled")
        out = self.reflection.new_zeros(tasks)
        out[: task + 1] = self.reflection[task, : task + 1]
        return out

    def settle(self, mean_weights: torch.Tensor) -> None:
        """Store the mean weights the task just trained ended with (its reflection target)."""
        task = self.reflection.shape[0]
        if mean_weights.shape != (task + 1,):
            raise ValueError(f"task {task}'s reflection target has one weight per task so far ({task + 1}), got "
                             f"shape {tuple(mean_weights.shape)}")
        grown = self.reflection.new_zeros(task + 1, task + 1)
        grown[:task, :task] = self.reflection
        grown[task, :] = mean_weights.detach().to(grown)
        self.reflection = grown

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        count = len({key[len(prefix):].split(".")[1] for key in state_dict if key.startswith(prefix + "keys.")})
        while self.num_tasks < count:  # a checkpoint of more tasks: make room, frozen
            self._append()
        if prefix + "reflection" in state_dict:
            self.reflection = self.reflection.new_zeros(state_dict[prefix + "reflection"].shape)
        self.freeze()
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)

    def extra_repr(self) -> str:
        return f"d_model={self.d_model}, tasks={self.num_tasks}, temperature={self.temperature:g}"


def reflection_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """SAPT's attentive reflection term of one batch of an earlier task's pseudo-samples:
    ``KL(target || softmax(logits))`` summed over the tasks and averaged over the batch
    (``memory_replay``: ``KLDivLoss(reduction="batchmean")`` of ``log_softmax(scores)``; a zero
    target weight adds nothing)."""
    if target.dim() == 1:
        target = target.expand_as(logits)
    return F.kl_div(F.log_softmax(logits, dim=-1), target.to(logits.dtype), reduction="batchmean")


class SAPTLoRALinear(TaskLoRALinear):
    """``W x + b + scale * sum_t a_t U_t D_t dropout(x)``: one LoRA block per task over a frozen
    base, mixed by the batch's attention weights ``a`` (``[batch, tasks]``, read from
    ``selection``); the earlier tasks' blocks add outputs without gradient (module docstring).

    Args:
        base: the pre-trained linear. selection: the router's :class:`SAPTSelection`.
        rank: each block's rank (SAPT's SuperNI T5 runs: 4). scale: ``lora_alpha / r`` (32 / 4).
        dropout: on the blocks' input (SAPT: 0).
    """

    def __init__(self, base: nn.Linear, selection: SAPTSelection, rank: int = 4, scale: float = 8.0,
                 dropout: float = 0.0) -> None:
        super().__init__(base, rank, scale=scale)
        self.selection = selection
        self.lora_dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weights = self.selection.weights
        if weights is None:
            raise RuntimeError("SAPTLoRALinear has no attention weights: the SAPT router sets them from the "
                               "encoder's input (call the model as a whole, not one layer)")
        if weights.shape != (x.shape[0], self.num_tasks):
            raise RuntimeError(f"SAPT attention weights of shape {tuple(weights.shape)} do not fit a batch of "
                               f"{x.shape[0]} over {self.num_tasks} task block(s) (beam search and sampled "
                               "copies of the prompts are not supported)")
        out = self.base(x)
        dropped = self.lora_dropout(x)
        shape = (x.shape[0],) + (1,) * (x.dim() - 1)
        for task, (down, up) in enumerate(zip(self.downs, self.ups)):
            if down.requires_grad:
                update = F.linear(F.linear(dropped, down.to(x.dtype)), up.to(x.dtype))
            else:
                with torch.no_grad():  # an earlier task's block: SAPT computes it without gradient
                    update = F.linear(F.linear(dropped, down.to(x.dtype)), up.to(x.dtype))
            out = out + self.scale * weights[:, task].to(x.dtype).view(shape) * update
        return out

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, dropout={self.lora_dropout.p}"


__all__ = ["SAPT_QUERY_HIDDEN", "SAPTLoRALinear", "SAPTRouter", "SAPTSelection", "reflection_loss",
           "sapt_temperature"]
