"""DualGPM: the memory of one layer's old input space, as InfLoRA keeps it (pure torch).

InfLoRA (Liang & Li, CVPR 2024) designs each task's frozen LoRA down-projection inside the
part of the input space that earlier tasks did not use, and remembers that part with the
DualGPM memory of Liang & Li's earlier work, fed the layer's input covariance
``C = mean over tokens of x x^T`` instead of raw representations (baselines reference,
section 3.3; facts from liangyanshuo/InfLoRA ``methods/inflora.py``, ``update_DualGPM``, the
class-incremental method of the paper's CIFAR-100 and ImageNet-R results).

The memory holds an orthonormal basis ``M`` ``[d, k]`` of one of two kinds:

* **remove**: ``M`` spans the old input space (the directions to keep the new update away
  from); the covariance seen by a new task is ``(I - M M^T) C``;
* **retain**: ``M`` (written ``P``) spans the *free* space, its orthogonal complement; the
  covariance seen by a new task is ``P P^T C``. A remove memory with more than ``d / 2``
  columns is replaced by its complement (the shorter basis of the two).

``DualGPM(dim, dual=False)`` is plain GPM: remove-type only, never switched, as the official
domain-incremental variant ``methods/inflora_domain.py`` keeps it (``update_GPM``; the
variant of its DomainNet config). This package follows the class-incremental ``inflora.py``
by default, since X-TAIL and MTIL add new classes with every domain. The two protect the
same space in exact arithmetic: ``P P^T C = (I - M M^T) C`` when ``P`` spans the complement
of ``M``, and the retain update removes from ``P`` exactly the directions the remove update
would append to ``M`` (it stops at ``acc < 1 - eps``, the remove update at ``1 - acc >=
eps``), except when the free energy equals ``1 - eps`` exactly. DualGPM stores the shorter
of the two bases.

Energies are squared singular values of ``C`` over their sum ``E = sum sigma_i^2(C)``; the
threshold of task ``t`` of ``T`` is :func:`threshold`.

**First task, and the original's quirk.** The original keeps ``k = #{i : cumsum(sigma^2)/E <
eps}`` (at least 1) leading directions; when ``k >= d / 2`` it stores that same top-k basis but
labels it "retain" (as if it spanned the free space), and its own "retain has at most d / 2
columns" assertion then fails whenever ``k > d / 2``; LibContinual's InfLoRA_OPT simply
asserts ``k < d / 2``. Here the first task always gives a remove-type memory of the top-k
directions, and the same ``> d / 2`` switch that follows every later update turns it into
the retain-type complement: what the original means, without the mislabelled basis. (At
exactly ``k = d / 2`` it stays remove-type with ``d / 2`` columns.)

**Guards the original lacks** (they change nothing in exact arithmetic): a remove update
appends at most as many directions as the residual has numerically non-zero singular values
(beyond them the SVD returns arbitrary null-space vectors, possibly inside ``M``), and a
retain update removes at most the ``k`` directions ``P P^T C`` can have. Likewise
:func:`design_down_projection` takes rows beyond the numerical rank of the projected
covariance from the free space (:meth:`DualGPM.free_basis`), where the original's SVD
returns arbitrary null-space vectors that may lie in the old space.
"""

from __future__ import annotations

import math
from typing import Dict, Optional

import torch

#: threshold schedule of InfLoRA's configs: lambda_b 0.95 (CIFAR-100, DomainNet; 0.98 for
#: ImageNet-R), lambda_e 1.0 [InfLoRA configs/*.json "lamb", "lame"]
LAMBDA_B = 0.95
#: InfLoRA's lambda_e, the threshold at the end of the schedule (see :data:`LAMBDA_B`)
LAMBDA_E = 1.0


def threshold(task: int, num_tasks: int, lambda_b: float = LAMBDA_B, lambda_e: float = LAMBDA_E) -> float:
    """``eps_t = lambda_b + (lambda_e - lambda_b) * t / T`` for the 0-based task ``t`` of ``T``."""
    if num_tasks < 1:
        raise ValueError(f"num_tasks must be >= 1, got {num_tasks}")
    if not 0 <= task < num_tasks:
        raise ValueError(
            f"task index {task} is outside 0..{num_tasks - 1}: the stream has more experiences than "
            f"num_tasks={num_tasks}; pass num_tasks >= the number of experiences"
        )
    if not 0 < lambda_b <= lambda_e <= 1:
        raise ValueError(f"need 0 < lambda_b <= lambda_e <= 1, got {lambda_b}, {lambda_e}")
    return lambda_b + (lambda_e - lambda_b) * task / num_tasks


def design_down_projection(covariance: torch.Tensor, rank: int,
                           free: Optional[torch.Tensor] = None) -> torch.Tensor:
    """InfLoRA's frozen factor: the top-``rank`` left singular vectors of ``covariance``, as rows, / sqrt(3).

    ``covariance`` is the (projected) input covariance ``[d, d]``; returns ``[rank, d]`` in its
    dtype [InfLoRA methods/inflora.py: ``U[:, :rank].T / math.sqrt(3)``].

    Only the ``n`` singular vectors of numerically non-zero singular values (``> sigma_max * d
    * eps`` of the dtype) are defined by ``covariance``; when ``n < rank`` the other rows
    (our guard; the original keeps whatever its SVD returns) are orthonormal directions of
    ``span(free)`` (``[d, f]`` orthonormal columns, e.g. :meth:`DualGPM.free_basis`; None: the
    whole space) orthogonal to the first ``n``, so they stay out of the old input space. Only
    if ``free`` has fewer than ``rank`` columns do the last rows come from outside it.
    """
    _check_square(covariance)
    d = covariance.shape[0]
    if not 1 <= rank <= d:
        raise ValueError(f"rank must be in 1..{d} (the layer's input size), got {rank}")
    u, s, _ = torch.linalg.svd(covariance.double(), full_matrices=False)
    tolerance = float(s.max()) * d * torch.finfo(covariance.dtype).eps
    defined = min(rank, int((s > tolerance).sum()))
    rows = u[:, :defined]
    if defined < rank:
        whole = torch.eye(d, dtype=torch.float64, device=u.device)
        candidates = whole if free is None else free.to(device=u.device, dtype=torch.float64)
        rows = torch.cat([rows, _orthogonal_directions(rows, candidates, rank - defined)], dim=1)
        if rows.shape[1] < rank:  # the free space is too small: the rest from anywhere
            rows = torch.cat([rows, _orthogonal_directions(rows, whole, rank - rows.shape[1])], dim=1)
    return (rows.t() / math.sqrt(3)).to(covariance.dtype)


def _orthogonal_directions(rows: torch.Tensor, candidates: torch.Tensor, count: int) -> torch.Tensor:
    """Up to ``count`` orthonormal directions of ``span(candidates)`` orthogonal to ``rows``' columns.

    ``candidates`` has orthonormal columns, so ``candidates - rows rows^T candidates`` has
    singular values 1 (directions left) and 0 (directions taken by ``rows``).
    """
    rest = candidates - rows @ (rows.t() @ candidates)
    u, s, _ = torch.linalg.svd(rest, full_matrices=False)
    available = int((s > 0.5).sum())
    return u[:, :min(count, available)]


class DualGPM:
    """The DualGPM memory of one layer of input dimension ``dim``.

    Empty until the first :meth:`update`; :meth:`project_away` then returns ``C`` unchanged.
    ``dual=False``: plain GPM, remove-type only (module docstring).

    Attributes:
        basis: ``[dim, k]`` orthonormal columns (float64), the old input space (remove) or the
            free space (retain).
        retain: the memory's kind.
        updates: how many tasks have updated it.
    """

    def __init__(self, dim: int, dual: bool = True) -> None:
        if dim < 1:
            raise ValueError(f"dim must be >= 1, got {dim}")
        self.dim = dim
        self.dual = bool(dual)
        self.basis = torch.zeros(dim, 0, dtype=torch.float64)
        self.retain = False
        self.updates = 0

    @property
    def kind(self) -> str:
        return "retain" if self.retain else "remove"

    @property
    def old_space_dim(self) -> int:
        """Dimension of the protected (old) input space."""
        k = self.basis.shape[1]
        return self.dim - k if self.retain else k

    @property
    def free_dim(self) -> int:
        """Dimension of the free space (the complement of the old input space)."""
        return self.dim - self.old_space_dim

    def free_basis(self) -> Optional[torch.Tensor]:
        """Orthonormal columns ``[dim, free_dim]`` (float64) spanning the free space; None while empty."""
        if self.updates == 0:
            return None
        if self.retain:
            return self.basis.clone()
        return _complement(self.basis)

    def project_away(self, covariance: torch.Tensor) -> torch.Tensor:
        """``C`` with its old-input-space part removed: ``(I - M M^T) C`` or ``P P^T C``."""
        _check_square(covariance, self.dim)
        if self.updates == 0:
            return covariance
        m = self.basis.to(device=covariance.device, dtype=torch.float64)
        c = covariance.double()
        inside = m @ (m.t() @ c)
        return (inside if self.retain else c - inside).to(covariance.dtype)

    @torch.no_grad()
    def update(self, covariance: torch.Tensor, eps: float) -> int:
        """Take task ``t``'s post-training covariance into the memory, with threshold ``eps``.

        Returns the change of :attr:`old_space_dim` (directions added to the old space).
        """
        _check_square(covariance, self.dim)
        if not 0 < eps <= 1:
            raise ValueError(f"eps must be in (0, 1], got {eps}")
        c = covariance.detach().double().cpu()
        before = self.old_space_dim
        u, s, _ = torch.linalg.svd(c, full_matrices=False)
        energy = (s ** 2).sum()
        if not energy > 0:
            raise ValueError("the covariance is zero (no input reached the layer?)")
        if self.updates == 0:
            k = int((torch.cumsum(s ** 2, 0) / energy < eps).sum())
            self.basis, self.retain = u[:, :max(k, 1)].clone(), False
        elif self.retain:
            self._update_retain(c, energy, eps)
        else:
            self._update_remove(c, energy, eps)
        self.updates += 1
        if self.dual and not self.retain and self.basis.shape[1] > self.dim / 2:
            self.basis, self.retain = _complement(self.basis), True
        return self.old_space_dim - before

    def _update_remove(self, c, energy, eps) -> None:
        m = self.basis
        u, s, _ = torch.linalg.svd(c - m @ (m.t() @ c), full_matrices=False)
        ratios = s ** 2 / energy
        acc = float((energy - (s ** 2).sum()) / energy)
        nonzero = int((s > s.max() * self.dim * torch.finfo(s.dtype).eps).sum()) if s.numel() else 0
        r = 0
        while r < nonzero and acc < eps:
            acc += float(ratios[r])
            r += 1
        if r:
            self.basis = torch.cat([m, u[:, :r]], dim=1)[:, :self.dim].clone()

    def _update_retain(self, c, energy, eps) -> None:
        p = self.basis
        k = p.shape[1]
        u, s, _ = torch.linalg.svd(p @ (p.t() @ c), full_matrices=False)
        ratios = s ** 2 / energy
        acc = float((s ** 2).sum() / energy)
        r = 0
        while r < k and acc >= 1 - eps:
            acc -= float(ratios[r])
            r += 1
        if r:
            ur = u[:, :r]
            left, _, _ = torch.linalg.svd(p - ur @ (ur.t() @ p), full_matrices=False)
            self.basis = left[:, :k - r].clone()

    def state_dict(self) -> Dict[str, torch.Tensor]:
        return {"basis": self.basis.clone(), "retain": torch.tensor(self.retain),
                "updates": torch.tensor(self.updates)}

    def load_state_dict(self, state: Dict[str, torch.Tensor]) -> None:
        basis = state["basis"]
        if basis.dim() != 2 or basis.shape[0] != self.dim:
            raise ValueError(f"a DualGPM basis of dimension {self.dim} expected, got shape {tuple(basis.shape)}")
        retain = bool(state["retain"])
        if retain and not self.dual:
            raise ValueError("a retain-type (DualGPM) memory cannot load into a plain-GPM memory "
                             "(dual=False): use the memory kind the checkpoint was made with")
        self.basis = basis.detach().to(torch.float64).cpu().clone()
        self.retain = retain
        self.updates = int(state["updates"])

    def __repr__(self) -> str:
        return (f"DualGPM(dim={self.dim}, dual={self.dual}, kind={self.kind}, "
                f"columns={self.basis.shape[1]}, updates={self.updates})")


def _complement(basis: torch.Tensor) -> torch.Tensor:
    """An orthonormal basis of the orthogonal complement of ``basis``'s columns (trailing singular vectors)."""
    u, _, _ = torch.linalg.svd(basis, full_matrices=True)
    return u[:, basis.shape[1]:].clone()


def _check_square(matrix: torch.Tensor, dim: int | None = None) -> None:
    if matrix.dim() != 2 or matrix.shape[0] != matrix.shape[1] or (dim is not None and matrix.shape[0] != dim):
        want = f"[{dim}, {dim}]" if dim is not None else "square"
        raise ValueError(f"expected a {want} covariance matrix, got shape {tuple(matrix.shape)}")


__all__ = ["LAMBDA_B", "LAMBDA_E", "DualGPM", "design_down_projection", "threshold"]
