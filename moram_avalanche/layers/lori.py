"""LoRILinear: LoRA with a frozen random down-projection and a (later sparse) up-projection.

LoRI (Zhang et al., 2025, "LoRI: Reducing Cross-Task Interference in Multi-Task Low-Rank
Adaptation"; code juzhengz/LoRI, read for facts):

* ``A`` (here ``down``, ``[rank, d_in]``) is drawn as peft's ``LoraConfig`` draws it -- Kaiming
  uniform with ``a = sqrt(5)``, i.e. ``U(-1/sqrt(d_in), 1/sqrt(d_in))`` -- and frozen
  (``src/train_lori.py``: ``get_peft_model`` then ``requires_grad = False`` on every ``lora_A``);
  ``B`` (``up``) starts at zero and is the only trained factor (LoRI-D);
* LoRI-S trains ``B`` under a fixed binary mask: its gradient is zeroed where the mask is off
  (``src/apply_mask_in_backward.py``, ``p.grad.data[~mask] = 0`` before each AdamW step); ``B``
  starts at zero, so masked entries stay exactly zero;
* the mask comes from a trained LoRI-D's ``B`` by magnitude, over every ``B`` of the model at once
  (``src/extract_mask.py``, ``get_model_mask``: ``k = int((1 - sparsity) * total)``, threshold the
  k-th largest ``|B|``, keep ``|B| >= threshold``; sparsity 0.9 in the CodeAlpaca script):
  :func:`magnitude_masks`.

The mask is a buffer of the layer and part of its declared state, with ``masked`` (whether it
applies), so a checkpoint carries it. Pure torch: no Avalanche, no transformers.
"""

from __future__ import annotations

from typing import Dict, Iterable, Mapping

import torch
from torch import nn

from .lora import LoRALinear


class LoRILinear(LoRALinear):
    """``W x + b + scale * B (A x)`` with ``A`` frozen and ``B``'s gradient masked (module docstring).

    Args: base, rank, scale (peft's ``lora_alpha / r``; LoRI's CodeAlpaca script: 64 / 32 = 2).
    """

    def __init__(self, base: nn.Linear, rank: int, scale: float = 1.0) -> None:
        super().__init__(base, rank, scale=scale)
        self.down.requires_grad_(False)
        self.register_buffer("mask", torch.ones(base.out_features, rank, dtype=torch.bool, device=self.up.device))
        self.register_buffer("masked", torch.zeros((), dtype=torch.bool, device=self.up.device))
        self.up.register_hook(self._mask_gradient)

    @property
    def state_keys(self):
        return ("down", "up", "mask", "masked")

    def _mask_gradient(self, grad: torch.Tensor) -> torch.Tensor:
        return grad * self.mask.to(grad.dtype) if bool(self.masked) else grad

    @torch.no_grad()
    def set_mask(self, mask: torch.Tensor) -> None:
        """Train ``B`` only where ``mask`` (``[d_out, rank]``, bool) is on, from ``B = 0`` (LoRI-S)."""
        if tuple(mask.shape) != tuple(self.up.shape) or mask.dtype != torch.bool:
            raise ValueError(f"a LoRI mask is a bool tensor of B's shape {tuple(self.up.shape)}, got "
                             f"{mask.dtype} {tuple(mask.shape)}")
        self.mask.copy_(mask)
        self.masked.fill_(True)
        self.up.zero_()

    def extra_repr(self) -> str:
        kept = f", kept={int(self.mask.sum())}/{self.mask.numel()}" if bool(self.masked) else ""
        return super().extra_repr() + kept


def magnitude_masks(ups: Mapping[str, torch.Tensor], sparsity: float) -> Dict[str, torch.Tensor]:
    """LoRI's model-wide magnitude masks: with every ``B`` of ``ups`` pooled, keep ``|B| >=`` the
    ``k``-th largest magnitude, ``k = int((1 - sparsity) * total)`` (juzhengz/LoRI
    ``src/extract_mask.py``, ``get_model_mask``; ties at the threshold are kept, as there)."""
    if not ups:
        raise ValueError("magnitude_masks needs at least one B matrix; the model has no LoRI layer")
    if not 0 <= sparsity < 1:
        raise ValueError(f"sparsity must be in [0, 1), got {sparsity!r} (LoRI's CodeAlpaca script: 0.9)")
    pooled = torch.cat([up.detach().abs().reshape(-1).float().cpu() for up in ups.values()])
    k = int((1 - sparsity) * pooled.numel())
    if k < 1:
        raise ValueError(f"sparsity {sparsity} keeps no entry of the {pooled.numel()} in B; lower it")
    threshold = torch.topk(pooled, k).values[-1]
    return {name: up.detach().abs().float().cpu().ge(threshold).to(up.device) for name, up in ups.items()}


@torch.no_grad()
def clip_each_gradient(parameters: Iterable[torch.Tensor], max_norm: float) -> None:
    """Clip each parameter's gradient to L2 norm ``max_norm`` on its own, not all of them together
    (juzhengz/LoRI ``src/apply_mask_in_backward.py``: ``clip_grad_norm_(p, max_grad_norm)`` per
    parameter, ``grad_norm_strategy=even``, after the mask and before AdamW's step)."""
    for parameter in parameters:
        if parameter.grad is not None:
            torch.nn.utils.clip_grad_norm_(parameter, max_norm)


__all__ = ["LoRILinear", "clip_each_gradient", "magnitude_masks"]
