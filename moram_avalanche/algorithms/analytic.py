"""RAIL's analytic regression heads on frozen features, and its fusion with zero-shot CLIP.

RAIL (Xu et al., NeurIPS 2024, "Advancing Cross-domain Discriminability in Continual Learning
of Vision-Language Models"), as its official code does it
[linghan1997/Regression-based-Analytic-Incremental-Learning ``primal_RAIL.py``,
``dual_RAIL.py``, ``utils.py``, ``configs/analytic_clip.yaml``; commit eaac644]:

* :class:`RandomFeatures` -- the primal form's feature expansion: a fixed random linear map
  ``512 -> 15000`` without bias, then ReLU (``expansion_layer``: ``nn.Linear``'s default
  initialisation, never trained).
* :class:`RecursiveRidge` -- the primal form: ridge regression of one-hot labels on the
  (expanded) features, ``W = (X^T X + lambda I)^-1 X^T Y`` over every sample seen so far, kept
  exactly by the recursive (Woodbury) update of the inverse autocorrelation ``R`` one batch at
  a time; new classes append zero columns to ``W`` (``lambda`` = ``regularization`` 0.1).
* :class:`KernelRidge` -- the dual form: kernel ridge regression over a memory of every
  training feature, ``alpha = (K + lambda I)^-1 Y`` re-solved after each task, prediction
  ``k(x, X) alpha``; Gaussian kernel ``exp(-gamma ||x - x'||^2)`` with ``gamma`` 0.1 and
  ``lambda`` 0.001 (``kernel_ridge_regression(lamda=0.001, gamma=cfg.gamma)``). A linear
  kernel is available (the primal form without expansion in dual coordinates).
* :func:`fuse_with_zero_shot` -- the inference rule: zero-shot softmax over every class of
  the label space; where its argmax is a class the head has learned, the output is
  ``(1 - beta) p_zs + beta * head`` (head scores zero outside its classes), else ``p_zs``
  (``fusion_weight`` 0.8 in the current config; 0.9 in the first commit a0ecaef).

Framework-free: torch only.
"""

from __future__ import annotations

import math
from typing import Dict, Optional

import torch
from torch import nn

#: RAIL's ridge regularisation of the primal form [configs/analytic_clip.yaml ``regularization``]
PRIMAL_REGULARIZATION = 0.1
#: RAIL's ridge regularisation of the dual form [dual_RAIL.py ``kernel_ridge_regression(lamda=0.001)``]
DUAL_REGULARIZATION = 1e-3
#: the Gaussian kernel's width [configs/analytic_clip.yaml ``gamma``]
RBF_GAMMA = 0.1
#: the primal form's expansion size [configs/analytic_clip.yaml ``hidden_dim``]
HIDDEN_DIM = 15000
#: the weight of the head in the fusion [configs/analytic_clip.yaml ``fusion_weight``, commit c76eb37]
FUSION_WEIGHT = 0.8
#: the kernels of :class:`KernelRidge`
KERNELS = ("rbf", "linear")


class RandomFeatures(nn.Module):
    """``relu(x @ P^T)`` with a fixed random ``P`` ``[hidden_dim, in_dim]`` (RAIL's ``expansion_layer``).

    ``P`` is drawn as ``nn.Linear`` draws its weight (Kaiming-uniform with ``a = sqrt(5)``, i.e.
    uniform in ``+-1/sqrt(in_dim)``), from ``generator`` (None: torch's global RNG, as the
    original, which seeds it with 42 before building the layer). It is a buffer: never trained,
    saved with the head.
    """

    def __init__(self, in_dim: int, hidden_dim: int = HIDDEN_DIM,
                 generator: Optional[torch.Generator] = None) -> None:
        super().__init__()
        for name, value in (("in_dim", in_dim), ("hidden_dim", hidden_dim)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        bound = 1.0 / math.sqrt(in_dim)
        weight = torch.empty(hidden_dim, in_dim).uniform_(-bound, bound, generator=generator)
        self.register_buffer("weight", weight)

    @property
    def out_features(self) -> int:
        return self.weight.shape[0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x @ self.weight.to(x.dtype).t())


def _check_pair(x: torch.Tensor, y: torch.Tensor, dim: int, classes: int) -> None:
    if x.dim() != 2 or x.shape[1] != dim:
        raise ValueError(f"features must be [batch, {dim}], got {tuple(x.shape)}")
    if y.shape != (x.shape[0], classes):
        raise ValueError(f"targets must be [batch, classes] = {(x.shape[0], classes)}, got "
                         f"{tuple(y.shape)}; call add_classes(n) when a task brings new classes")


class RecursiveRidge:
    """Ridge regression kept exactly, batch after batch (RAIL's primal form).

    State: ``inverse`` ``R = (sum X^T X + lambda I)^-1`` ``[dim, dim]`` and ``weight``
    ``W = R sum X^T Y`` ``[dim, classes]``. One batch ``(X, Y)`` updates them by the Woodbury
    identity, as ``primal_RAIL.py`` does for every task after the first:
    ``K = I + X R X^T``, ``G = R X^T K^-1`` (the gain; equal to the updated ``R X^T``),
    ``R <- R - G X R``, ``W <- W + G (Y - X W)``. Starting from ``R = I / lambda`` and ``W = 0``,
    the first task is the same recursion (the original inverts its autocorrelation once;
    identical in exact arithmetic, cheaper when a task has fewer samples than ``dim``).
    The result equals the batch ridge solution on all data seen, whatever the batching.

    Args:
        dim: feature size. regularization: ``lambda`` (RAIL: 0.1).
        dtype: of the state (the original keeps float32 on the GPU). device: of the state.
    """

    def __init__(self, dim: int, regularization: float = PRIMAL_REGULARIZATION,
                 dtype: torch.dtype = torch.float32, device=None) -> None:
        if not isinstance(dim, int) or dim < 1:
            raise ValueError(f"dim must be a positive int, got {dim!r}")
        if not regularization > 0:
            raise ValueError(f"regularization must be > 0 (the ridge term keeps X^T X + lambda I "
                             f"invertible), got {regularization}")
        self.dim = dim
        self.regularization = float(regularization)
        self.inverse = torch.eye(dim, dtype=dtype, device=device) / self.regularization
        self.weight = torch.zeros(dim, 0, dtype=dtype, device=device)

    @property
    def classes(self) -> int:
        return self.weight.shape[1]

    def add_classes(self, count: int) -> None:
        """Append ``count`` zero columns to ``W`` (a task's new classes)."""
        if count < 0:
            raise ValueError(f"count must be >= 0, got {count}")
        self.weight = torch.cat([self.weight, self.weight.new_zeros(self.dim, count)], dim=1)

    @torch.no_grad()
    def update(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """Take the batch ``x`` ``[b, dim]`` with targets ``y`` ``[b, classes]`` into ``R`` and ``W``."""
        _check_pair(x, y, self.dim, self.classes)
        x = x.to(self.inverse)
        y = y.to(self.inverse)
        rx = self.inverse @ x.t()                                  # R X^T   [dim, b]
        k = torch.eye(x.shape[0], dtype=x.dtype, device=x.device) + x @ rx
        gain = torch.linalg.solve(k, rx.t()).t()                   # R X^T K^-1 (K symmetric)
        self.inverse = self.inverse - gain @ rx.t()
        self.weight = self.weight + gain @ (y - x @ self.weight)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return x.to(self.weight) @ self.weight

    def state_dict(self) -> Dict[str, torch.Tensor]:
        return {"inverse": self.inverse, "weight": self.weight}

    def load_state_dict(self, state: Dict[str, torch.Tensor]) -> None:
        inverse, weight = state["inverse"], state["weight"]
        if tuple(inverse.shape) != (self.dim, self.dim) or weight.dim() != 2 or weight.shape[0] != self.dim:
            raise ValueError(f"the ridge state is for dim {tuple(inverse.shape)}, this head has dim "
                             f"{self.dim}: build it with the hidden size of the run that saved it")
        self.inverse = inverse.to(self.inverse)
        self.weight = weight.to(self.inverse)


def kernel_matrix(x: torch.Tensor, memory: torch.Tensor, kernel: str = "rbf",
                  gamma: float = RBF_GAMMA) -> torch.Tensor:
    """``k(x_i, m_j)`` ``[len(x), len(memory)]``: ``exp(-gamma ||x - m||^2)`` ("rbf") or ``x . m``."""
    if kernel == "linear":
        return x @ memory.t()
    if kernel == "rbf":
        return torch.exp(-gamma * torch.cdist(x, memory).square())
    raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")


class KernelRidge:
    """Kernel ridge regression over a memory of every training feature (RAIL's dual form).

    :meth:`add` appends a task's features and one-hot targets to the memory (old targets get
    zero columns for new classes); :meth:`fit` solves ``alpha = (K + lambda I)^-1 Y`` by a
    Cholesky factorisation of the SPD matrix (the original inverts it in float64 numpy);
    :meth:`predict` is ``k(x, memory) alpha``. The memory grows with every sample (16 shots x
    1100 classes = 17,600 on X-TAIL: a 17,600^2 kernel matrix at the last task).

    Args:
        kernel: "rbf" (RAIL) or "linear". gamma: the RBF width (0.1). regularization:
            ``lambda`` (0.001). dtype: of the solve (float64, as the original's numpy inverse).
    """

    def __init__(self, kernel: str = "rbf", gamma: float = RBF_GAMMA,
                 regularization: float = DUAL_REGULARIZATION, dtype: torch.dtype = torch.float64) -> None:
        if kernel not in KERNELS:
            raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
        if not regularization > 0:
            raise ValueError(f"regularization must be > 0, got {regularization}")
        if not gamma > 0:
            raise ValueError(f"gamma must be > 0, got {gamma}")
        self.kernel, self.gamma, self.regularization, self.dtype = kernel, float(gamma), float(regularization), dtype
        self.features: Optional[torch.Tensor] = None
        self.targets: Optional[torch.Tensor] = None
        self.alpha: Optional[torch.Tensor] = None

    @property
    def size(self) -> int:
        return 0 if self.features is None else self.features.shape[0]

    @torch.no_grad()
    def add(self, x: torch.Tensor, y: torch.Tensor) -> None:
        """Append ``x`` ``[n, d]`` with targets ``y`` ``[n, classes]`` (``classes`` >= the memory's)."""
        x, y = x.to(self.dtype), y.to(self.dtype)
        if self.features is None:
            self.features, self.targets = x.clone(), y.clone()
            return
        if x.shape[1] != self.features.shape[1] or y.shape[1] < self.targets.shape[1] or len(x) != len(y):
            raise ValueError(f"features [n, {self.features.shape[1]}] with targets [n, >= "
                             f"{self.targets.shape[1]}] expected, got {tuple(x.shape)} and {tuple(y.shape)}")
        old = torch.nn.functional.pad(self.targets.to(y.device), (0, y.shape[1] - self.targets.shape[1]))
        self.features = torch.cat([self.features, x.to(self.features.device)])
        self.targets = torch.cat([old, y])

    @torch.no_grad()
    def fit(self) -> torch.Tensor:
        """Solve ``alpha = (K + lambda I)^-1 Y`` on the whole memory; returns alpha."""
        if self.features is None:
            raise RuntimeError("KernelRidge.fit needs data: call add(x, y) first")
        gram = kernel_matrix(self.features, self.features, self.kernel, self.gamma)
        gram.diagonal().add_(self.regularization)
        self.alpha = torch.cholesky_solve(self.targets, torch.linalg.cholesky(gram))
        return self.alpha

    @torch.no_grad()
    def predict(self, x: torch.Tensor) -> torch.Tensor:
        if self.alpha is None:
            raise RuntimeError("KernelRidge.predict before fit: train on at least one task")
        x = x.to(self.dtype)
        return kernel_matrix(x, self.features.to(x.device), self.kernel, self.gamma) @ self.alpha.to(x.device)

    def state_dict(self) -> Dict[str, torch.Tensor]:
        if self.features is None:
            return {}
        return {"features": self.features, "targets": self.targets, "alpha": self.alpha}

    def load_state_dict(self, state: Dict[str, torch.Tensor]) -> None:
        if not state:
            self.features = self.targets = self.alpha = None
            return
        self.features = state["features"].to(self.dtype)
        self.targets = state["targets"].to(self.dtype)
        self.alpha = state["alpha"].to(self.dtype)


def fuse_with_zero_shot(zero_shot_logits: torch.Tensor, head_scores: torch.Tensor,
                        head_columns: torch.Tensor, weight: float = FUSION_WEIGHT) -> torch.Tensor:
    """RAIL's inference: zero-shot probabilities, fused with the head where CLIP picks a learned class.

    Args:
        zero_shot_logits: ``[batch, C]`` zero-shot logits over the label space.
        head_scores: ``[batch, H]`` the head's regression outputs over its ``H`` learned classes.
        head_columns: ``[C]`` long: for each label-space class, its column in ``head_scores``,
            or -1 when the head has not learned it.
        weight: ``beta``, the head's share of the fusion.

    Returns ``[batch, C]``: ``p = softmax(zero_shot_logits)``; rows whose ``argmax p`` is a
    learned class become ``(1 - beta) p + beta s`` with ``s`` the head's scores in their
    label-space columns and 0 elsewhere; the other rows stay ``p``
    [``primal_RAIL.py``: ``mask = predict_cls < cfg.current_class_num``].
    """
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"the fusion weight must be in [0, 1], got {weight}")
    if head_columns.shape != zero_shot_logits.shape[1:]:
        raise ValueError(f"head_columns must have one entry per class ({zero_shot_logits.shape[1]}), "
                         f"got {tuple(head_columns.shape)}")
    probabilities = torch.softmax(zero_shot_logits.float(), dim=-1)
    learned = head_columns >= 0
    if not bool(learned.any()):
        return probabilities
    scores = probabilities.new_zeros(probabilities.shape)
    scores[:, learned] = head_scores.to(scores)[:, head_columns[learned]]
    fuse = learned[probabilities.argmax(dim=-1)]
    fused = (1.0 - weight) * probabilities + weight * scores
    return torch.where(fuse[:, None], fused, probabilities)


__all__ = ["DUAL_REGULARIZATION", "FUSION_WEIGHT", "HIDDEN_DIM", "KERNELS", "PRIMAL_REGULARIZATION",
           "RBF_GAMMA", "KernelRidge", "RandomFeatures", "RecursiveRidge", "fuse_with_zero_shot",
           "kernel_matrix"]
