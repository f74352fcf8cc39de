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

Each task calls :meth:`MoRAMLinear.expand`: all existing atoms freeze and ``atoms_per_task``
new trainable atoms are appended (keys Kaiming-uniform with ``a = sqrt(5)`` as in
``nn.Linear``; values zero, so the layer output is unchanged at the start of a task).

Storage: every atom lives in one contiguous bank (``_key_bank`` ``[R, d_in]``,
``_value_bank`` ``[R, d_out]``; :data:`BANKS`). The trainable atoms are ``nn.Parameter``
objects that alias the bank's last rows, so no forward pass concatenates old and new atoms,
and the autograd function of :mod:`moram_avalanche.layers.moram_fused` computes gradients for
the trainable rows only.

State dict keys (stable; a checkpoint holds only these, :attr:`MoRAMLinear.state_keys`):
``atom_keys`` ``[R, d_in]``, ``atom_values`` ``[d_out, R]``, ``num_frozen`` (0-d long),
``atom_task`` ``[R]`` (the expansion, i.e. task, that added each atom).
Loading a state dict resizes the bank, so atoms saved after several tasks load into a
freshly injected model.

Three routing ablations of the paper only change numbers and keep this layer and its fused
path: ``topk=None`` keeps every atom (``k = R``), ``temperature=None`` means ``tau = 1``,
``threshold=0`` disables the gate. The two that need differentiable routing probabilities
(an external router, a load-balancing term) are
:class:`~moram_avalanche.layers.moram_variants.MoRAMAblationLinear`.
"""

from __future__ import annotations

import math
from typing import Dict, NamedTuple, Optional, Tuple

import torch
from torch import nn

from ..utils.checks import check_number, check_positive_int
from .base import GrowingAdapter, LinearWrapper
from .moram_fused import MoRAMFunction, compute_dtype, mixture_forward


class AtomBank(NamedTuple):
    """One per-atom tensor of the bank: rows ``[R, width]`` aligned with the atoms.

    Every bank grows, freezes, prunes, saves and loads with the atoms, row for row.
    """

    buffer: str  # the buffer that holds every row
    param: str  # the parameter that aliases the trainable rows (None when all are frozen)
    side: str  # "in" or "out": rows are in_features or out_features wide
    init: str  # "kaiming" (like nn.Linear.weight, a = sqrt(5)) or "zero": new rows at expand()
    state_key: str  # its state-dict entry
    transposed: bool  # stored as [width, R] in the state dict (the layout of MoRAMLinear.values)


#: the method's banks: keys ``A`` and values ``B``
BANKS = (AtomBank("_key_bank", "new_keys", "in", "kaiming", "atom_keys", False),
         AtomBank("_value_bank", "new_values", "out", "zero", "atom_values", True))


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


class MoRAMLinear(LinearWrapper, GrowingAdapter):
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

    STATE_KEYS = tuple(bank.state_key for bank in BANKS) + ("num_frozen", "atom_task")

    def __init__(self, base: nn.Linear, atoms_per_task: int = 16, topk: Optional[int] = 16,
                 temperature: Optional[float] = 0.01, threshold: float = 0.2) -> None:
        super().__init__(base)
        options = routing_options(atoms_per_task, topk, temperature, threshold)
        self.atoms_per_task = options["atoms_per_task"]
        self.topk = options["topk"]
        self.temperature = options["temperature"]
        self.threshold = options["threshold"]

        self._num_frozen = 0
        self._recording = False
        like = base.weight
        for bank in self.banks:
            self.register_buffer(bank.buffer, like.new_zeros(0, self._width(bank)), persistent=False)
            setattr(self, bank.param, None)
        self.register_buffer(
            "atom_task", torch.zeros(0, dtype=torch.long, device=like.device), persistent=False
        )
        self.register_buffer("atom_mass", torch.zeros(0, device=like.device), persistent=False)
        self.register_buffer(
            "atom_hits", torch.zeros(0, dtype=torch.long, device=like.device), persistent=False
        )

    @property
    def banks(self) -> Tuple[AtomBank, ...]:
        """The per-atom tensors this layer keeps (:data:`BANKS`; a variant may add its own)."""
        return BANKS

    @property
    def state_keys(self) -> Tuple[str, ...]:
        return tuple(bank.state_key for bank in self.banks) + ("num_frozen", "atom_task")

    @property
    def options(self) -> Dict[str, object]:
        """How the layer was built, as :func:`routing_options` normalises it."""
        return {"atoms_per_task": self.atoms_per_task, "topk": self.topk,
                "temperature": self.temperature, "threshold": self.threshold}

    def _width(self, bank: AtomBank) -> int:
        return self.in_features if bank.side == "in" else self.out_features

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
        """``k`` actually used: ``min(max(topk, 2), num_atoms)`` (official release).

        Every atom (``num_atoms``) when ``topk`` is None.
        """
        if self.topk is None:
            return self.num_atoms
        return min(max(self.topk, 2), self.num_atoms)

    def bank_rows(self, bank: AtomBank) -> torch.Tensor:
        """Every row of ``bank`` ``[num_atoms, width]``, frozen first (detached)."""
        self._tie_trainable()
        return getattr(self, bank.buffer).detach()

    @property
    def keys(self) -> torch.Tensor:
        """All keys ``[num_atoms, in_features]``, frozen first, in insertion order (detached)."""
        return self.bank_rows(BANKS[0])

    @property
    def values(self) -> torch.Tensor:
        """All values ``[out_features, num_atoms]``, frozen first, in insertion order (detached)."""
        return self.bank_rows(BANKS[1]).t()

    def expand(self) -> int:
        """Freeze every atom and append ``atoms_per_task`` new trainable ones.

        New keys are Kaiming-uniform (``a = sqrt(5)``, fan-in ``in_features``, like
        ``nn.Linear.weight``); new values are zero (method reference, "continual expansion").
        Returns the new number of atoms. An optimizer built before this call does not hold the
        new parameters: rebuild it or add them (the growth plugin does it through the
        strategy's model adaptation).
        """
        self.freeze()
        like = self._key_bank
        rows = {}
        for bank in self.banks:
            new = torch.empty(self.atoms_per_task, self._width(bank))
            if bank.init == "kaiming":
                nn.init.kaiming_uniform_(new, a=math.sqrt(5))
            else:
                new.zero_()
            rows[bank.buffer] = torch.cat([getattr(self, bank.buffer),
                                           new.to(device=like.device, dtype=like.dtype)])
        task = int(self.atom_task.max()) + 1 if self.num_atoms else 0
        tasks = torch.cat([self.atom_task, self.atom_task.new_full((self.atoms_per_task,), task)])
        self._set_bank(rows, num_frozen=self.num_atoms, tasks=tasks)
        return self.num_atoms

    def freeze(self) -> None:
        """Freeze the trainable atoms; their values stay in the bank."""
        self._tie_trainable()
        self._num_frozen = self.num_atoms
        for bank in self.banks:
            setattr(self, bank.param, None)

    def load_atoms(self, keys: torch.Tensor, values: torch.Tensor, num_frozen: int,
                   atom_task: Optional[torch.Tensor] = None, **extra: torch.Tensor) -> None:
        """Replace the whole bank.

        Args:
            keys: ``[R, in_features]``.
            values: ``[out_features, R]`` (the layout of :attr:`values`).
            num_frozen: the first ``num_frozen`` atoms are frozen, the rest trainable.
            atom_task: ``[R]`` non-decreasing task index of each atom; by default
                consecutive blocks of ``atoms_per_task``.
            extra: the rows of a variant's other banks, by state-dict key (e.g. ``router_weight``).

        When the trainable part has the shape it has now, the existing parameters are
        updated in place, so an optimizer holding them keeps working.
        """
        keys, values = torch.as_tensor(keys), torch.as_tensor(values)
        for name, rows in (("keys", keys), ("values", values), *extra.items()):
            rows = torch.as_tensor(rows)
            if rows.is_floating_point() and not bool(torch.isfinite(rows).all()):
                raise ValueError(f"{name} hold NaN or infinite entries "
                                 f"({int((~torch.isfinite(rows)).sum())} of {rows.numel()}): "
                                 "load atoms from an intact checkpoint")
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
        if atom_task is None:
            atom_task = torch.arange(keys.shape[0]) // self.atoms_per_task
        atom_task = torch.as_tensor(atom_task).to(device=like.device, dtype=torch.long)
        if atom_task.shape != (keys.shape[0],) or bool((atom_task.diff() < 0).any()):
            raise ValueError(
                f"atom_task must be a non-decreasing [num_atoms={keys.shape[0]}] tensor of task "
                f"indices, got {tuple(atom_task.shape)}"
            )
        given = {"atom_keys": keys, "atom_values": values, **extra}
        unknown = sorted(set(given) - {bank.state_key for bank in self.banks})
        if unknown:
            raise ValueError(f"{type(self).__name__} keeps no {unknown} rows (its banks: "
                             f"{[bank.state_key for bank in self.banks]})")
        rows = {}
        for bank in self.banks:
            rows[bank.buffer] = self._rows_for(bank, given.get(bank.state_key), keys.shape[0])
        same_trainable = (getattr(self, self.banks[0].param) is not None
                          and num_frozen == self._num_frozen and keys.shape == self._key_bank.shape)
        if same_trainable:
            with torch.no_grad():
                self._tie_trainable()
                for bank in self.banks:
                    getattr(self, bank.buffer).copy_(rows[bank.buffer])
            self.atom_task = atom_task.clone()
            self.reset_stats()
        else:
            self._set_bank({name: row.clone() for name, row in rows.items()}, num_frozen,
                           atom_task.clone())

    def _rows_for(self, bank: AtomBank, given: Optional[torch.Tensor], atoms: int) -> torch.Tensor:
        """``given`` (state layout) as bank rows ``[atoms, width]`` in the layer's device and dtype.

        A bank the caller leaves out (a variant's, e.g. from the method's atoms) starts at zero.
        """
        like = self.base.weight
        width = self._width(bank)
        if given is None:
            return like.new_zeros(atoms, width)
        rows = torch.as_tensor(given)
        rows = rows.t() if bank.transposed else rows
        if rows.shape != (atoms, width):
            layout = f"[{width}, {atoms}]" if bank.transposed else f"[{atoms}, {width}]"
            raise ValueError(f"{bank.state_key} must be {layout} (num_atoms={atoms}), got "
                             f"{tuple(torch.as_tensor(given).shape)}")
        return rows.to(device=like.device, dtype=like.dtype)

    def _set_bank(self, rows: Dict[str, torch.Tensor], num_frozen: int,
                  tasks: torch.Tensor) -> None:
        """Install ``rows`` (buffer name -> ``[R, width]``); the rows after ``num_frozen`` train."""
        total = rows[self.banks[0].buffer].shape[0]
        for bank in self.banks:
            setattr(self, bank.buffer, rows[bank.buffer].contiguous())
            tail = getattr(self, bank.buffer)[num_frozen:]
            setattr(self, bank.param, nn.Parameter(tail) if num_frozen < total else None)
        self.atom_task = tasks
        self._num_frozen = num_frozen
        self.reset_stats()

    def _tie_trainable(self) -> None:
        """Make the trainable parameters alias the bank's tail again.

        ``module.to()``, ``deepcopy`` and unpickling give parameters and buffers separate
        storage. The parameters are what the optimizer updates, so their values win.
        """
        if getattr(self, self.banks[0].param) is None:
            return
        start = self._num_frozen
        for bank in self.banks:
            param, rows = getattr(self, bank.param), getattr(self, bank.buffer)
            tail = rows[start:]
            if param.data_ptr() != tail.data_ptr() or param.device != tail.device:
                with torch.no_grad():
                    tail.copy_(param.detach())
                param.data = tail

    def trainable_rows(self, bank: AtomBank, dtype: torch.dtype) -> torch.Tensor:
        """The trainable rows of ``bank`` as the autograd graph sees them (``[0, width]`` if none)."""
        param = getattr(self, bank.param)
        if param is None:
            return getattr(self, bank.buffer)[:0].to(dtype)
        return param.to(dtype)

    # ------------------------------------------------------------------ forward
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() == 0 or x.shape[-1] != self.in_features:
            raise ValueError(f"{type(self).__name__} takes inputs [..., in_features={self.in_features}], "
                             f"got {tuple(x.shape)}")
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
        threshold = self.threshold if (not self.training and self.threshold > 0) else None
        out, idx, weights = self.mixture(tokens, weight, bias, self.effective_topk, threshold)
        if self._recording:
            self._record(idx, weights)
        out = out.reshape(*x.shape[:-1], self.out_features)
        if not fuse_base:
            base_out = self.base(x)
            out = base_out + out.to(base_out.dtype)
        return out

    def mixture(self, tokens, weight, bias, k: int, threshold: Optional[float]):
        """Steps 1-6 on ``tokens`` ``[N, d_in]``: ``(y [N, d_out], kept idx [N, k], weights [N, k])``.

        ``weight`` / ``bias`` are the base's (None: only the atoms' term); ``threshold`` is the
        eval gate or None. The method's path: one autograd function over the bank
        (:class:`~moram_avalanche.layers.moram_fused.MoRAMFunction`), gradients for the
        trainable rows only; without grad, the same arithmetic under ``no_grad``.
        """
        dtype = tokens.dtype
        key_bank, value_bank = self._key_bank.to(dtype), self._value_bank.to(dtype)
        new_keys, new_values = (self.trainable_rows(bank, dtype) for bank in BANKS)
        needs_grad = torch.is_grad_enabled() and any(
            t is not None and t.requires_grad for t in (tokens, weight, bias, new_keys, new_values)
        )
        if needs_grad:
            return MoRAMFunction.apply(tokens, weight, bias, key_bank, value_bank, new_keys,
                                       new_values, k, self.temperature, threshold)
        with torch.no_grad():
            out, _, routing = mixture_forward(tokens, weight, bias, key_bank, value_bank, k,
                                              self.temperature, threshold)
        return out, routing.idx, routing.weights

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
        task) or the whole bank. Kept atoms keep their order, with every bank's rows. The
        bank must be frozen.

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
            self._set_bank({bank.buffer: getattr(self, bank.buffer)[keep] for bank in self.banks},
                           int(keep.sum()), self.atom_task[keep])
            self.atom_mass, self.atom_hits = mass_kept, hits_kept
        return dropped

    # ------------------------------------------------------------------ state dict
    def _save_to_state_dict(self, destination, prefix, keep_vars):
        self._tie_trainable()
        for bank in self.banks:
            rows = getattr(self, bank.buffer).detach()
            destination[prefix + bank.state_key] = rows.t() if bank.transposed else rows
        destination[prefix + "num_frozen"] = torch.tensor(self._num_frozen)
        destination[prefix + "atom_task"] = self.atom_task.detach()

    def _load_from_state_dict(
        self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
    ):
        found = {key: state_dict.get(prefix + key) for key in self.state_keys}
        missing = [prefix + key for key in self.state_keys if key != "atom_task" and found[key] is None]
        if missing:
            missing_keys.extend(missing)
        else:
            extra = {bank.state_key: found[bank.state_key] for bank in self.banks[2:]}
            try:
                self.load_atoms(found["atom_keys"], found["atom_values"], int(found["num_frozen"]),
                                found["atom_task"], **extra)
            except ValueError as err:
                error_msgs.append(f"While loading atoms of {prefix[:-1] or type(self).__name__}: {err}")
        if strict:
            known, children = set(self.state_keys), set(self._modules)
            for key in state_dict:
                if key.startswith(prefix):
                    local = key[len(prefix):]
                    if local not in known and local.split(".", 1)[0] not in children:
                        unexpected_keys.append(key)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"atoms={self.num_frozen}/{self.num_atoms} (frozen/total), topk={self.topk}, "
            f"temperature={self.temperature}, threshold={self.threshold}"
        )


__all__ = ["BANKS", "AtomBank", "MoRAMLinear", "routing_options"]
