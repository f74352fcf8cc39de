"""MoRAMLinear: a frozen ``nn.Linear`` plus a growing bank of rank-1 memory atoms.

Implements the layer of MoRAM ("Little by Little: Continual Learning via Incremental Mixture
of Rank-1 Associative Memory Experts", ICML 2026). For every token ``x`` and a bank of ``R``
atoms with keys ``A_i`` (rows, length ``d_in``) and values ``B_i`` (length ``d_out``):

1. projections  ``p_i = A_i . x``
2. relevance    ``s_i = p_i / max(||p||_2, 1e-12)``          (L2 over the whole bank)
3. sparsity     keep the ``k = min(max(topk, 2), R)`` largest ``s_i`` (signed)
4. sharpness    ``w = softmax(s_kept / temperature)``        (dropped atoms get weight 0)
5. eval gate    in eval mode only, ``w_i <- w_i * [s_i >= threshold]`` (no renormalisation)
6. output       ``y = W x + b + sum_i w_i p_i B_i``

Each task calls :meth:`MoRAMLinear.expand`: all existing atoms freeze and ``atoms_per_task``
new trainable atoms are appended (keys Kaiming-uniform with ``a = sqrt(5)`` as in
``nn.Linear``; values zero, so the layer output is unchanged at the start of a task).

Storage: every atom lives in one contiguous bank (``_key_bank`` ``[R, d_in]``,
``_value_bank`` ``[R, d_out]``). The trainable atoms are ``nn.Parameter`` objects that alias
the bank's last rows, so no forward pass concatenates old and new atoms, and the autograd
function in :mod:`moram_avalanche.atom_ops` computes gradients for the trainable rows only.

State dict keys (stable; a checkpoint holds only these plus the base layer):
``atom_keys`` ``[R, d_in]``, ``atom_values`` ``[d_out, R]``, ``num_frozen`` (0-d long),
``atom_task`` ``[R]`` (the expansion, i.e. task, that added each atom).
Loading a state dict resizes the bank, so atoms saved after several tasks load into a
freshly injected model.
"""

from __future__ import annotations

import math
from typing import Optional

import torch
from torch import nn

from .atom_ops import MoRAMFunction, compute_dtype, mixture_forward

STATE_KEYS = ("atom_keys", "atom_values", "num_frozen", "atom_task")


class MoRAMLinear(nn.Module):
    """A frozen linear map augmented by a mixture of rank-1 associative-memory atoms.

    Args:
        base: the pre-trained ``nn.Linear``; it is frozen (``requires_grad=False``) and kept
            by composition as ``self.base``.
        atoms_per_task: atoms appended by each :meth:`expand` (paper's ``r``; CLIP: 16).
        topk: routing budget ``k`` (CLIP: 16). The official release uses ``max(topk, 2)``,
            and never more than the bank holds.
        temperature: softmax temperature ``tau`` over the kept relevances (CLIP: 0.01).
        threshold: eval-only relevance gate ``delta`` (CLIP: 0.2); ``0`` disables it.
    """

    def __init__(
        self,
        base: nn.Linear,
        atoms_per_task: int = 16,
        topk: int = 16,
        temperature: float = 0.01,
        threshold: float = 0.2,
    ) -> None:
        super().__init__()
        if not isinstance(base, nn.Linear):
            raise TypeError(
                f"MoRAMLinear wraps an nn.Linear, got {type(base).__name__}. "
                "Replace only linear layers (see moram_avalanche.clip.inject)."
            )
        _check_positive_int("atoms_per_task", atoms_per_task)
        _check_positive_int("topk", topk)
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0 (paper: 0.01 for CLIP), got {temperature}")
        if not 0 <= threshold <= 1:
            raise ValueError(
                f"threshold compares with a cosine-like relevance in [-1, 1]; expected a value in "
                f"[0, 1] (paper: 0.2, 0 disables the gate), got {threshold}"
            )
        self.base = base
        base.requires_grad_(False)
        self.atoms_per_task = int(atoms_per_task)
        self.topk = int(topk)
        self.temperature = float(temperature)
        self.threshold = float(threshold)

        self._num_frozen = 0
        self._recording = False
        like = base.weight
        self.register_buffer("_key_bank", like.new_zeros(0, self.in_features), persistent=False)
        self.register_buffer("_value_bank", like.new_zeros(0, self.out_features), persistent=False)
        self.register_buffer(
            "atom_task", torch.zeros(0, dtype=torch.long, device=like.device), persistent=False
        )
        self.register_buffer("atom_mass", torch.zeros(0, device=like.device), persistent=False)
        self.register_buffer(
            "atom_hits", torch.zeros(0, dtype=torch.long, device=like.device), persistent=False
        )
        self.new_keys: Optional[nn.Parameter] = None
        self.new_values: Optional[nn.Parameter] = None

    # ------------------------------------------------------------------ the base layer
    @property
    def in_features(self) -> int:
        return self.base.in_features

    @property
    def out_features(self) -> int:
        return self.base.out_features

    @property
    def weight(self) -> torch.Tensor:
        """The frozen base weight (open_clip reads ``c_fc.weight.dtype``)."""
        return self.base.weight

    @property
    def bias(self) -> Optional[torch.Tensor]:
        return self.base.bias

    # ------------------------------------------------------------------ the bank
    @property
    def num_atoms(self) -> int:
        return self._key_bank.shape[0]

    @property
    def num_frozen(self) -> int:
        return self._num_frozen

    @property
    def num_trainable(self) -> int:
        return self.num_atoms - self._num_frozen

    @property
    def effective_topk(self) -> int:
        """``k`` actually used: ``min(max(topk, 2), num_atoms)`` (official release)."""
        return min(max(self.topk, 2), self.num_atoms)

    @property
    def keys(self) -> torch.Tensor:
        """All keys ``[num_atoms, in_features]``, frozen first, in insertion order (detached)."""
        self._tie_trainable()
        return self._key_bank.detach()

    @property
    def values(self) -> torch.Tensor:
        """All values ``[out_features, num_atoms]``, frozen first, in insertion order (detached)."""
        self._tie_trainable()
        return self._value_bank.detach().t()

    def expand(self) -> int:
        """Freeze every atom and append ``atoms_per_task`` new trainable ones.

        New keys are Kaiming-uniform (``a = sqrt(5)``, fan-in ``in_features``, like
        ``nn.Linear.weight``); new values are zero (method reference, "continual expansion").
        Returns the new number of atoms. An optimizer built before this call does not hold
        the new parameters: rebuild it or add them.
        """
        self.freeze()
        keys = torch.empty(self.atoms_per_task, self.in_features)
        nn.init.kaiming_uniform_(keys, a=math.sqrt(5))
        like = self._key_bank
        keys = keys.to(device=like.device, dtype=like.dtype)
        values = like.new_zeros(self.atoms_per_task, self.out_features)
        task = int(self.atom_task.max()) + 1 if self.num_atoms else 0
        tasks = self.atom_task.new_full((self.atoms_per_task,), task)
        self._set_bank(
            torch.cat([self._key_bank, keys]),
            torch.cat([self._value_bank, values]),
            num_frozen=self.num_atoms,
            tasks=torch.cat([self.atom_task, tasks]),
        )
        return self.num_atoms

    def freeze(self) -> None:
        """Freeze the trainable atoms; their values stay in the bank."""
        self._tie_trainable()
        self._num_frozen = self.num_atoms
        self.new_keys = None
        self.new_values = None

    def load_atoms(
        self,
        keys: torch.Tensor,
        values: torch.Tensor,
        num_frozen: int,
        atom_task: Optional[torch.Tensor] = None,
    ) -> None:
        """Replace the whole bank.

        Args:
            keys: ``[R, in_features]``.
            values: ``[out_features, R]`` (the layout of :attr:`values`).
            num_frozen: the first ``num_frozen`` atoms are frozen, the rest trainable.
            atom_task: ``[R]`` non-decreasing task index of each atom; by default
                consecutive blocks of ``atoms_per_task``.

        When the trainable part has the shape it has now, the existing parameters are
        updated in place, so an optimizer that holds them keeps working (resume).
        Activation statistics are reset.
        """
        keys, values = torch.as_tensor(keys), torch.as_tensor(values)
        if keys.dim() != 2 or keys.shape[1] != self.in_features:
            raise ValueError(
                f"keys must be [num_atoms, in_features={self.in_features}], got {tuple(keys.shape)}"
            )
        if values.dim() != 2 or values.shape != (self.out_features, keys.shape[0]):
            raise ValueError(
                f"values must be [out_features={self.out_features}, num_atoms={keys.shape[0]}] "
                f"(the layout of MoRAMLinear.values), got {tuple(values.shape)}"
            )
        num_frozen = int(num_frozen)
        if not 0 <= num_frozen <= keys.shape[0]:
            raise ValueError(f"num_frozen must be in [0, {keys.shape[0]}], got {num_frozen}")
        like = self.base.weight
        keys = keys.to(device=like.device, dtype=like.dtype)
        values = values.t().to(device=like.device, dtype=like.dtype)
        if atom_task is None:
            atom_task = torch.arange(keys.shape[0]) // self.atoms_per_task
        atom_task = torch.as_tensor(atom_task).to(device=like.device, dtype=torch.long)
        if atom_task.shape != (keys.shape[0],) or bool((atom_task.diff() < 0).any()):
            raise ValueError(
                f"atom_task must be a non-decreasing [num_atoms={keys.shape[0]}] tensor of task "
                f"indices, got {tuple(atom_task.shape)}"
            )
        same_trainable = (
            self.new_keys is not None
            and num_frozen == self._num_frozen
            and keys.shape == self._key_bank.shape
        )
        if same_trainable:
            with torch.no_grad():
                self._tie_trainable()
                self._key_bank.copy_(keys)
                self._value_bank.copy_(values)
            self.atom_task = atom_task.clone()
            self.reset_stats()
        else:
            self._set_bank(keys.clone(), values.clone(), num_frozen, atom_task.clone())

    def _set_bank(
        self, keys: torch.Tensor, values: torch.Tensor, num_frozen: int, tasks: torch.Tensor
    ) -> None:
        self._key_bank = keys.contiguous()
        self._value_bank = values.contiguous()
        self.atom_task = tasks
        self._num_frozen = num_frozen
        if num_frozen < keys.shape[0]:
            self.new_keys = nn.Parameter(self._key_bank[num_frozen:])
            self.new_values = nn.Parameter(self._value_bank[num_frozen:])
        else:
            self.new_keys = None
            self.new_values = None
        self.reset_stats()

    def _tie_trainable(self) -> None:
        """Make the trainable parameters alias the bank's tail again.

        ``module.to()``, ``deepcopy`` and unpickling give parameters and buffers separate
        storage. The parameters are what the optimizer updates, so their values win.
        """
        if self.new_keys is None:
            return
        start = self._num_frozen
        for param, bank in ((self.new_keys, self._key_bank), (self.new_values, self._value_bank)):
            tail = bank[start:]
            if param.data_ptr() != tail.data_ptr() or param.device != tail.device:
                with torch.no_grad():
                    tail.copy_(param.detach())
                param.data = tail

    # ------------------------------------------------------------------ forward
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.num_atoms == 0:
            return self.base(x)
        self._tie_trainable()
        dtype = compute_dtype(x)
        tokens = x.reshape(-1, self.in_features).to(dtype)
        # A plain nn.Linear base is fused into the atoms' output buffer; a subclass with its
        # own forward (quantised layers, say) runs as is and its output is added.
        fuse_base = type(self.base).forward is nn.Linear.forward
        weight = self.base.weight.to(dtype) if fuse_base else None
        bias = self.base.bias.to(dtype) if fuse_base and self.base.bias is not None else None
        key_bank, value_bank = self._key_bank.to(dtype), self._value_bank.to(dtype)
        threshold = self.threshold if (not self.training and self.threshold > 0) else None
        k = self.effective_topk
        if self.new_keys is not None:
            new_keys, new_values = self.new_keys.to(dtype), self.new_values.to(dtype)
        else:
            new_keys, new_values = key_bank[:0], value_bank[:0]
        needs_grad = torch.is_grad_enabled() and any(
            t is not None and t.requires_grad for t in (tokens, weight, bias, new_keys, new_values)
        )
        if needs_grad:
            out, idx, weights = MoRAMFunction.apply(
                tokens, weight, bias, key_bank, value_bank, new_keys, new_values,
                k, self.temperature, threshold,
            )
        else:
            with torch.no_grad():
                out, _, routing = mixture_forward(
                    tokens, weight, bias, key_bank, value_bank, k, self.temperature, threshold
                )
            idx, weights = routing.idx, routing.weights
        if self._recording:
            self._record(idx, weights)
        out = out.reshape(*x.shape[:-1], self.out_features)
        if not fuse_base:
            base_out = self.base(x)
            out = base_out + out.to(base_out.dtype)
        return out

    # ------------------------------------------------------------------ activation statistics
    @property
    def recording(self) -> bool:
        return self._recording

    def start_recording(self) -> None:
        """Accumulate per-atom mass (sum of mixture weights) and hit counts on every forward."""
        self._recording = True

    def stop_recording(self) -> None:
        self._recording = False

    def reset_stats(self) -> None:
        device = self._key_bank.device
        self.atom_mass = torch.zeros(self.num_atoms, device=device)
        self.atom_hits = torch.zeros(self.num_atoms, dtype=torch.long, device=device)

    @torch.no_grad()
    def _record(self, idx: torch.Tensor, weights: torch.Tensor) -> None:
        flat_idx, flat_w = idx.reshape(-1), weights.detach().reshape(-1)
        self.atom_mass.index_add_(0, flat_idx, flat_w.to(self.atom_mass.dtype))
        self.atom_hits.index_add_(0, flat_idx, (flat_w > 0).long())

    def prune(self, keep_mass: float = 0.99, newest_only: bool = True) -> torch.Tensor:
        """Drop atoms outside the smallest set that covers ``keep_mass`` of the recorded mass.

        Optional post-training pruning of the MoRAM paper (99% of the activation mass kept;
        about 30% storage saved). Candidates are the atoms of the latest task
        (``newest_only``, the paper's per-task pruning: older atoms were judged on their own
        task) or the whole bank. Kept atoms keep their order. The bank must be frozen.

        Returns the indices (in the bank before pruning) of the dropped atoms.
        """
        if not 0 < keep_mass <= 1:
            raise ValueError(f"keep_mass must be in (0, 1], got {keep_mass}")
        if self.num_trainable:
            raise RuntimeError(
                "prune() needs a frozen bank: call freeze() first (the trainable atoms are "
                "held by an optimizer)."
            )
        if self.num_atoms == 0:
            return torch.zeros(0, dtype=torch.long, device=self._key_bank.device)
        start = 0
        if newest_only:
            start = int(torch.searchsorted(self.atom_task, self.atom_task[-1]))
        mass = self.atom_mass[start:].double()
        total = float(mass.sum())
        if total <= 0:
            raise RuntimeError(
                "no activation mass recorded for the candidate atoms: call start_recording() "
                "before the forward passes whose usage should decide the pruning."
            )
        order = torch.argsort(mass, descending=True, stable=True)
        cumulative = torch.cumsum(mass[order], 0)
        # smallest n with cumulative[n-1] >= keep_mass * total
        needed = int(torch.searchsorted(cumulative, cumulative.new_tensor(keep_mass * total))) + 1
        keep = torch.ones(self.num_atoms, dtype=torch.bool, device=mass.device)
        keep[start:] = False
        keep[start + order[: min(needed, order.numel())]] = True
        dropped = torch.nonzero(~keep).flatten()
        if dropped.numel():
            mass_kept, hits_kept = self.atom_mass[keep], self.atom_hits[keep]
            self._set_bank(
                self._key_bank[keep], self._value_bank[keep], int(keep.sum()), self.atom_task[keep]
            )
            self.atom_mass, self.atom_hits = mass_kept, hits_kept
        return dropped

    # ------------------------------------------------------------------ state dict
    def _save_to_state_dict(self, destination, prefix, keep_vars):
        self._tie_trainable()
        destination[prefix + "atom_keys"] = self._key_bank.detach()
        destination[prefix + "atom_values"] = self._value_bank.t().detach()
        destination[prefix + "num_frozen"] = torch.tensor(self._num_frozen)
        destination[prefix + "atom_task"] = self.atom_task.detach()

    def _load_from_state_dict(
        self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
    ):
        found = {name: state_dict.get(prefix + name) for name in STATE_KEYS}
        missing = [prefix + name for name in STATE_KEYS[:3] if found[name] is None]
        if missing:
            missing_keys.extend(missing)
        else:
            try:
                self.load_atoms(
                    found["atom_keys"],
                    found["atom_values"],
                    int(found["num_frozen"]),
                    found["atom_task"],
                )
            except ValueError as err:
                error_msgs.append(f"While loading atoms of {prefix[:-1] or 'MoRAMLinear'}: {err}")
        if strict:
            children = set(self._modules)
            for key in state_dict:
                if key.startswith(prefix):
                    local = key[len(prefix):]
                    if local not in STATE_KEYS and local.split(".", 1)[0] not in children:
                        unexpected_keys.append(key)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"atoms={self.num_frozen}/{self.num_atoms} (frozen/total), topk={self.topk}, "
            f"temperature={self.temperature}, threshold={self.threshold}"
        )


def _check_positive_int(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
