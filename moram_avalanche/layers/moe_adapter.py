"""MoE-Adapters (Yu et al., CVPR 2024): a mixture of bottleneck experts beside every block's MLP.

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

Nothing of open_clip is copied. ``ResidualAttentionBlock.forward`` ends with
``x = x + self.ls_2(self.mlp(self.ln_2(x)))`` (open_clip 3.3, batch-first ``[B, N, d]``), so
two leaf wrappers are enough: :class:`StreamTap` replaces ``ln_2`` and hands its input (the
residual stream) to the block's :class:`MoEAdapterMixture`; :class:`MixtureAdd` replaces
``ls_2`` (an ``nn.Identity`` in CLIP) and adds the mixture's output to the MLP branch.

Which router a forward uses is the *route*, set with :func:`routing` (a context manager):
``None`` or ``-1`` bypasses the adapters (plain CLIP, bit for bit), an ``int`` ``t >= 0``
routes every sample through router ``t``, and a ``LongTensor [B]`` picks a router per sample
(``-1`` entries bypass). Pure torch + open_clip's module tree: no Avalanche.
"""

from __future__ import annotations

import contextlib
import math
from typing import Dict, Iterator, Optional, Sequence, Union

import torch
import torch.nn.functional as F
from torch import nn

from .inject import ENCODERS, _check_names, encoder_module, residual_blocks

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


class MoEAdapterMixture(nn.Module):
    """The experts and the per-task routers of one block.

    Buffers: ``counts`` ``[E]`` (how many samples chose each expert while in training mode,
    text prompts included, since the last :meth:`reset_counts`) and ``frozen`` ``[E]`` (the
    experts frozen so far, see :meth:`freeze_most_used`). Routers are ``gates[t]`` /
    ``noises[t]`` (``[d, E]``, zero-initialised), one per task, added by :meth:`add_router`.
    """

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
        ids = _route_ids(route, x0.shape[0], x0.device)
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
        ids = _route_ids(route, stream.shape[0], stream.device)
        if not bool((ids >= 0).any()):
            return None
        gates = self.gates_for(stream[:, 0], ids)
        out = torch.zeros_like(stream)
        for expert_index in (gates != 0).any(0).nonzero().flatten().tolist():
            rows = gates[:, expert_index].nonzero().flatten()
            weight = gates[rows, expert_index].view(-1, 1, 1)
            out = out.index_add(0, rows, weight * self.experts[expert_index](stream[rows]))
        return out

    def extra_repr(self) -> str:
        return (f"width={self.width}, experts={self.num_experts}, topk={self.topk}, "
                f"routers={self.num_routers}, frozen={int(self.frozen.sum())}")


def _route_ids(route: Route, batch: int, device) -> torch.Tensor:
    if route is None:
        return torch.full((batch,), -1, dtype=torch.long, device=device)
    if isinstance(route, int):
        return torch.full((batch,), route, dtype=torch.long, device=device)
    if not isinstance(route, torch.Tensor) or route.dim() != 1 or route.shape[0] != batch:
        raise ValueError(f"a route is None, an int or a LongTensor [B] with B={batch}, got "
                         f"{route if not isinstance(route, torch.Tensor) else tuple(route.shape)}")
    return route.to(device=device, dtype=torch.long)


class StreamTap(nn.Module):
    """Wraps ``ln_2``: passes its input to the block's mixture, returns ``ln_2(x)`` unchanged."""

    def __init__(self, base: nn.Module, mixture: MoEAdapterMixture) -> None:
        super().__init__()
        self.base = base
        # not a submodule: the mixture is registered once, under MixtureAdd
        object.__setattr__(self, "_mixture", mixture)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self._mixture.remember(x)
        return self.base(x)


class MixtureAdd(nn.Module):
    """Wraps ``ls_2``: ``ls_2(mlp_out) + mixture(stream before ln_2)``."""

    def __init__(self, base: nn.Module, mixture: MoEAdapterMixture) -> None:
        super().__init__()
        self.base = base
        self.moe = mixture

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.base(x)
        extra = self.moe.take()
        return out if extra is None else out + extra


def inject_moe_adapters(
    model: nn.Module,
    encoders: Sequence[str] = ENCODERS,
    *,
    experts: int = 22,
    bottleneck: int = 64,
    topk: int = 2,
    dropout: float = 0.1,
    scale: float = 0.1,
    freeze_model: bool = True,
) -> Dict[str, MoEAdapterMixture]:
    """Give every residual block of ``encoders`` a :class:`MoEAdapterMixture` beside its MLP.

    Defaults are the release's MTIL setting (``--ffn_adapt_where AdapterDoubleEncoder
    --experts_num 22 --topk 2``; bottleneck 64, dropout 0.1, scale 0.1 in its ``Adapter``).
    With ``freeze_model`` every existing CLIP parameter is frozen first. The mixtures start
    with no router: the model computes exactly what it did until :func:`add_router` and a
    route are given. Returns ``{dotted block name: mixture}``.
    """
    if moe_mixtures(model):
        raise ValueError("the model already holds MoE adapters: inject_moe_adapters once per model")
    if freeze_model:
        model.requires_grad_(False)
    prefix_of = {module: name for name, module in model.named_modules()}
    found = []
    for encoder in _check_names(encoders, ENCODERS, "encoder"):
        root = encoder_module(model, encoder)
        blocks = residual_blocks(root)
        if not blocks:
            raise ValueError(f"the {encoder} encoder of {type(model).__name__} has no transformer "
                             "residual blocks; MoE adapters support ViT-style open_clip towers")
        for name, block in blocks:
            if not (isinstance(getattr(block, "ln_2", None), nn.Module)
                    and isinstance(getattr(block, "ls_2", None), nn.Module)):
                raise TypeError(f"{encoder} block {name!r} ({type(block).__name__}) lacks ln_2/ls_2: "
                                "only open_clip's ResidualAttentionBlock is supported")
            full = ".".join(part for part in (prefix_of[root], name) if part)
            found.append((full, block))
    mixtures = {}
    for full, block in found:
        like = block.mlp.c_fc.weight
        mixture = MoEAdapterMixture(block.mlp.c_fc.in_features, experts, bottleneck, topk, dropout,
                                    scale, device=like.device, dtype=like.dtype)
        block.ln_2 = StreamTap(block.ln_2, mixture).train(block.training)
        block.ls_2 = MixtureAdd(block.ls_2, mixture).train(block.training)  # the model's mode
        mixtures[full] = mixture
    return mixtures


def moe_mixtures(model: nn.Module) -> Dict[str, MoEAdapterMixture]:
    """Every :class:`MoEAdapterMixture` of ``model`` by dotted name."""
    return {name: m for name, m in model.named_modules() if isinstance(m, MoEAdapterMixture)}


def num_routers(model: nn.Module) -> int:
    """Routers per block (the same in every block); 0 for a model without adapters."""
    counts = {m.num_routers for m in moe_mixtures(model).values()}
    if len(counts) > 1:
        raise RuntimeError(f"blocks disagree on the number of routers: {sorted(counts)}")
    return counts.pop() if counts else 0


def add_router(model: nn.Module) -> int:
    """Add one router to every block (a new task slot); returns its index."""
    mixtures = moe_mixtures(model)
    if not mixtures:
        raise RuntimeError("the model has no MoE adapters: call inject_moe_adapters first")
    return {m.add_router() for m in mixtures.values()}.pop()


@contextlib.contextmanager
def routing(model: nn.Module, route: Route) -> Iterator[None]:
    """Run the forwards inside the block with ``route`` (None / -1: plain CLIP)."""
    if isinstance(route, int) and route < 0:
        route = None
    mixtures = list(moe_mixtures(model).values())
    previous = [m.route for m in mixtures]
    for m in mixtures:
        m.route = route
    try:
        yield
    finally:
        for m, old in zip(mixtures, previous):
            m.route = old
