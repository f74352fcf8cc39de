"""MoELoRALinear: a frozen ``nn.Linear`` plus a growing mixture of rank-r LoRA experts.

The coarse-grained counterpart of MoRAM in the paper's routing ablation ("MoE-LoRA coarse":
X-TAIL 62.56 / 69.45 / 74.53 against MoRAM's 63.30 / 72.70 / 80.90). Pure torch: no
Avalanche, no open_clip.

For a token ``x`` and ``E`` experts (one per trained task), each a LoRA pair ``U_e D_e``
(``D_e`` ``[r, d_in]``, ``U_e`` ``[d_out, r]``):

* router   ``g(x) = softmax(G x / tau)`` with router rows ``G`` ``[E, d_in]`` (a bias-free
  ``Linear(d_in -> E)``; a bias would be a token-independent prior, which the per-token
  router of the ablation does not need)
* output   ``y = W x + b + sum_e g_e(x) U_e D_e x``   (dense mixture: every expert runs)

:meth:`MoELoRALinear.expand` (one call per task) freezes every existing expert and router row
and appends one expert: ``D`` Kaiming-uniform (``a = sqrt(5)``, like ``nn.Linear`` and LoRA),
``U`` zero (LoRA's initialisation, Hu et al. 2021), router row zero. The new expert adds
nothing at the start of its task, but the zero row gets the mean logit, so the softmax
shares the mass with the old experts from then on (the price of a dense softmax router).

State dict keys (stable; the layer resizes when loading, so a checkpoint taken after several
tasks loads into a freshly injected model): ``expert_down`` ``[E, r, d_in]``, ``expert_up``
``[E, d_out, r]``, ``router_weight`` ``[E, d_in]``, ``num_frozen`` (0-d long: frozen experts).
"""

from __future__ import annotations

import math
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from ..utils.checks import check_number, check_positive_int
from .base import GrowingAdapter, LinearWrapper


class MoELoRALinear(LinearWrapper, GrowingAdapter):
    """``W x + b + sum_e softmax(G x / tau)_e U_e D_e x`` over a frozen base ``nn.Linear``.

    Args:
        base: the pre-trained linear; frozen and kept as ``self.base``.
        rank: rank ``r`` of each expert (16 = MoRAM's atoms per task, so both add the same
            number of parameters per task).
        temperature: softmax temperature of the router (1: the plain softmax).
    """

    STATE_KEYS = ("expert_down", "expert_up", "router_weight", "num_frozen")

    def __init__(self, base: nn.Linear, rank: int = 16, temperature: float = 1.0) -> None:
        super().__init__(base)
        check_positive_int("rank", rank)
        check_number("temperature", temperature, low=0, low_open=True, hint="1: the plain softmax")
        self.rank = rank
        self.temperature = float(temperature)
        like = self.template
        d_in, d_out = base.in_features, base.out_features
        # frozen experts (buffers) and the trainable one (parameters, None when all frozen)
        self.register_buffer("_down", like.new_zeros(0, rank, d_in), persistent=False)
        self.register_buffer("_up", like.new_zeros(0, d_out, rank), persistent=False)
        self.register_buffer("_router", like.new_zeros(0, d_in), persistent=False)
        self.new_down: Optional[nn.Parameter] = None
        self.new_up: Optional[nn.Parameter] = None
        self.new_router: Optional[nn.Parameter] = None

    # ------------------------------------------------------------------ experts
    @property
    def num_frozen(self) -> int:
        return self._down.shape[0]

    @property
    def num_experts(self) -> int:
        return self.num_frozen + (self.new_down is not None)

    def _all(self, frozen: torch.Tensor, new: Optional[torch.Tensor]) -> torch.Tensor:
        return frozen if new is None else torch.cat([frozen, new.unsqueeze(0)])

    @property
    def down(self) -> torch.Tensor:
        """``[E, r, d_in]``, frozen experts first (detached)."""
        return self._all(self._down, self.new_down).detach()

    @property
    def up(self) -> torch.Tensor:
        """``[E, d_out, r]`` (detached)."""
        return self._all(self._up, self.new_up).detach()

    @property
    def router_weight(self) -> torch.Tensor:
        """``[E, d_in]`` router rows (detached)."""
        return self._all(self._router, self.new_router).detach()

    def freeze(self) -> None:
        """Freeze the trainable expert and its router row (they join the buffers)."""
        if self.new_down is None:
            return
        self._set(self.down.clone(), self.up.clone(), self.router_weight.clone(), self.num_experts)

    def expand(self) -> int:
        """Freeze everything and append one trainable expert; returns the number of experts."""
        self.freeze()
        like = self._down
        down = torch.empty(self.rank, self.in_features)
        nn.init.kaiming_uniform_(down, a=math.sqrt(5))
        self.new_down = nn.Parameter(down.to(device=like.device, dtype=like.dtype))
        self.new_up = nn.Parameter(like.new_zeros(self.out_features, self.rank))
        self.new_router = nn.Parameter(like.new_zeros(self.in_features))
        return self.num_experts

    def load_experts(self, down: torch.Tensor, up: torch.Tensor, router: torch.Tensor,
                     num_frozen: int) -> None:
        """Replace every expert; the first ``num_frozen`` are frozen, at most one trains.

        When the trainable expert exists already with this layout, it is updated in place
        (an optimizer that holds it keeps working).
        """
        down, up, router = (torch.as_tensor(t) for t in (down, up, router))
        experts = down.shape[0] if down.dim() == 3 else -1
        expected = {"down": (experts, self.rank, self.in_features),
                    "up": (experts, self.out_features, self.rank),
                    "router": (experts, self.in_features)}
        for name, tensor in (("down", down), ("up", up), ("router", router)):
            if experts < 0 or tuple(tensor.shape) != expected[name]:
                raise ValueError(
                    f"expert {name} must be [num_experts, ...] = {expected[name]} "
                    f"(rank {self.rank}), got {tuple(tensor.shape)}"
                )
        num_frozen = int(num_frozen)
        if not experts - 1 <= num_frozen <= experts or num_frozen < 0:
            raise ValueError(
                f"num_frozen must be {experts} or {experts - 1} (at most one expert trains), "
                f"got {num_frozen}"
            )
        like = self.template
        down, up, router = (t.to(device=like.device, dtype=like.dtype) for t in (down, up, router))
        same_layout = num_frozen == self.num_frozen and experts == self.num_experts
        if self.new_down is not None and same_layout:
            with torch.no_grad():
                self._down.copy_(down[:num_frozen])
                self._up.copy_(up[:num_frozen])
                self._router.copy_(router[:num_frozen])
                self.new_down.copy_(down[-1])
                self.new_up.copy_(up[-1])
                self.new_router.copy_(router[-1])
            return
        self._set(down.clone(), up.clone(), router.clone(), num_frozen)

    def _set(self, down, up, router, num_frozen: int) -> None:
        self._down = down[:num_frozen].contiguous()
        self._up = up[:num_frozen].contiguous()
        self._router = router[:num_frozen].contiguous()
        if num_frozen < down.shape[0]:
            self.new_down = nn.Parameter(down[-1].clone())
            self.new_up = nn.Parameter(up[-1].clone())
            self.new_router = nn.Parameter(router[-1].clone())
        else:
            self.new_down = self.new_up = self.new_router = None

    # ------------------------------------------------------------------ forward
    def gates(self, x: torch.Tensor) -> torch.Tensor:
        """Router probabilities ``softmax(G x / tau)`` ``[..., E]`` (float32 at least)."""
        router = self._all(self._router, self.new_router)
        wide = torch.promote_types(x.dtype, torch.float32)
        logits = F.linear(x.to(wide), router.to(wide))
        return torch.softmax(logits / self.temperature, dim=-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.base(x)
        experts = self.num_experts
        if experts == 0:
            return out
        tokens = x.reshape(-1, self.in_features)
        down = self._all(self._down, self.new_down).to(x.dtype)  # [E, r, d_in]
        up = self._all(self._up, self.new_up).to(x.dtype)  # [E, d_out, r]
        hidden = F.linear(tokens, down.reshape(experts * self.rank, self.in_features))
        hidden = hidden.view(-1, experts, self.rank) * self.gates(tokens).to(x.dtype).unsqueeze(-1)
        up_flat = up.permute(1, 0, 2).reshape(self.out_features, experts * self.rank)
        delta = F.linear(hidden.reshape(-1, experts * self.rank), up_flat)
        return out + delta.reshape(*x.shape[:-1], self.out_features)

    # ------------------------------------------------------------------ state dict
    def _save_to_state_dict(self, destination, prefix, keep_vars):
        destination[prefix + "expert_down"] = self.down
        destination[prefix + "expert_up"] = self.up
        destination[prefix + "router_weight"] = self.router_weight
        destination[prefix + "num_frozen"] = torch.tensor(self.num_frozen)

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys,
                              unexpected_keys, error_msgs):
        found = {name: state_dict.get(prefix + name) for name in self.STATE_KEYS}
        missing = [prefix + name for name, value in found.items() if value is None]
        if missing:
            missing_keys.extend(missing)
        else:
            try:
                self.load_experts(found["expert_down"], found["expert_up"],
                                  found["router_weight"], int(found["num_frozen"]))
            except ValueError as err:
                name = prefix[:-1] or "MoELoRALinear"
                error_msgs.append(f"While loading experts of {name}: {err}")
        if strict:
            for key in state_dict:
                if key.startswith(prefix):
                    local = key[len(prefix):]
                    if local not in self.STATE_KEYS and local.split(".", 1)[0] not in self._modules:
                        unexpected_keys.append(key)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"rank={self.rank}, experts={self.num_frozen}/{self.num_experts} (frozen/total), "
                f"temperature={self.temperature}")


__all__ = ["MoELoRALinear"]
