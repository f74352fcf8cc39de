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

Routing ablations (MoRAM paper, routing table; all off by default, so the layer above is
unchanged and runs the fused autograd function of :mod:`moram_avalanche.atom_ops`):

* ``topk=None``: no sparsity, every atom is kept (``k = R``).
* ``temperature=None``: no sharpening, ``tau = 1`` (softmax of the raw relevance).
* ``threshold=0``: no eval gate.
* ``router=True``: an external learned router replaces the self-activation relevance: the
  relevance is ``s = G x`` with router rows ``G`` ``[R, d_in]`` (one row per atom, grown,
  frozen and pruned with the bank; new rows are Kaiming-uniform, like the keys).
  Top-k, temperature and the eval gate then act on these logits as they act on ``p / ||p||``.
  Extra state dict key ``router_weight`` ``[R, d_in]``.
* ``load_balance="release"`` (or ``True``) / ``"switch"``: every training forward with grad
  appends the layer's load-balancing term to :attr:`balance_terms`, for a plugin to add to
  the loss: the MoRAM release's ``R * sum_i Pbar_i^2`` over the kept mixture weights
  (:func:`~moram_avalanche.atom_ops.release_balance_term`) or Switch Transformer's
  ``R * sum_i f_i P_i`` (:func:`~moram_avalanche.atom_ops.balance_term`; constant while
  every atom is kept).

The last two need differentiable routing probabilities and run the plain-autograd
:func:`~moram_avalanche.atom_ops.plain_mixture` (old and new atoms concatenated per call).
"""

from __future__ import annotations

import math
from typing import Optional

import torch
from torch import nn

from .atom_ops import BALANCE_FORMS, MoRAMFunction, compute_dtype, mixture_forward, plain_mixture
from .linear_wrapper import LinearWrapper, check_positive_int

STATE_KEYS = ("atom_keys", "atom_values", "num_frozen", "atom_task")
#: state dict key of the external router's rows (``router=True`` only)
ROUTER_KEY = "router_weight"
#: load-balancing terms a layer keeps uncollected before it reports a missing consumer
MAX_BALANCE_TERMS = 256


class MoRAMLinear(LinearWrapper):
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
        router: route with an external learned router instead of self-activation (ablation;
            see the module docstring).
        load_balance: record a load-balancing term per training forward (ablation; the
            paper reports that it hurts: X-TAIL Last 80.9 -> 77.3): ``"release"`` (or
            ``True``), ``"switch"``, or ``False``; settable later.
    """

    def __init__(
        self,
        base: nn.Linear,
        atoms_per_task: int = 16,
        topk: Optional[int] = 16,
        temperature: Optional[float] = 0.01,
        threshold: float = 0.2,
        router: bool = False,
        load_balance: bool | str = False,
    ) -> None:
        super().__init__(base)
        check_positive_int("atoms_per_task", atoms_per_task)
        if topk is not None:
            check_positive_int("topk", topk)
        if temperature is None:
            temperature = 1.0
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0 (paper: 0.01 for CLIP), got {temperature}")
        if not 0 <= threshold <= 1:
            raise ValueError(
                f"threshold compares with a cosine-like relevance in [-1, 1]; expected a value in "
                f"[0, 1] (paper: 0.2, 0 disables the gate), got {threshold}"
            )
        self.atoms_per_task = int(atoms_per_task)
        self.topk = None if topk is None else int(topk)
        self.temperature = float(temperature)
        self.threshold = float(threshold)
        self.router = bool(router)
        self.load_balance = load_balance
        #: load-balancing terms of the training forwards since the last :meth:`pop_balance_terms`
        self.balance_terms: list = []

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
        if self.router:
            self.register_buffer(
                "_router_bank", like.new_zeros(0, self.in_features), persistent=False
            )
        self.new_keys: Optional[nn.Parameter] = None
        self.new_values: Optional[nn.Parameter] = None
        self.new_router: Optional[nn.Parameter] = None

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

    @property
    def router_weight(self) -> Optional[torch.Tensor]:
        """The external router's rows ``[num_atoms, in_features]`` (detached), or None."""
        if not self.router:
            return None
        self._tie_trainable()
        return self._router_bank.detach()

    def expand(self) -> int:
        """Freeze every atom and append ``atoms_per_task`` new trainable ones.

        New keys are Kaiming-uniform (``a = sqrt(5)``, fan-in ``in_features``, like
        ``nn.Linear.weight``); new values are zero (method reference, "continual expansion");
        new router rows (``router=True``) are Kaiming-uniform too, an independent draw (a
        router is an ``nn.Linear`` in sparse MoE layers). Not zero: top-k runs over the whole
        bank without noise, so zero rows (logit 0) would lose every slot to the trained
        frozen rows whose logits are positive, and the new atoms would hardly train. Returns
        the new number of atoms. An
        optimizer built before this call does not hold the new parameters: rebuild it or add
        them.
        """
        self.freeze()
        keys = torch.empty(self.atoms_per_task, self.in_features)
        nn.init.kaiming_uniform_(keys, a=math.sqrt(5))
        like = self._key_bank
        keys = keys.to(device=like.device, dtype=like.dtype)
        values = like.new_zeros(self.atoms_per_task, self.out_features)
        task = int(self.atom_task.max()) + 1 if self.num_atoms else 0
        tasks = self.atom_task.new_full((self.atoms_per_task,), task)
        router = None
        if self.router:
            rows = torch.empty(self.atoms_per_task, self.in_features)
            nn.init.kaiming_uniform_(rows, a=math.sqrt(5))
            router = torch.cat([self._router_bank, rows.to(device=like.device, dtype=like.dtype)])
        self._set_bank(
            torch.cat([self._key_bank, keys]),
            torch.cat([self._value_bank, values]),
            num_frozen=self.num_atoms,
            tasks=torch.cat([self.atom_task, tasks]),
            router=router,
        )
        return self.num_atoms

    def freeze(self) -> None:
        """Freeze the trainable atoms; their values stay in the bank."""
        self._tie_trainable()
        self._num_frozen = self.num_atoms
        self.new_keys = None
        self.new_values = None
        self.new_router = None

    def load_atoms(
        self,
        keys: torch.Tensor,
        values: torch.Tensor,
        num_frozen: int,
        atom_task: Optional[torch.Tensor] = None,
        router: Optional[torch.Tensor] = None,
    ) -> None:
        """Replace the whole bank.

        Args:
            keys: ``[R, in_features]``.
            values: ``[out_features, R]`` (the layout of :attr:`values`).
            num_frozen: the first ``num_frozen`` atoms are frozen, the rest trainable.
            atom_task: ``[R]`` non-decreasing task index of each atom; by default
                consecutive blocks of ``atoms_per_task``.
            router: ``[R, in_features]`` router rows (``router=True`` layers only; None: zeros).

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
        if router is not None and not self.router:
            raise ValueError(
                "router rows given to a layer without a router: build it with router=True"
            )
        if self.router:
            router = like.new_zeros(keys.shape) if router is None else torch.as_tensor(router)
            if router.shape != keys.shape:
                raise ValueError(
                    f"router rows must be [num_atoms={keys.shape[0]}, in_features="
                    f"{self.in_features}] like the keys, got {tuple(router.shape)}"
                )
            router = router.to(device=like.device, dtype=like.dtype)
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
                if self.router:
                    self._router_bank.copy_(router)
            self.atom_task = atom_task.clone()
            self.reset_stats()
        else:
            self._set_bank(keys.clone(), values.clone(), num_frozen, atom_task.clone(),
                           router=None if router is None else router.clone())

    def _trainable_pairs(self):
        """``(parameter name, bank name)`` of each trainable tail and the bank it aliases."""
        pairs = [("new_keys", "_key_bank"), ("new_values", "_value_bank")]
        if self.router:
            pairs.append(("new_router", "_router_bank"))
        return pairs

    def _set_bank(
        self, keys: torch.Tensor, values: torch.Tensor, num_frozen: int, tasks: torch.Tensor,
        router: Optional[torch.Tensor] = None,
    ) -> None:
        self._key_bank = keys.contiguous()
        self._value_bank = values.contiguous()
        if self.router:
            router = keys.new_zeros(keys.shape) if router is None else router
            self._router_bank = router.contiguous()
        self.atom_task = tasks
        self._num_frozen = num_frozen
        for param_name, bank_name in self._trainable_pairs():
            tail = getattr(self, bank_name)[num_frozen:]
            setattr(self, param_name, nn.Parameter(tail) if num_frozen < keys.shape[0] else None)
        self.reset_stats()

    def _tie_trainable(self) -> None:
        """Make the trainable parameters alias the bank's tail again.

        ``module.to()``, ``deepcopy`` and unpickling give parameters and buffers separate
        storage. The parameters are what the optimizer updates, so their values win.
        """
        if self.new_keys is None:
            return
        start = self._num_frozen
        for param_name, bank_name in self._trainable_pairs():
            param, bank = getattr(self, param_name), getattr(self, bank_name)
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
        threshold = self.threshold if (not self.training and self.threshold > 0) else None
        k = self.effective_topk
        balance = self.load_balance if self.training and torch.is_grad_enabled() else None
        if self.router or balance:
            out, idx, weights = self._plain_forward(tokens, weight, bias, dtype, k, threshold,
                                                    balance)
        else:
            out, idx, weights = self._fused_forward(tokens, weight, bias, dtype, k, threshold)
        if self._recording:
            self._record(idx, weights)
        out = out.reshape(*x.shape[:-1], self.out_features)
        if not fuse_base:
            base_out = self.base(x)
            out = base_out + out.to(base_out.dtype)
        return out

    def _fused_forward(self, tokens, weight, bias, dtype, k, threshold):
        """The method's path: one autograd function over the bank (:mod:`.atom_ops`)."""
        key_bank, value_bank = self._key_bank.to(dtype), self._value_bank.to(dtype)
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
        return out, idx, weights

    def _plain_forward(self, tokens, weight, bias, dtype, k, threshold, balance):
        """The ablations' path (router, load balance): plain autograd over ``[frozen; new]``."""
        start = self._num_frozen

        def whole(bank_name, param_name):
            bank, param = getattr(self, bank_name), getattr(self, param_name)
            if param is None:
                return bank.to(dtype)
            return torch.cat([bank[:start].to(dtype), param.to(dtype)])

        result = plain_mixture(
            tokens, weight, bias, whole("_key_bank", "new_keys"),
            whole("_value_bank", "new_values"), k, self.temperature, threshold,
            router=whole("_router_bank", "new_router") if self.router else None,
            balance=balance,
        )
        if result.balance is not None:
            if len(self.balance_terms) >= MAX_BALANCE_TERMS:
                raise RuntimeError(
                    f"{len(self.balance_terms)} load-balancing terms (each holding its autograd "
                    "graph) were recorded and never collected: call pop_balance_terms() after "
                    "each forward (LoadBalancePlugin does), or build the layer with "
                    "load_balance=False"
                )
            self.balance_terms.append(result.balance)
        return result.out, result.idx, result.weights

    @property
    def load_balance(self) -> Optional[str]:
        """The load-balancing term recorded in training (one of ``BALANCE_FORMS``), or None."""
        return self._load_balance

    @load_balance.setter
    def load_balance(self, form) -> None:
        if form is True:
            form = BALANCE_FORMS[0]
        elif form is False or form is None:
            form = None
        elif form not in BALANCE_FORMS:
            raise ValueError(f"load_balance must be False, True or one of {BALANCE_FORMS}, "
                             f"got {form!r}")
        self._load_balance = form

    def pop_balance_terms(self) -> list:
        """The load-balancing terms recorded since the last call (and forget them)."""
        terms, self.balance_terms = self.balance_terms, []
        return terms

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
                self._key_bank[keep], self._value_bank[keep], int(keep.sum()), self.atom_task[keep],
                router=self._router_bank[keep] if self.router else None,
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
        if self.router:
            destination[prefix + ROUTER_KEY] = self._router_bank.detach()

    def _load_from_state_dict(
        self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
    ):
        found = {name: state_dict.get(prefix + name) for name in STATE_KEYS}
        missing = [prefix + name for name in STATE_KEYS[:3] if found[name] is None]
        router = state_dict.get(prefix + ROUTER_KEY)
        if self.router and router is None:
            missing.append(prefix + ROUTER_KEY)
        if missing:
            missing_keys.extend(missing)
        else:
            try:
                self.load_atoms(
                    found["atom_keys"],
                    found["atom_values"],
                    int(found["num_frozen"]),
                    found["atom_task"],
                    router=router if self.router else None,
                )
            except ValueError as err:
                error_msgs.append(f"While loading atoms of {prefix[:-1] or 'MoRAMLinear'}: {err}")
        if strict:
            known = STATE_KEYS + ((ROUTER_KEY,) if self.router else ())
            children = set(self._modules)
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
            + (", router=True" if self.router else "")
            + (f", load_balance={self.load_balance!r}" if self.load_balance else "")
        )
