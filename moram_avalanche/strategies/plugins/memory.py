"""How much memory a strategy holds: a CUDA peak, or a CPU proxy counted from its tensors."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from avalanche.core import SupervisedPlugin

from ...algorithms.fsdp import local_tensor
from ...algorithms.mixed_precision import master_copies

#: what :func:`memory_footprint` counts (the CPU proxy's label)
PROXY_LABEL = ("held tensors: model parameters and buffers, gradients, optimizer state, "
               "frozen teachers and weight copies (activations not counted)")


def tensors_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """Bytes this process holds of ``tensors``: a sharded weight (``--fsdp``) counts its local share."""
    return sum(local_tensor(t).numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))


def memory_footprint(strategy) -> dict[str, int]:
    """Bytes of the tensors ``strategy`` holds, by owner.

    ``model`` (parameters and buffers), ``gradients``, ``optimizer`` (its state tensors and the
    float32 master copies of low-precision weights, :mod:`~moram_avalanche.algorithms.mixed_precision`),
    and one entry per plugin with a ``held_bytes()`` method (teachers, weight copies).
    """
    model = strategy.model
    footprint = {
        "model": tensors_bytes([*model.parameters(), *model.buffers()]),
        "gradients": tensors_bytes(p.grad for p in model.parameters() if p.grad is not None),
        "optimizer": 0,
    }
    if strategy.optimizer is not None:
        footprint["optimizer"] = tensors_bytes(
            v for state in strategy.optimizer.state.values() for v in state.values()) + tensors_bytes(
            master_copies(strategy.optimizer))
    for plugin in strategy.plugins:
        if hasattr(plugin, "held_bytes"):
            footprint[type(plugin).__name__] = int(plugin.held_bytes())
    return footprint


class PeakMemory(SupervisedPlugin, supports_distributed=True):
    """Peak memory of a run: ``torch.cuda.max_memory_allocated`` on CUDA, the proxy anyway.

    ``proxy_peak`` is the largest total of :func:`memory_footprint` seen after a training
    iteration (when teachers, weight copies, gradients and optimizer state all exist) or an
    evaluated experience;
    ``cuda_peak`` the CUDA allocator's peak since this plugin was built (the process-wide
    peak statistics are reset then). Both survive a run checkpoint (``state_dict``).
    """

    def __init__(self) -> None:
        super().__init__()
        self.proxy_peak = 0
        self.cuda_peak = 0
        self.breakdown: dict[str, int] = {}
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()

    def after_training_iteration(self, strategy, **kwargs):
        self._measure(strategy)

    def after_eval_exp(self, strategy, **kwargs):
        self._measure(strategy)

    def _measure(self, strategy) -> None:
        footprint = memory_footprint(strategy)
        if sum(footprint.values()) > self.proxy_peak:
            self.proxy_peak, self.breakdown = sum(footprint.values()), footprint
        if torch.device(strategy.device).type == "cuda":
            self.cuda_peak = max(self.cuda_peak, torch.cuda.max_memory_allocated(strategy.device))

    def report(self) -> dict[str, object]:
        """``{"peak_mb", "kind", "breakdown_mb"}``: the CUDA peak when there is one, else the proxy."""
        cuda = self.cuda_peak > 0
        return {"peak_mb": (self.cuda_peak if cuda else self.proxy_peak) / 2 ** 20,
                "kind": "torch.cuda.max_memory_allocated" if cuda else "CPU proxy: " + PROXY_LABEL,
                "proxy_peak_mb": self.proxy_peak / 2 ** 20,
                "breakdown_mb": {k: v / 2 ** 20 for k, v in self.breakdown.items()}}

    def state_dict(self) -> dict:
        return {"proxy_peak": self.proxy_peak, "cuda_peak": self.cuda_peak, "breakdown": dict(self.breakdown)}

    def load_state_dict(self, state: dict) -> None:
        self.proxy_peak, self.cuda_peak = int(state["proxy_peak"]), int(state["cuda_peak"])
        self.breakdown = dict(state["breakdown"])


__all__ = ["PROXY_LABEL", "PeakMemory", "memory_footprint", "tensors_bytes"]
