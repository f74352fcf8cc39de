"""MoRAMLinear: a frozen ``nn.Linear`` plus a growing bank of rank-1 memory atoms (the paper's layer).

Implements the layer of MoRAM ("Little by Little: Continual Learning via Incremental Mixture
of Rank-1 Associative Memory Experts", ICML 2026). For every token ``x`` and a bank of ``R``
atoms with keys ``A_i`` (rows, length ``d_in``) and values ``B_i`` (length ``d_out``):

1. projections  ``p_i = A_i . x``
2. relevance    ``s_i = p_i / max(||p||_2, 1e-12)``          (L2 over the whole bank)
3. sparsity     keep the ``k = min(max(topk, 2), R)`` largest ``s_i`` (signed)
4. sharpness    ``w = softmax(s_kept / temperature)``        (dropped atoms get weight 0)
5. eval gate    in eval mode only, ``w_i <- w_i * [s_i >= threshold]`` (no renormalisation)
6. output       ``y = W x + b + sum_i w_i p_i B_i``

:meth:`MoRAMLinear.forward` reads the input, the compute dtype (autocast's) and the gate, and
hands steps 1-6 to :meth:`MoRAMLinear.mixture`, which runs them on the path chosen for the
device in one place (:mod:`~moram_avalanche.layers.moram_paths`; ``use_path`` or
``MORAM_AVALANCHE_PATH`` force one): on the CPU the gathered routing of :func:`route` and a
sparse read-out (:mod:`~moram_avalanche.layers.moram_fused`, with the compiled kernels of
:mod:`~moram_avalanche.layers.routing_kernel` once ``routing_kernel.load()`` built them); on a
GPU dense coefficients and one GEMM read-out, without host synchronisation
(:mod:`~moram_avalanche.layers.moram_dense`), steps 2-5 fused by Triton
(:mod:`~moram_avalanche.layers.moram_triton`). Each path computes the steps without autograd
and attaches a hand-written backward (gradients for the current task's atoms only); nothing is
built inside a forward.

The bank -- frozen atoms in buffers, the current task's atoms as ``nn.Parameter`` objects, growth
by :meth:`~MoRAMLinear.expand`, pruning, activation statistics and the state dict (``atom_keys``,
``atom_values``, ``num_frozen``, ``atom_task``) -- is :class:`~moram_avalanche.layers.moram_bank.MoRAMBank`.

Three routing ablations of the paper only change numbers and keep this layer:
``topk=None`` keeps every atom (``k = R``), ``temperature=None`` means ``tau = 1``,
``threshold=0`` disables the gate. The two that need differentiable routing probabilities
(an external router, a load-balancing term) are
:class:`~moram_avalanche.layers.moram_variants.MoRAMAblationLinear`.
"""

from __future__ import annotations

from typing import Dict, Optional

import torch
from torch import nn

from ..utils.checks import check_number, check_positive_int
from .moram_bank import MoRAMBank
from .moram_fused import compute_dtype, route
from .moram_paths import mixture_for


def routing_options(atoms_per_task: int = 16, topk: Optional[int] = 16,
                    temperature: Optional[float] = 0.01, threshold: float = 0.2) -> Dict[str, object]:
    """The layer's options, checked and normalised (``temperature=None`` -> 1.0).

    What :attr:`MoRAMLinear.options` reports for a layer built with these arguments, so code
    that meets existing layers can compare them with what it would build.
    """
    check_positive_int("atoms_per_task", atoms_per_task)
    if topk is not None:
        check_positive_int("topk", topk)
    temperature = 1.0 if temperature is None else temperature
    check_number("temperature", temperature, low=0, low_open=True,
                 hint="paper: 0.01 for CLIP; None means 1")
    check_number("threshold", threshold, low=0, high=1,
                 hint="it gates a cosine-like relevance in [-1, 1]; paper: 0.2, 0 disables the gate")
    return {"atoms_per_task": int(atoms_per_task), "topk": None if topk is None else int(topk),
            "temperature": float(temperature), "threshold": float(threshold)}


class MoRAMLinear(MoRAMBank):
    """A frozen linear map augmented by a mixture of rank-1 associative-memory atoms.

    Args:
        base: the pre-trained ``nn.Linear``; it is frozen (``requires_grad=False``) and kept
            by composition as ``self.base``.
        atoms_per_task: atoms appended by each :meth:`expand` (paper's ``r``; CLIP: 16).
        topk: routing budget ``k`` (CLIP: 16). The official release uses ``max(topk, 2)``,
            and never more than the bank holds. ``None`` keeps every atom (ablation).
        temperature: softmax temperature ``tau`` over the kept relevances (CLIP: 0.01).
            ``None`` means ``tau = 1`` (ablation "no temperature").
        threshold: eval-only relevance gate ``delta`` (CLIP: 0.2); ``0`` disables it.
    """

    def __init__(self, base: nn.Linear, atoms_per_task: int = 16, topk: Optional[int] = 16,
                 temperature: Optional[float] = 0.01, threshold: float = 0.2) -> None:
        options = routing_options(atoms_per_task, topk, temperature, threshold)
        super().__init__(base, options["atoms_per_task"])
        self.topk = options["topk"]
        self.temperature = options["temperature"]
        self.threshold = options["threshold"]
        # a plain nn.Linear base is fused into the atoms' output buffer; a subclass with its own
        # forward (quantised layers, say) runs as is and its output is added
        self.fuse_base = type(base).forward is nn.Linear.forward

    @property
    def options(self) -> Dict[str, object]:
        """How the layer was built, as :func:`routing_options` normalises it."""
        return {"atoms_per_task": self.atoms_per_task, "topk": self.topk,
                "temperature": self.temperature, "threshold": self.threshold}

    @property
    def effective_topk(self) -> int:
        """``k`` actually used: ``min(max(topk, 2), num_atoms)`` (official release).

        Every atom (``num_atoms``) when ``topk`` is None.
        """
        if self.topk is None:
            return self.num_atoms
        return min(max(self.topk, 2), self.num_atoms)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``y = W x + b + sum_i w_i p_i B_i`` for every token of ``x`` ``[..., in_features]`` (steps 1-6)."""
        base = self.base
        if not x.is_floating_point() or x.dim() == 0 or x.shape[-1] != base.in_features:
            self.check_input(x)  # the clear error
        num_atoms = self.num_atoms
        if num_atoms == 0:
            return base(x)
        dtype = compute_dtype(x)
        tokens = x.reshape(-1, base.in_features).to(dtype)
        weight = bias = None
        if self.fuse_base:
            weight = base.weight.to(dtype)
            bias = None if base.bias is None else base.bias.to(dtype)
        gate = self.threshold if (not self.training and self.threshold > 0) else None  # step 5 at inference
        k = num_atoms if self.topk is None else min(max(self.topk, 2), num_atoms)      # effective_topk
        out, idx, weights = self.mixture(tokens, weight, bias, k, gate)
        if self.recording:
            self.record(idx, weights)
        out = out.reshape(*x.shape[:-1], base.out_features)
        if not self.fuse_base:
            base_out = base(x)
            out = base_out + out.to(base_out.dtype)
        return out

    def check_input(self, x: torch.Tensor) -> None:
        """A floating-point ``[..., in_features]`` input, or a clear error."""
        if not x.is_floating_point():
            raise TypeError(f"{type(self).__name__} expects a floating-point input (like the nn.Linear it "
                            f"wraps), got {x.dtype}: convert it first, e.g. x.float()")
        if x.dim() == 0 or x.shape[-1] != self.in_features:
            raise ValueError(f"{type(self).__name__} takes inputs [..., in_features={self.in_features}], "
                             f"got {tuple(x.shape)}")

    def mixture(self, tokens: torch.Tensor, weight: Optional[torch.Tensor], bias: Optional[torch.Tensor],
                k: int, threshold: Optional[float]):
        """Steps 1-6 on ``tokens`` ``[N, d_in]``: ``(y [N, d_out], idx, weights)``.

        ``weight`` / ``bias`` are the base's (None: ``y`` is the atoms' term alone);
        ``threshold`` is the eval gate ``delta`` or None. The path that runs the steps is chosen
        per device (:func:`~moram_avalanche.layers.moram_paths.mixture_for`: the CPU's sparse
        paths, the GPU's dense ones; each computes steps 1-6 without autograd and attaches a
        hand-written backward: gradients for the trainable atoms, the tokens, and ``W``, ``b``
        where they require it). ``idx`` ``[N, k]`` and ``weights`` ``[N, k]`` are the kept atoms and
        their weights, or ``idx`` None and ``weights`` dense ``[N, R]`` (what :meth:`record` reads).
        """
        bank = self.rows(tokens.dtype)                        # A, B joined in the compute dtype
        mixture = mixture_for(tokens, bank.keys.shape[0], k, gated=threshold is not None)
        return mixture(tokens, weight, bias, bank, k, self.temperature, threshold, self.recording)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"atoms={self.num_frozen}/{self.num_atoms} (frozen/total), topk={self.topk}, "
            f"temperature={self.temperature}, threshold={self.threshold}"
        )


__all__ = ["MoRAMLinear", "route", "routing_options"]  # route: steps 2-5 in PyTorch (moram_fused)
