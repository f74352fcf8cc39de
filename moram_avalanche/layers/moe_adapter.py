"""MoE-Adapters (Yu et al., CVPR 2024): a mixture of bottleneck experts with one router per task.

Facts from the official MTIL code (JiazuoYu/MoE-Adapters4CL, ``mtil``; baselines reference,
section 2.1): in every residual block of both encoders ::

    x <- x + Attn(LN1(x))
    x <- x + MLP(LN2(x)) + sum_e g_e(x) * E_e(x)

where the experts read the residual stream *before* ``ln_2``. An expert (:class:`Expert`) is
Linear(d -> 64) -> ReLU -> Dropout(0.1) -> Linear(64 -> d), times 0.1; 22 experts per block
are shared by all tasks. Each task owns one noisy top-2 router per block (zero-initialised
gate and noise matrices ``d x 22``) reading token 0 of the sample (CLS for images, SOT for
text); the sample's gates apply to all of its tokens. No load-balancing loss (the release
computes one but never adds it).

This module holds one block's experts and routers (:class:`MoEAdapterMixture`, a growing
adapter: one router per :meth:`~MoEAdapterMixture.expand`) and the model-level helpers; how a
mixture is wired beside an open_clip block is :mod:`moram_avalanche.clip.block_taps`.

Which router a forward uses is the *route*, set with :func:`routing` (a context manager):
``None`` or ``-1`` bypasses the adapters (plain CLIP, bit for bit), an ``int`` ``t >= 0``
routes every sample through router ``t``, and a ``LongTensor [B]`` picks a router per sample
(``-1`` entries bypass). Pure torch: no Avalanche, no open_clip.
"""

from __future__ import annotations

import contextlib
import math
from typing import Iterator, Optional, Union

import torch
import torch.nn.functional as F
from torch import nn

from .base import GrowingAdapter, find_layers

Route = Union[None, int, torch.Tensor]


class Expert(nn.Module):
    """``scale * up(dropout(relu(down(x))))``: the release's ``Adapter`` (bottleneck 64, x 0.1).

    Init (LoRA-style, as the release): ``down`` weight Kaiming-uniform with ``a = sqrt(5)``,
    ``up`` weight zero, both biases zero -- a new expert outputs exactly 0.
    """

    def __init__(self, width: int, bottleneck: int = 64, dropout: float = 0.1, scale: float = 0.1,
                 *, device=None, dtype=None) -> None:
        super().__init__()
        self.down = nn.Linear(width, bottleneck, device=device, dtype=dtype)
        self.up = nn.Linear(bottleneck, width, device=device, dtype=dtype)
        self.dropout = nn.Dropout(dropout)
        self.scale = float(scale)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.kaiming_uniform_(self.down.weight, a=math.sqrt(5))
        nn.init.zeros_(self.down.bias)
        nn.init.zeros_(self.up.weight)
        nn.init.zeros_(self.up.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.scale * self.up(self.dropout(F.relu(self.down(x))))


def noisy_topk_gates(x0: torch.Tensor, gate: torch.Tensor, noise: torch.Tensor, topk: int,
                     train: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Shazeer's noisy top-k gating: ``(gates [B, E], chosen expert indices [B, k])``.

    ``h = x0 W_g``, plus ``eps * (softplus(x0 W_n) + 0.01)`` with ``eps ~ N(0, 1)`` when
    ``train``; the top-k entries of ``h`` are softmax-normalised and scattered into ``E``
    slots, every other gate is 0.
    """
    logits = x0 @ gate
    if train:
        std = F.softplus(x0 @ noise) + 0.01
        logits = logits + torch.randn_like(logits) * std
    top, index = logits.topk(topk, dim=-1)
    return torch.zeros_like(logits).scatter(-1, index, top.softmax(dim=-1)), index


class MoEAdapterMixture(GrowingAdapter):
    """The experts and the per-task routers of one block.

    Buffers: ``counts`` ``[E]`` (how many samples chose each expert while in training mode,
    text prompts included, since the last :meth:`reset_counts`) and ``frozen`` ``[E]`` (the
    experts frozen so far, see :meth:`freeze_most_used`). Routers are ``gates[t]`` /
    ``noises[t]`` (``[d, E]``, zero-initialised), one per task, added by :meth:`add_router`.

    As a growing adapter: :meth:`expand` adds the task's router and makes it (with the experts
    not frozen yet) the only trainable part; :meth:`freeze` stops all training. Its whole state
    dict is declared state; loading one adds routers until the count matches, so a checkpoint
    taken after several tasks loads into a freshly injected model.
    """

    STATE_KEYS = ("experts", "gates", "noises", "counts", "frozen")

    def __init__(self, width: int, experts: int = 22, bottleneck: int = 64, topk: int = 2,
                 dropout: float = 0.1, scale: float = 0.1, *, device=None, dtype=None) -> None:
        super().__init__()
        if not 1 <= topk <= experts:
            raise ValueError(f"topk must be in [1, experts={experts}], got {topk}")
        self.width, self.topk = width, topk
        self.experts = nn.ModuleList(
            Expert(width, bottleneck, dropout, scale, device=device, dtype=dtype) for _ in range(experts))
        self.gates = nn.ParameterList()
        self.noises = nn.ParameterList()
        self.register_buffer("counts", torch.zeros(experts, dtype=torch.long, device=device))
        self.register_buffer("frozen", torch.zeros(experts, dtype=torch.bool, device=device))
        #: the route of the current forward (set by :func:`routing`); None bypasses
        self.route: Route = None
        self._stream: Optional[torch.Tensor] = None

    @property
    def num_experts(self) -> int:
        return len(self.experts)

    @property
    def num_routers(self) -> int:
        return len(self.gates)

    # ---------------------------------------------------------------- routers and freezing
    def add_router(self) -> int:
        """Append a zero-initialised router (gate and noise matrices); returns its index."""
        like = self.experts[0].down.weight
        shape = (self.width, self.num_experts)
        self.gates.append(nn.Parameter(like.new_zeros(shape)))
        self.noises.append(nn.Parameter(like.new_zeros(shape)))
        return self.num_routers - 1

    def set_trainable(self, router: Optional[int]) -> None:
        """Router ``router`` and the experts not frozen require grad; with None nothing does."""
        for index, (gate, noise) in enumerate(zip(self.gates, self.noises)):
            gate.requires_grad_(index == router)
            noise.requires_grad_(index == router)
        for expert, frozen in zip(self.experts, self.frozen.tolist()):
            expert.requires_grad_(router is not None and not frozen)

    def reset_counts(self) -> None:
        self.counts.zero_()

    def expand(self) -> int:
        """Add this task's router; it and the experts not frozen yet train, selection counts restart.

        Returns the router's index (the task's route).
        """
        router = self.add_router()
        self.reset_counts()
        self.set_trainable(router)
        return router

    def freeze(self) -> None:
        """Nothing trains (the experts to keep for good are :meth:`freeze_most_used`'s choice)."""
        self.set_trainable(None)

    def freeze_most_used(self, k: int = 2) -> torch.Tensor:
        """Add the ``k`` most-selected experts since :meth:`reset_counts` to the frozen set.

        Cumulative (the release appends to its frozen list after every task; an expert may be
        picked again). Experts never selected are not frozen. Returns the indices picked.
        """
        picked = self.counts.topk(min(k, self.num_experts)).indices
        picked = picked[self.counts[picked] > 0]
        self.frozen[picked] = True
        for index in picked.tolist():
            self.experts[index].requires_grad_(False)
        return picked

    # ---------------------------------------------------------------- forward
    def remember(self, stream: torch.Tensor) -> None:
        """Called by :class:`StreamTap` with the residual stream entering ``ln_2``."""
        self._stream = stream

    def take(self) -> Optional[torch.Tensor]:
        """The mixture output for the remembered stream (None when bypassed), forgetting it."""
        stream, self._stream = self._stream, None
        if stream is None or self.route is None:
            return None
        return self(stream, self.route)

    def gates_for(self, x0: torch.Tensor, route: Route) -> torch.Tensor:
        """Gates ``[B, E]`` for token-0 features ``x0`` ``[B, d]``; bypassed rows are 0."""
        ids = route_ids(route, x0.shape[0], x0.device)
        gates = x0.new_zeros(x0.shape[0], self.num_experts)
        for router in ids[ids >= 0].unique().tolist():
            if router >= self.num_routers:
                raise IndexError(f"route {router} asks for a router that does not exist: this "
                                 f"block has {self.num_routers} (one per trained task)")
            rows = (ids == router).nonzero().squeeze(1)
            values, chosen = noisy_topk_gates(x0[rows], self.gates[router], self.noises[router],
                                              self.topk, self.training)
            gates = gates.index_copy(0, rows, values.to(gates.dtype))
            if self.training:
                self.counts += torch.bincount(chosen.flatten(), minlength=self.num_experts)
        return gates

    def forward(self, stream: torch.Tensor, route: Route) -> Optional[torch.Tensor]:
        """``sum_e g_e E_e(stream)`` for ``stream`` ``[B, N, d]``; None when every row bypasses."""
        if stream.dim() != 3 or stream.shape[-1] != self.width:
            raise ValueError(f"expected a batch-first stream [B, N, {self.width}], got "
                             f"{tuple(stream.shape)}")
        ids = route_ids(route, stream.shape[0], stream.device)
        if not bool((ids >= 0).any()):
            return None
        gates = self.gates_for(stream[:, 0], ids)
        out = torch.zeros_like(stream)
        for expert_index in (gates != 0).any(0).nonzero().flatten().tolist():
            rows = gates[:, expert_index].nonzero().flatten()
            weight = gates[rows, expert_index].view(-1, 1, 1)
            out = out.index_add(0, rows, weight * self.experts[expert_index](stream[rows]))
        return out

    # ---------------------------------------------------------------- state
    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        """Grow to the saved number of routers before the routers load (then nothing trains)."""
        saved = sum(1 for key in state_dict if key.startswith(f"{prefix}gates.")
                    and key[len(prefix) + 6:].isdigit())
        if saved < self.num_routers:
            error_msgs.append(f"{prefix[:-1] or 'MoEAdapterMixture'} has {self.num_routers} routers, "
                              f"the state {saved}: load it into a freshly injected model")
        while self.num_routers < saved:
            self.add_router()
        self.set_trainable(None)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys,
                                      unexpected_keys, error_msgs)

    def extra_repr(self) -> str:
        return (f"width={self.width}, experts={self.num_experts}, topk={self.topk}, "
                f"routers={self.num_routers}, frozen={int(self.frozen.sum())}")


def route_ids(route: Route, batch: int, device) -> torch.Tensor:
    if route is None:
        return torch.full((batch,), -1, dtype=torch.long, device=device)
    if isinstance(route, int):
        return torch.full((batch,), route, dtype=torch.long, device=device)
    if not isinstance(route, torch.Tensor) or route.dim() != 1 or route.shape[0] != batch:
        raise ValueError(f"a route is None, an int or a LongTensor [B] with B={batch}, got "
                         f"{route if not isinstance(route, torch.Tensor) else tuple(route.shape)}")
    return route.to(device=device, dtype=torch.long)


def num_routers(model: nn.Module) -> int:
    """Routers per block (the same in every block); 0 for a model without adapters."""
    counts = {m.num_routers for m in find_layers(model, MoEAdapterMixture).values()}
    if len(counts) > 1:
        raise RuntimeError(f"blocks disagree on the number of routers: {sorted(counts)}")
    return counts.pop() if counts else 0


def add_router(model: nn.Module) -> int:
    """Add one router to every block (a new task slot); returns its index."""
    mixtures = find_layers(model, MoEAdapterMixture)
    if not mixtures:
        raise RuntimeError("the model has no MoE adapters: call inject_moe_adapters first")
    return {m.add_router() for m in mixtures.values()}.pop()


@contextlib.contextmanager
def routing(model: nn.Module, route: Route) -> Iterator[None]:
    """Run the forwards inside the block with ``route`` (None / -1: plain CLIP)."""
    if isinstance(route, int) and route < 0:
        route = None
    mixtures = list(find_layers(model, MoEAdapterMixture).values())
    previous = [m.route for m in mixtures]
    for m in mixtures:
        m.route = route
    try:
        yield
    finally:
        for m, old in zip(mixtures, previous):
            m.route = old


__all__ = ["Expert", "MoEAdapterMixture", "Route", "add_router", "noisy_topk_gates", "num_routers",
           "route_ids", "routing"]
