"""Gradient accumulation: one optimizer step every ``steps`` minibatches.

The MoRAM release trains TRACE with a per-GPU batch of 1 and 8 accumulation steps
(``TRACE/runner_moram.sh``: ``--per_device_train_batch_size 1 --gradient_accumulation_steps 8``,
4 GPUs). :class:`AccumulatedSteps` wraps the optimizer so that Avalanche's training loop, which
calls ``zero_grad``, ``backward`` and ``step`` once per minibatch, steps once per ``steps``
minibatches: ``zero_grad`` clears the gradients only at the start of a cycle, ``step`` updates
only at its end, and the loop divides each minibatch's loss by ``steps`` (so the update is the
mean over the cycle's minibatches, as one minibatch ``steps`` times larger gives when their
token counts are equal). A last, shorter cycle at the end of an epoch is stepped by
:meth:`flush` with its gradients rescaled to the mean over the minibatches it holds. The
gradients accumulate in the parameters' dtype, as DeepSpeed's ZeRO optimizer accumulates them
(``grad_accum_dtype``: the model's), and the wrapped optimizer clips and steps their float32
copies (:mod:`~moram_avalanche.algorithms.mixed_precision`) once per cycle.
"""

from __future__ import annotations

from ....algorithms.mixed_precision import stepped_parameters


class AccumulatedSteps:
    """``optimizer`` stepping once every ``steps`` calls of :meth:`step` (module docstring).

    Every other attribute (``param_groups``, ``state``, ``state_dict`` ...) is the optimizer's.
    """

    def __init__(self, optimizer, steps: int) -> None:
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise ValueError(f"accumulation steps must be a positive integer, got {steps!r} (the release: 8)")
        self.optimizer, self.steps, self.pending = optimizer, steps, 0

    def zero_grad(self, set_to_none: bool = True) -> None:
        if self.pending == 0:  # the start of a cycle
            self.optimizer.zero_grad(set_to_none=set_to_none)

    def step(self, closure=None) -> None:
        self.pending += 1
        if self.pending == self.steps:
            self.optimizer.step()
            self.pending = 0

    def flush(self) -> bool:
        """Step a shorter last cycle (its gradients rescaled to their mean); True if it stepped."""
        if self.pending == 0:
            return False
        scale = self.steps / self.pending
        for param in stepped_parameters(self.optimizer):
            if param.grad is not None:
                param.grad.mul_(scale)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.pending = 0
        return True

    def __getattr__(self, name):
        if name == "optimizer":  # not set yet (unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.optimizer, name)


__all__ = ["AccumulatedSteps"]
