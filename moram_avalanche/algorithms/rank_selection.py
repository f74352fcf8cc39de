"""CoDyRA's rank selection: proximal soft-thresholding of the LoRA gates on a rising schedule.

CoDyRA (continual dynamic rank-selective LoRA) gives every LoRA rank-1 component ``i`` a
scalar gate ``g_i`` (``y = W x + b + sum_i g_i (a_i . x) b_i``) and, after each optimizer step
of the second half of a task, shrinks the gates towards zero; the components whose gate
reaches zero are dropped. Facts from the official code [Artificer-AI-Lab/CoDyRA
``models/codyra.py`` ``train_model``, ``main.py``, ``runner_codyra.sh``; commit c1691e4]:

* thresholds ``linspace(0, max_kappa, steps)`` with ``max_kappa = 0.005`` (runner) and
  ``steps = 50`` (``--lambda_num`` default); the first ``dense_fraction = 0.5`` of the
  iterations are dense (no shrinkage);
* from iteration ``dense = dense_fraction * T`` on, the threshold index moves up by one at
  every multiple of ``(T - dense) // steps`` iterations (capped at the last threshold); when
  that step is 0 (fewer post-dense iterations than ``steps``) the threshold stays 0;
* after each optimizer step of an iteration ``> dense``, every gate is soft-thresholded
  (:func:`soft_threshold_gates_`).

Framework-free: torch only.
"""

from __future__ import annotations

import math

import torch

#: the largest threshold [runner_codyra.sh ``MAX_KAPPA=0.005``]
MAX_KAPPA = 0.005
#: the number of thresholds [main.py ``--lambda_num`` default 50]
KAPPA_STEPS = 50
#: the dense share of each task's iterations [runner_codyra.sh ``DENSE_ITERS=0.5``]
DENSE_FRACTION = 0.5


def check_schedule(max_kappa: float, steps: int, dense_fraction: float) -> None:
    if not max_kappa >= 0:
        raise ValueError(f"max_kappa must be >= 0, got {max_kappa}")
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"the number of threshold steps must be a positive int, got {steps!r}")
    if not 0 <= dense_fraction <= 1:
        raise ValueError(f"dense_fraction must be in [0, 1], got {dense_fraction}")


def kappa_at(iteration: int, total: int, max_kappa: float = MAX_KAPPA, steps: int = KAPPA_STEPS,
             dense_fraction: float = DENSE_FRACTION) -> float:
    """The threshold in force at ``iteration`` (0-based) of a task of ``total`` iterations.

    The official loop keeps a counter; this is its closed form: the counter is the number of
    iterations ``j <= iteration`` with ``j >= dense`` and ``j`` a multiple of the step.
    """
    check_schedule(max_kappa, steps, dense_fraction)
    dense = dense_fraction * total
    step = int((total - dense) // steps)
    if step <= 0 or iteration < dense:
        return 0.0
    first = math.ceil(dense)
    index = iteration // step - (first - 1) // step
    return float(torch.linspace(0, max_kappa, steps, dtype=torch.float64)[min(steps - 1, index)])


def prunes_at(iteration: int, total: int, dense_fraction: float = DENSE_FRACTION) -> bool:
    """Whether the gates are thresholded after the optimizer step of ``iteration`` (``> dense``)."""
    return iteration > dense_fraction * total


@torch.no_grad()
def soft_threshold_gates_(gate: torch.Tensor, kappa: float) -> torch.Tensor:
    """Soft-threshold ``gate`` in place by ``kappa``, in the official code's three steps.

    ``g > k: g -= k``; then ``g < -k: g += k``; then ``|g| < k: g = 0``. Applied in this order
    the last step also zeroes gates that the first two moved inside ``(-k, k)``, so every gate
    with ``|g| < 2k`` (save the boundary ``|g| = k``) becomes 0 and larger ones shrink by ``k``
    -- a harder shrinkage than the textbook ``sign(g) max(|g| - k, 0)``; we keep it, as CoDyRA
    trained with it. Returns ``gate``.
    """
    gate[gate > kappa] -= kappa
    gate[gate < -kappa] += kappa
    gate[gate.abs() < kappa] = 0.0
    return gate


__all__ = ["DENSE_FRACTION", "KAPPA_STEPS", "MAX_KAPPA", "check_schedule", "kappa_at", "prunes_at",
           "soft_threshold_gates_"]
