"""WeightCopy: a detached copy of a model's parameters, for anchors, averages and interpolation.

The parameter-space operations of the ZSCL / WiSE-FT code, all over ``model.parameters()``
(buffers are left alone, as there) [ZSCL mtil/src/models/helpers.py, finetune.py]:

* :meth:`WeightCopy.average_in` -- ``merge_we``: ``theta_bar <- (n * theta_bar + theta) / (n + 1)``;
* :meth:`WeightCopy.blend_into` -- the ``--wise_merge`` step: ``theta <- alpha * theta + (1 - alpha) * copy``;
* :meth:`WeightCopy.squared_distance` -- ``l2_loss``: ``sum_p ||theta_p - copy_p||^2``;
* :meth:`WeightCopy.load_into` -- the averaged model becomes the model.

A copy lives on the CPU in float32 (``on="cpu"``, the default: no extra accelerator memory)
or next to each parameter in its own device and dtype (``on="model"``: faster, one more
model-sized block of accelerator memory). The reference keeps every copy on the GPU.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import nn

#: where a :class:`WeightCopy` lives: "cpu" (float32, no accelerator memory) or "model" (each
#: parameter's own device and dtype)
PLACES = ("cpu", "model")


def check_place(on: str) -> str:
    """``on`` when it is one of :data:`PLACES`; a ValueError naming them otherwise."""
    if on not in PLACES:
        raise ValueError(f"weight copies go on 'cpu' or 'model' (the model's device and dtype), got {on!r}")
    return on


class WeightCopy:
    """A copy of ``model``'s parameters (by name), taken now; see the module docstring."""

    def __init__(self, model: nn.Module, on: str = "cpu") -> None:
        self.on = check_place(on)
        pin = self.on == "cpu" and torch.cuda.is_available()
        self.tensors: dict[str, torch.Tensor] = {}
        with torch.no_grad():
            for name, param in model.named_parameters():
                if self.on == "model":
                    copy = param.detach().clone()
                else:
                    copy = param.detach().to("cpu", torch.float32, copy=True)
                    if pin and param.device.type == "cuda":
                        copy = copy.pin_memory()
                self.tensors[name] = copy

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.tensors.values())

    def _pairs(self, model: nn.Module) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        for _, pair in self._named_pairs(model):
            yield pair

    def _named_pairs(self, model: nn.Module):
        params = dict(model.named_parameters())
        if params.keys() != self.tensors.keys():
            missing = sorted(self.tensors.keys() - params.keys())[:3]
            extra = sorted(params.keys() - self.tensors.keys())[:3]
            raise ValueError(f"the model's parameters no longer match the copy (copy only: {missing}, "
                             f"model only: {extra}); take a new WeightCopy after changing the model")
        for name, copy in self.tensors.items():
            yield name, (params[name], copy)

    def place_like(self, model: nn.Module) -> None:
        """With ``on="model"``, move each copy to its parameter's device and dtype (no-op on CPU)."""
        if self.on == "model":
            params = dict(self._named_pairs(model))
            self.tensors = {name: copy.to(param.device, param.dtype) for name, (param, copy) in params.items()}

    @torch.no_grad()
    def load_into(self, model: nn.Module) -> None:
        """``theta <- copy``."""
        for param, copy in self._pairs(model):
            param.copy_(copy.to(param.device, param.dtype, non_blocking=True))

    @torch.no_grad()
    def average_in(self, model: nn.Module, count: int) -> None:
        """``copy <- (count * copy + theta) / (count + 1)``: ``count`` points already averaged.

        Accumulates in the copy's dtype (float32 on the CPU).
        """
        if count < 1:
            raise ValueError(f"count is the number of points already averaged (>= 1), got {count}")
        for param, copy in self._pairs(model):
            copy.mul_(count).add_(param.detach().to(copy.device, copy.dtype)).div_(count + 1)

    @torch.no_grad()
    def blend_into(self, model: nn.Module, alpha: float) -> None:
        """``theta <- alpha * theta + (1 - alpha) * copy`` (WiSE-FT), computed in float32."""
        for param, copy in self._pairs(model):
            other = copy.to(param.device, torch.float32, non_blocking=True)
            param.copy_(param.float().mul(alpha).add_(other, alpha=1 - alpha))

    def squared_distance(self, model: nn.Module) -> torch.Tensor:
        """``sum_p sum((theta_p - copy_p)^2)``, differentiable in ``model``'s parameters."""
        terms = [F.mse_loss(param, copy.to(param.device, param.dtype, non_blocking=True), reduction="sum")
                 for param, copy in self._pairs(model)]
        if not terms:
            raise ValueError("the model has no parameters")
        return torch.stack(terms).sum()


__all__ = ["PLACES", "WeightCopy", "check_place"]
