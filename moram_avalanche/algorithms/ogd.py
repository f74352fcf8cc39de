"""OGD's math without a model: the projections, the basis's Gram-Schmidt and its size.

Orthogonal Gradient Descent (Farajtabar et al., 2020) keeps an orthonormal basis ``u_1 .. u_k``
of gradient directions of the tasks already learned and trains each new task with the part of
its gradient orthogonal to them. The basis is a ``[k, n]`` float32 tensor, one direction per
row, over the ``n`` numbers of the trained parameters flattened in ``named_parameters`` order.

Two projections of a gradient ``g`` (flattened the same way):

* :func:`project_out` -- the paper's (Eq. 5): ``g - sum_i <g, u_i> u_i = g - B^T B g``, the part
  of ``g`` orthogonal to every ``u_i``;
* :func:`project_each` -- TRACE's (BeyonderXX/TRACE ``model/Regular/OGD.py`` ``project_vec``,
  a hook on each LoRA parameter): each parameter's slice ``g_p`` minus ``B_p^T B_p g_p``, with
  ``B_p`` the basis's columns of that parameter. The rows of ``B_p`` are not orthonormal (only
  the whole rows are), so this is not a projection: it leaves ``g`` with components along the
  basis, and applied twice it changes ``g`` again.

:func:`add_direction` / :func:`extend_basis` grow the basis by Gram-Schmidt (TRACE
``orthonormalize``): each new vector minus its projection on the rows before it, then normalised;
here orthogonalised twice ("twice is enough": float32 loses orthogonality after one pass on long
bases), and a vector whose remainder is below :data:`SPAN_TOLERANCE` of its norm (already in the
span) is not added. TRACE's ``orthonormalize`` divides such a remainder by its own norm (0 / 0 in
exact arithmetic, rounding noise in bfloat16): a unit vector of noise, not a direction of any
task's gradient.

Pure torch: no Avalanche, no model.
"""

from __future__ import annotations

from typing import List, Optional, Sequence

import torch

#: a new vector whose remainder after projection is below this share of its norm is in the span
SPAN_TOLERANCE = 1e-6


def project_out(g: torch.Tensor, basis: Optional[torch.Tensor]) -> torch.Tensor:
    """``g - B^T (B g)`` for the rows of ``basis`` (``g`` if there are none): for orthonormal rows
    ``u_i``, ``g - sum_i <g, u_i> u_i`` (OGD, Eq. 5)."""
    if basis is None or basis.shape[0] == 0:
        return g
    return g - basis.t().mv(basis.mv(g))


def project_each(g: torch.Tensor, basis: Optional[torch.Tensor], sizes: Sequence[int]) -> torch.Tensor:
    """TRACE's projection (module docstring): each slice of ``g`` of the parameter sizes ``sizes``
    (in order) minus ``B_p^T (B_p g_p)``, ``B_p`` the same columns of ``basis``."""
    if sum(sizes) != g.shape[-1]:
        raise ValueError(f"the parameter sizes add up to {sum(sizes)}, the gradient has {g.shape[-1]} numbers")
    if basis is None or basis.shape[0] == 0:
        return g
    parts, offset = [], 0
    for size in sizes:
        parts.append(project_out(g[offset:offset + size], basis[:, offset:offset + size]))
        offset += size
    return torch.cat(parts)


def add_direction(store: torch.Tensor, count: int, vector: torch.Tensor) -> int:
    """Gram-Schmidt in place: ``vector`` orthogonalised twice against the orthonormal rows
    ``store[:count]``, normalised and written to ``store[count]``; the new count (unchanged when
    the vector is zero or already in their span)."""
    norm = float(vector.norm())
    if norm == 0.0:
        return count
    rows = store[:count]
    rest = project_out(project_out(vector, rows), rows)
    left = float(rest.norm())
    if left <= SPAN_TOLERANCE * norm:
        return count
    if count == store.shape[0]:
        raise ValueError(f"OGD's basis holds {count} directions, all it was sized for: the stream has more "
                         "tasks than it had when its first task started")
    store[count] = rest / left
    return count + 1


def extend_basis(basis: Optional[torch.Tensor], vectors: List[torch.Tensor]) -> torch.Tensor:
    """``basis`` (orthonormal rows) with ``vectors`` added by Gram-Schmidt (:func:`add_direction`),
    as a new tensor; a vector already in their span is left out."""
    if basis is None and not vectors:
        raise ValueError("extend_basis: no basis and no vectors to start one from")
    old = 0 if basis is None else basis.shape[0]
    width = (basis if basis is not None else vectors[0]).shape[-1]
    store = torch.empty(old + len(vectors), width, dtype=torch.float32,
                        device=(basis if basis is not None else vectors[0]).device)
    if old:
        store[:old] = basis
    count = old
    for vector in vectors:
        count = add_direction(store, count, vector)
    return store[:count].clone()


def basis_bytes(num_params: int, vectors: int) -> int:
    """Bytes of a float32 basis of ``vectors`` directions over ``num_params`` parameters, plus the
    flattened gradient being projected, its projection and their difference (three more vectors)."""
    return (vectors + 3) * num_params * 4


__all__ = ["SPAN_TOLERANCE", "add_direction", "basis_bytes", "extend_basis", "project_each", "project_out"]
