"""MoRAMLinear: a frozen ``nn.Linear`` plus a growing bank of rank-1 memory atoms (the paper's layer).

Implements the layer of MoRAM ("Little by Little: Continual Learning via Incremental Mixture
of Rank-1 Associative Memory Experts", ICML 2026): for every token ``x``,
``y = W x + b + sum_i w_i p_i B_i``, the paper's six steps as
:mod:`~moram_avalanche.layers.moram.paths.reference` states them.

One forward, in this file then one path's: :meth:`MoRAMLinear.forward` checks the input;
:meth:`MoRAMRouting.read` reads the compute dtype (autocast's, :func:`compute_dtype`), ``k`` and the
eval gate; :meth:`MoRAMRouting.mixture` takes the bank in that dtype as the bank keeps it
(:meth:`~moram_avalanche.layers.moram.bank.AtomStore.rows`: joined and cast once, the trainable rows
views of the parameters) and calls the path the chooser picked for the device, asked once and kept
(:meth:`MoRAMRouting.path`, :func:`~moram_avalanche.layers.moram.paths.choice.mixture_for`; the switch
``MORAM_AVALANCHE_PATH`` or ``use_path`` forces one: :mod:`moram_avalanche.layers.moram.paths`),
which computes the steps without autograd and attaches the hand-written backward
(:mod:`~moram_avalanche.layers.moram.backward`: gradients for the current task's atoms only).
Nothing is built inside a forward. An eval call over a frozen bank without a backward (over the
stacked base and keys where the base's copy is kept, else reading the base apart) is kept as an
:class:`~moram_avalanche.layers.moram.plan.EvalPlan`, and the next call repeats it after one check
that nothing it decided on changed.

The bank -- frozen atoms in buffers, the current task's atoms as ``nn.Parameter`` objects, growth
by :meth:`~MoRAMLinear.expand`, pruning, activation statistics and the state dict (``atom_keys``,
``atom_values``, ``num_frozen``, ``atom_task``) -- is :class:`~moram_avalanche.layers.moram.bank.MoRAMBank`.

The steps over a bank, with the routing options, are one mixin, :class:`MoRAMRouting`
(:meth:`~MoRAMRouting.read`), on two hosts: :class:`MoRAMLinear` (one bank over one frozen
``nn.Linear``) and :class:`MoRAMAtoms` (one bank without a base, for a layer that holds several
by name and adds their terms to its own base's output: the peft layer, one bank per adapter).

Three routing ablations of the paper only change numbers and keep this layer:
``topk=None`` keeps every atom (``k = R``), ``temperature=None`` means ``tau = 1``,
``threshold=0`` disables the gate. The two that need differentiable routing probabilities
(an external router, a load-balancing term) are
:class:`~moram_avalanche.layers.moram.variants.MoRAMAblationLinear`.
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

from .bank import AtomBank, AtomStore, MoRAMBank, normal_tensors, registered, stamp_of
from .config import PAPER_CLIP, MoRAMLayerConfig
from .dropped import DropoutDraw, DroppedTokens, redrawn, replayable
from .hooks import hooked, plain_linear
from .paths import choice
from .paths.reference import route
from .paths.switch import token, traced_token
from .plan import EvalPlan
from .stacked import StackedBase, StackedGroup, stack_bases


def compute_dtype(x: torch.Tensor) -> torch.dtype:
    """The dtype a linear layer computes in for input ``x``: autocast's when it is on, else ``x``'s.
    (The device type of a CUDA or CPU tensor from its flags: ``x.device.type`` makes a device and a
    string, about 5 thousand instructions a call.)"""
    device_type = "cuda" if x.is_cuda else "cpu" if x.is_cpu else x.device.type
    if torch.is_autocast_enabled(device_type):
        return torch.get_autocast_dtype(device_type)
    return x.dtype


def tokens_of(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``x`` ``[..., d_in]`` as token rows ``[N, d_in]`` in ``dtype`` (no cast where it already is).
    (A call's casts name ``dtype=``: Python's argument parser then tries one of ``Tensor.to``'s
    overloads, not each in turn: 0.4-0.8 us less a cast on this project's 2-core CPU.)"""
    tokens = x if x.dim() == 2 else x.reshape(-1, x.shape[-1])
    return tokens if tokens.dtype == dtype else tokens.to(dtype=dtype)


_PLAIN_LINEAR = {}  # class -> whether it defines neither ``weight`` nor ``bias`` itself (a parametrization's property)
_MISSING = object()


def weight_and_bias(base: nn.Module) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    """``(base.weight, base.bias)``, each as ``getattr`` finds it: from the module's parameters where
    its class defines neither name and its instance dictionary holds neither (else by ``getattr``),
    without two ``nn.Module.__getattr__`` calls (about 10 thousand instructions a call on the long
    way; issue "GPU path II")."""
    host = type(base)
    plain = _PLAIN_LINEAR.get(host)
    if plain is None:
        plain = _PLAIN_LINEAR[host] = not (hasattr(host, "weight") or hasattr(host, "bias"))
    own = base.__dict__
    if plain and "weight" not in own and "bias" not in own:
        parameters = own["_parameters"]
        weight, bias = parameters.get("weight", _MISSING), parameters.get("bias", _MISSING)
        if weight is not _MISSING and bias is not _MISSING:
            return weight, bias
    return base.weight, base.bias


def routing_options(atoms_per_task: int = PAPER_CLIP.atoms_per_task, topk: Optional[int] = PAPER_CLIP.topk,
                    temperature: Optional[float] = PAPER_CLIP.temperature,
                    threshold: float = PAPER_CLIP.threshold) -> Dict[str, object]:
    """The layer's options, checked and normalised (``temperature=None`` -> 1.0):
    :meth:`MoRAMLayerConfig(...).options() <moram_avalanche.layers.moram.config.MoRAMLayerConfig.options>`.

    What :attr:`MoRAMLinear.options` reports for a layer built with these arguments, so code
    that meets existing layers can compare them with what it would build.
    """
    return MoRAMLayerConfig(atoms_per_task, topk, temperature, threshold).options()


class MoRAMRouting:
    """Steps 1-6 over the bank of its host (an :class:`~moram_avalanche.layers.moram.bank.AtomStore`
    module) with the routing options ``topk``, ``temperature``, ``threshold`` (a mixin)."""

    def init_routing(self, options: Dict[str, object]) -> None:
        """Keep the routing options of :func:`routing_options` (checked and normalised)."""
        self.topk = options["topk"]
        self.temperature = options["temperature"]
        self.threshold = options["threshold"]
        self._path = None  # (switch token, {(device, dtype, atoms, k, gated): the chosen path's mixture})
        #: keep the frozen base's weight and bias cast to the compute dtype across calls (autocast:
        #: two casts fewer per call, for a copy of the weight in that dtype); off by default, and to
        #: stay off under FSDP, whose weights are gathered per call (:func:`keep_base_casts`)
        self.keep_base_cast = False
        self._base_casts = {}  # dtype -> (weight, bias, their versions and data pointers, cast weight, cast bias)
        self._stacked = {}  # dtype -> (the tensors it was built from, their versions and data pointers, StackedBase,
        #                             the StackedGroup it is part of)
        self._plan = None  # the last eval call's EvalPlan (a frozen bank's), repeated while it applies (layers.moram.plan)

    def __getstate__(self):
        state = dict(super().__getstate__())
        state["_path"], state["_base_casts"], state["_stacked"] = None, {}, {}  # chosen and cast again where it lands
        state["_plan"] = None
        return state

    def __setstate__(self, state):
        state.setdefault("_path", None)  # layers pickled before 0.8
        state.setdefault("keep_base_cast", False)
        state.setdefault("_base_casts", {})
        state.setdefault("_stacked", {})
        state.setdefault("_plan", None)
        super().__setstate__(state)

    def forget_copies(self) -> None:
        """The bank's kept copies (:meth:`~moram_avalanche.layers.moram.bank.AtomStore.forget_copies`,
        called by a ``.to()`` that moves or casts), the base's kept copies, and the plan reading them."""
        super().forget_copies()
        self._base_casts, self._stacked, self._plan = {}, {}, None

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        """The bank's load (:class:`~moram_avalanche.layers.moram.bank.MoRAMBank`'s or
        :class:`~moram_avalanche.layers.moram.bank.AtomBank`'s), every kept copy dropped first: a
        load into this layer or any module holding it copies new values into the base and the bank in
        place, which a graph of ``torch.compile`` would not see (it reads a kept copy where it was
        made from the same objects, :meth:`stacked_base`). (A load into the base module alone does
        not pass here: :func:`forget_copies` after it, where a compiled model reads kept copies.)"""
        self.forget_copies()
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)

    def _replicate_for_data_parallel(self):
        """``nn.DataParallel``'s replica of this layer for another device, with kept copies and a path
        of its own (none yet): ``nn.Module``'s replica copies the instance dictionary shallowly, so its
        dictionaries of copies would be this layer's, where each replica would write its device's
        copies (made again at every call, as the replicas take turns, and held on the other devices
        after the run)."""
        replica = super()._replicate_for_data_parallel()
        replica._path = None
        replica.forget_copies()
        return replica

    def base_in(self, dtype: torch.dtype, weight: torch.Tensor, bias: Optional[torch.Tensor]):
        """``(weight, bias)`` in ``dtype``: cast at this call, or with :attr:`keep_base_cast` a copy
        kept until the tensors change (replaced, moved, edited in place, their data swapped); never
        under ``torch.compile`` (which fuses the cast into its graph), nor where a backward would
        reach the weight or bias (grad mode on and either requires grad: a trainable base, whose
        gradient goes through the cast, not through a detached copy)."""
        if weight.dtype == dtype:
            return weight, bias
        stamp = None
        if (self.keep_base_cast and not torch.compiler.is_compiling()
                and not (torch.is_grad_enabled() and (weight.requires_grad
                                                      or (bias is not None and bias.requires_grad)))):
            try:
                stamp = (stamp_of(weight), None if bias is None else stamp_of(bias))
            except RuntimeError:  # a tensor without storage (a torch.func transform's wrapper)
                pass
        if stamp is None:  # (nothing kept: not asked, a graph's cast, or a tensor without storage)
            return weight.to(dtype=dtype), None if bias is None else bias.to(dtype=dtype)
        entry = self._base_casts.get(dtype)
        if entry is None or entry[0] is not weight or entry[1] is not bias or entry[2] != stamp:
            self._stacked.clear()  # one copy of the base at a time: the stacked one goes (and a plan reading it)
            self._plan = None
            with torch.no_grad(), normal_tensors():
                entry = (weight, bias, stamp, weight.detach().to(dtype), None if bias is None else bias.detach().to(dtype))
            self._base_casts[dtype] = entry
        return entry[3], entry[4]

    def stacks_base(self, weight: Optional[torch.Tensor]) -> bool:
        """Whether this call reads the base and the keys as one stacked GEMM
        (:mod:`~moram_avalanche.layers.moram.stacked`): a base is fused into the call, its copy is
        kept (:attr:`keep_base_cast`), no backward follows (grad mode off) and the bank is frozen
        (:meth:`stacked_base` says why). A subclass whose routing does not read the keys says no."""
        return (weight is not None and self.keep_base_cast and not torch.is_grad_enabled()
                and registered(self, "new_keys", "_parameters") is None)

    def stacked_base(self, dtype: torch.dtype, weight: torch.Tensor, bias: Optional[torch.Tensor]
                     ) -> Optional[StackedBase]:
        """The base ``weight``, ``bias`` and this FROZEN bank stacked in ``dtype``
        (:func:`~moram_avalanche.layers.moram.stacked.stack_base`; or its part of a group's copy,
        :func:`keep_stacked`), kept until one of the tensors it was built from is replaced (expand,
        load, prune, ``.to()``) or edited in place (``copy_``, ``mul_``: their versions), or the
        bank's ``new_value_scale`` changes; None (the call reads the base apart) where it does not apply.

        Only a frozen bank is stacked (what a strategy evaluates: MoRAM's plugin freezes the bank
        after each task): a task's trainable rows change at every optimizer step, and not every
        step shows in their versions (an update through ``.data``, as DeepSpeed's optimizers make
        it; a fused optimizer's kernel), so a copy of them could go stale unseen. A bank with
        trainable rows reads them where they live (:meth:`~moram_avalanche.layers.moram.bank.AtomStore.rows`).

        Under ``torch.compile`` a graph cannot read versions: a kept copy is read where it was built
        from the same objects, and none is made (it would be stacked again at every call of the
        graph): an eager call before compiling makes it."""
        sources = self.stack_sources(weight, bias)
        if sources[4] is not None:
            return None  # trainable rows: read where they live (docstring; stacks_base says no first)
        entry = self.kept_stacked(dtype, sources)
        if entry is not None:
            return entry[2]
        if torch.compiler.is_compiling():
            return None  # a copy made while tracing would be stacked again at every call: read apart
        if _stamp(sources, self.new_value_scale) is None:
            return None  # a tensor without storage (a torch.func transform's wrapper): nothing to keep
        return keep_stacked([self], [sources], dtype).parts[0]

    def stack_sources(self, weight: torch.Tensor, bias: Optional[torch.Tensor]) -> tuple:
        """The tensors a stacked copy is built from: the base's ``weight``, ``bias`` and the bank's rows."""
        return weight, bias, self.frozen_keys, self.frozen_values, self.new_keys, self.new_values

    def kept_stacked(self, dtype: torch.dtype, sources: tuple) -> Optional[tuple]:
        """The kept entry ``(sources, stamp, StackedBase, StackedGroup)`` in ``dtype`` if it was built
        from ``sources`` (:meth:`stack_sources`, a frozen bank's) as they are now, else None. Under
        ``torch.compile``, which reads no versions: built from the same objects."""
        entry = self._stacked.get(dtype)
        if entry is None:
            return None
        kept = entry[0]  # (built from a frozen bank: sources with trainable rows are other objects)
        if not (kept[0] is sources[0] and kept[1] is sources[1] and kept[2] is sources[2]
                and kept[3] is sources[3] and kept[4] is sources[4] and kept[5] is sources[5]):
            return None
        if torch.compiler.is_compiling():
            return entry
        stamp = _stamp(sources, self.new_value_scale)
        return entry if stamp is not None and entry[1] == stamp else None

    def routing_now(self, num_atoms: int) -> Tuple[int, Optional[float]]:
        """``(k, gate)`` of a call now on a bank of ``num_atoms``: :attr:`effective_topk`, and the eval
        gate ``delta`` (None in training mode or where ``threshold`` is 0)."""
        gate = self.threshold if (not self.training and self.threshold > 0) else None  # step 5 at inference
        return (num_atoms if self.topk is None else min(max(self.topk, 2), num_atoms)), gate  # effective_topk

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

    def read(self, x: torch.Tensor, weight: Optional[torch.Tensor] = None,
             bias: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Steps 1-6 for every token of ``x`` ``[..., in_features]``: ``[..., out_features]`` in the
        compute dtype (autocast's, else ``x``'s).

        With ``weight`` / ``bias`` (a base's) the result is ``W x + b + sum_i w_i p_i B_i`` (the base
        fused into the atoms' output); without, the atoms' term ``sum_i w_i p_i B_i`` alone. The eval
        gate applies in eval mode (``threshold > 0``); activation statistics are recorded while
        :attr:`recording`.
        """
        plan = None if torch.compiler.is_compiling() else self._plan  # (a graph holds its own decisions)
        if plan is not None:
            if plan.applies(self, x, weight, bias):  # the last planned call again: its decisions hold
                return plan.read(x)
            self._plan = None
        num_atoms = self.num_atoms
        dtype = compute_dtype(x)
        tokens = tokens_of(x, dtype)
        k, gate = self.routing_now(num_atoms)
        stacked = num_atoms and self.stacks_base(weight) and self.path(tokens, num_atoms, k, gate is not None, True)
        base = stacked and self.stacked_base(dtype, weight, bias)
        if base:  # the base and the keys in one GEMM (no backward follows)
            out, idx, weights = stacked(tokens, base, k, self.temperature, gate, self.recording)
            if not torch.compiler.is_compiling() and plannable(type(self)):  # (a graph plans nothing)
                self._plan = EvalPlan.of(self, x, dtype, weight, bias, stacked, base, k, gate,
                                         type(self).stacks_base is not MoRAMRouting.stacks_base)
        else:
            cast_weight, cast_bias = (weight, bias) if weight is None else self.base_in(dtype, weight, bias)
            if num_atoms == 0:  # nothing to route: the base alone, or no term
                out = (F.linear(tokens, cast_weight, cast_bias) if weight is not None
                       else tokens.new_zeros(tokens.shape[0], self.out_features))
                return out.reshape(*x.shape[:-1], self.out_features)
            out, idx, weights = self.mixture(tokens, cast_weight, cast_bias, k, gate)
            if (registered(self, "new_keys", "_parameters") is None  # (first: a bank with trainable rows is never planned)
                    and (weight is None or not self.keep_base_cast) and not torch.is_grad_enabled()
                    and not torch.compiler.is_compiling() and plannable(type(self))):
                self._plan = EvalPlan.apart(self, x, dtype, weight, bias, self.path(tokens, num_atoms, k, gate is not None),
                                            k, gate, type(self).stacks_base is not MoRAMRouting.stacks_base)
        if self.recording:
            self.record(idx, weights)
        return out if x.dim() == 2 else out.reshape(*x.shape[:-1], out.shape[-1])

    def check_input(self, x: torch.Tensor) -> None:
        """A floating-point ``[..., in_features]`` input, or a clear error."""
        if not x.is_floating_point():
            raise TypeError(f"{type(self).__name__} expects a floating-point input (like the nn.Linear it "
                            f"wraps), got {x.dtype}: convert it first, e.g. x.float()")
        if x.dim() == 0 or x.shape[-1] != self.in_features:
            raise ValueError(f"{type(self).__name__} takes inputs [..., in_features={self.in_features}], "
                             f"got {tuple(x.shape)}")

    def read_dropped(self, x: torch.Tensor, dropout: nn.Module) -> torch.Tensor:
        """The atoms' term of steps 1-6 on ``dropout(x)`` (:meth:`read` without a base): the language
        models' layer, which reads its atoms on a dropout of its input.

        Where ``dropout`` is a plain ``nn.Dropout`` in training mode (no hooks, no forward of its
        own, not in place) and
        the draw can be made again (:func:`~moram_avalanche.layers.moram.dropped.replayable`), the
        backward keeps ``x`` and the generator's state (CUDA: nothing else) or the dropout's noise
        (the CPU) instead of the dropped tokens and the mask, and makes them again
        (:mod:`~moram_avalanche.layers.moram.dropped`): the same numbers
        as ``read(dropout(x))``, forward and backward, at a fraction of the memory. Anywhere else
        (no grad, under ``torch.compile``, which keeps what its own graph needs), or for a class
        with its own :meth:`mixture` (the ablations' autograd path), it is ``read(dropout(x))``."""
        num_atoms = self.num_atoms
        if (type(dropout) is not nn.Dropout or not dropout.training or dropout.inplace or hooked(dropout)
                or "forward" in dropout.__dict__  # (a forward set on the instance, as accelerate's hooks do)
                or not (x.requires_grad or redrawn(x))  # (autograd keeps only d then: as little as the noise)
                or not num_atoms or type(self).mixture is not MoRAMRouting.mixture
                or not replayable(x, dropout.p) or not torch.is_grad_enabled() or torch.compiler.is_compiling()):
            return self.read(dropout(x))
        dtype = compute_dtype(x)
        dropped, how, kept = DropoutDraw.of(x, dropout.p, dtype)
        tokens = how.tokens(dropped)
        del dropped
        k, gate = self.routing_now(num_atoms)
        out, idx, weights = self.mixture(tokens, None, None, k, gate, DroppedTokens(x, how, kept))
        if self.recording:
            self.record(idx, weights)
        return out if x.dim() == 2 else out.reshape(*x.shape[:-1], out.shape[-1])

    def mixture(self, tokens: torch.Tensor, weight: Optional[torch.Tensor], bias: Optional[torch.Tensor],
                k: int, threshold: Optional[float], dropped: Optional[DroppedTokens] = None):
        """Steps 1-6 on ``tokens`` ``[N, d_in]``: ``(y [N, d_out], idx, weights)``.

        ``weight`` / ``bias`` are the base's (None: ``y`` is the atoms' term alone);
        ``threshold`` is the eval gate ``delta`` or None. The path that runs the steps is the
        chooser's, asked once and kept (:meth:`path`; each computes
        steps 1-6 without autograd and attaches a hand-written backward: gradients for the
        trainable atoms, the tokens, and ``W``, ``b`` where they require it). ``idx`` ``[N, k]`` and
        ``weights`` ``[N, k]`` are the kept atoms and their weights, or ``idx`` None and ``weights``
        dense ``[N, R]`` (what :meth:`record` reads). ``dropped``: the tokens are a dropout of the
        layer's input, which the backward keeps instead (:meth:`read_dropped`; no base then).
        """
        bank = self.rows(tokens.dtype)                        # A, B joined in the compute dtype, kept
        mixture = self.path(tokens, bank.keys.shape[0], k, threshold is not None)
        return mixture(tokens, weight, bias, bank, k, self.temperature, threshold, self.recording, dropped)

    def path(self, tokens: torch.Tensor, num_atoms: int, k: int, gated: bool, stacked: bool = False):
        """The chosen path's mixture for ``tokens`` (:func:`~moram_avalanche.layers.moram.paths.choice.mixture_for`;
        ``stacked``: its form over the stacked base and keys, or None where it has none),
        chosen once per device, dtype, bank size, ``k``, gate and form and kept until the switch's
        :func:`~moram_avalanche.layers.moram.paths.switch.token` changes (``use_path``, the
        variable set, the CPU kernel built): no ``os.environ`` read and no choice in a call that
        reuses it."""
        switch_token = traced_token() if torch.compiler.is_compiling() else token()
        key = (tokens.device, tokens.dtype, num_atoms, k, gated, stacked)
        chosen = self._path
        if chosen is None or chosen[0] is not switch_token:
            chosen = self._path = (switch_token, {})
        mixture = chosen[1].get(key)
        if mixture is None and key not in chosen[1]:  # (a kept None: no stacked form on this path)
            mixture = chosen[1][key] = choice.mixture_for(tokens, num_atoms, k, gated, stacked)
        return mixture


class MoRAMLinear(MoRAMRouting, MoRAMBank):
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

    def __init__(self, base: nn.Linear, atoms_per_task: int = PAPER_CLIP.atoms_per_task,
                 topk: Optional[int] = PAPER_CLIP.topk, temperature: Optional[float] = PAPER_CLIP.temperature,
                 threshold: float = PAPER_CLIP.threshold) -> None:
        options = routing_options(atoms_per_task, topk, temperature, threshold)
        super().__init__(base, options["atoms_per_task"])
        self.init_routing(options)
        # a base whose call is a plain F.linear is fused into the atoms' read-out (fuses_base, asked
        # at each call); others (a quantised subclass, a hooked or offloaded base) run their own call
        # and the atoms' term is added. False: never fused.
        self.fuse_base = True

    def fuses_base(self) -> bool:
        """Whether this call reads the base's weight and bias into the atoms' read-out
        (``W x + b`` and the atoms' term in one output, steps 1-6) instead of calling the base:
        :attr:`fuse_base` and a base whose call is a plain ``F.linear``
        (:func:`~moram_avalanche.layers.moram.hooks.plain_linear`: no subclass's or instance's
        ``forward``, no hook), asked at each call."""
        return self.fuse_base and plain_linear(self._modules["base"])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``y = W x + b + sum_i w_i p_i B_i`` for every token of ``x`` ``[..., in_features]`` (steps 1-6)."""
        if not torch.compiler.is_compiling():  # the last planned call again (read's); a graph holds its own
            own = self.__dict__  # (each nn.Module attribute lookup costs about 0.4k instructions: read once)
            plan = own["_plan"]
            if plan is not None and own["fuse_base"]:
                base = own["_modules"]["base"]
                out = plan.read_over(self, x, base) if plain_linear(base) else None  # (fuses_base)
                if out is not None:
                    return out
        base = self._modules["base"]  # (self.base, without nn.Module.__getattr__: as the planned section reads it)
        if not x.is_floating_point() or x.dim() == 0 or x.shape[-1] != base.in_features:
            self.check_input(x)  # the clear error
        if self.num_atoms == 0:
            return base(x)
        if self.fuses_base():
            return self.read(x, *weight_and_bias(base))
        base_out = base(x)
        return base_out + self.read(x).to(dtype=base_out.dtype)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"atoms={self.num_frozen}/{self.num_atoms} (frozen/total), topk={self.topk}, "
            f"temperature={self.temperature}, threshold={self.threshold}"
        )


class MoRAMAtoms(MoRAMRouting, AtomBank):
    """One bank of atoms with its routing options and no base (module docstring).

    Args:
        in_features, out_features: the widths of the keys and the values.
        like: a tensor on the device and of the dtype the bank is made in.
        atoms_per_task, topk, temperature, threshold: as :class:`MoRAMLinear`.

    :meth:`read` is the atoms' term ``sum_i w_i p_i B_i`` of steps 1-6 (or, given a base's
    weight and bias, the whole layer's output); the host adds it to its base's output. State
    dict: :class:`~moram_avalanche.layers.moram.bank.AtomBank`'s.
    """

    def __init__(self, in_features: int, out_features: int, like: torch.Tensor,
                 atoms_per_task: int = PAPER_CLIP.atoms_per_task, topk: Optional[int] = PAPER_CLIP.topk,
                 temperature: Optional[float] = PAPER_CLIP.temperature,
                 threshold: float = PAPER_CLIP.threshold) -> None:
        options = routing_options(atoms_per_task, topk, temperature, threshold)
        super().__init__(in_features, out_features, options["atoms_per_task"], like)
        self.init_routing(options)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The atoms' term for every token of ``x`` ``[..., in_features]`` (:meth:`read`)."""
        if not x.is_floating_point() or x.dim() == 0 or x.shape[-1] != self.in_features:
            self.check_input(x)
        return self.read(x)

    def extra_repr(self) -> str:
        return (f"{super().extra_repr()}, topk={self.topk}, temperature={self.temperature}, "
                f"threshold={self.threshold}")


def keep_base_casts(module: nn.Module, keep: bool = True) -> int:
    """Set :attr:`MoRAMRouting.keep_base_cast` on every MoRAM layer in ``module``; returns how many.

    Memory for speed, on the layers' frozen base weights:

    * with a backward (training), under bf16 autocast: the weight and bias kept cast, two casts
      fewer per call (as many as ``nn.Linear`` makes), at the memory of the weights in bf16;
    * without one (``torch.no_grad()``, inference mode: evaluation, generation), on the GPU paths
      (``dense``, ``triton``), for a frozen bank: the weight stacked with the bank's keys,
      ``[W; A]``, in the compute dtype (:mod:`~moram_avalanche.layers.moram.stacked`), so the base
      and step 1 are one GEMM that reads the tokens once (each call after the first repeats the
      first's decisions after one check, :mod:`~moram_avalanche.layers.moram.plan`, as a call that
      reads the base apart does too). In float32 this is a float32 copy of each weight (plus ``R``
      rows). A bank with trainable rows keeps the cast weight, as with a backward.

    A layer keeps one of the two copies at a time (per compute dtype), built again when its
    tensors change. Leave it off where the weights are sharded and gathered per call (FSDP: the
    copy would hold the whole weight) or where memory is short.
    """
    layers = [layer for layer in module.modules() if isinstance(layer, MoRAMRouting)]
    for layer in layers:
        if layer.keep_base_cast != bool(keep):  # (asked again, a layer keeps its copies: each is checked per call)
            layer.keep_base_cast = bool(keep)
            layer._base_casts, layer._stacked, layer._plan = {}, {}, None
    return len(layers)


def forget_copies(module: nn.Module) -> int:
    """Drop every copy the MoRAM layers in ``module`` keep (the bank's cast rows, the base's kept cast
    or stacked copy, the plan reading them: :meth:`MoRAMRouting.forget_copies`); returns how many
    layers. Each layer makes what it needs again at its next call.

    A layer sees a change of the tensors a copy was made from by their versions, data pointers,
    shapes, strides and dtypes: an edit in place through the tensor itself (``copy_``, ``mul_``,
    ``load_state_dict``, an optimizer's step on the parameter) or its ``.data`` swapped. An edit in
    place through ``.data`` (``weight.data.mul_(2)``: ``.data`` is another tensor, with a version
    counter of its own) moves none of them, nor does a kernel writing the storage directly: call
    this after such an edit of a frozen bank, or of a base whose copy is kept
    (:func:`keep_base_casts`)."""
    layers = [layer for layer in module.modules() if isinstance(layer, MoRAMRouting)]
    for layer in layers:
        layer.forget_copies()
    return len(layers)


def keep_stacked(layers, sources, dtype: torch.dtype) -> StackedGroup:
    """Stack the bases and banks of ``layers`` (MoRAM layers reading the same input; ``sources``: each
    one's :meth:`~MoRAMRouting.stack_sources`) in ``dtype`` as ONE copy
    (:func:`~moram_avalanche.layers.moram.stacked.stack_bases`); each layer keeps its part, a view,
    in place of any copy of its base it held (one copy at a time)."""
    with torch.no_grad(), normal_tensors():
        banks = [layer.rows(dtype) for layer in layers]  # the bank a forward reads (values scaled)
        group = stack_bases([(kept[0], kept[1], bank.keys, bank.values) for kept, bank in zip(sources, banks)], dtype)
    for layer, kept, part in zip(layers, sources, group.parts):
        layer._base_casts.pop(dtype, None)  # the plain cast goes, and a copy of other tensors or another dtype
        layer._stacked.clear()
        layer._stacked[dtype] = (kept, _stamp(kept, layer.new_value_scale), part, group)
        layer._plan = None  # (a plan reads the copy it was made with)
    return group


#: what a planned call (:mod:`~moram_avalanche.layers.moram.plan`) skips of the long way: a class with
#: its own version of any of these is never planned
PLANNED_METHODS = ("read", "routing_now", "path", "mixture", "stacked_base", "stack_sources", "kept_stacked",
                   "base_in", "check_input")
_PLANNABLE = {}  # class -> plannable(class)


def plannable(host: type) -> bool:
    """Whether calls of a layer of class ``host`` may be planned: it keeps :class:`MoRAMRouting`'s
    :data:`PLANNED_METHODS` and the bank's ``rows`` and ``num_atoms`` (asked once per class)."""
    found = _PLANNABLE.get(host)
    if found is None:
        found = _PLANNABLE[host] = (
            all(getattr(host, name, None) is getattr(MoRAMRouting, name) for name in PLANNED_METHODS)
            and getattr(host, "rows", None) is AtomStore.rows and getattr(host, "num_atoms", None) is AtomStore.num_atoms)
    return found


def _stamp(tensors, scale: float) -> Optional[tuple]:
    """What an in-place edit, a swapped storage or a resized or transposed ``.data`` of ``tensors`` changes
    (:func:`~moram_avalanche.layers.moram.bank.stamp_of`), and the trainable values' ``scale``; None
    where a tensor has no storage (a ``torch.func`` transform's wrapper: no copy is kept of it)."""
    try:
        return tuple([None if t is None else stamp_of(t) for t in tensors]) + (scale,)
    except RuntimeError:  # "Cannot access data pointer of Tensor that doesn't have storage"
        return None


# route: steps 2-5 in PyTorch (paths.reference), a name of 0.6's layers.moram module
__all__ = ["MoRAMAtoms", "MoRAMLinear", "MoRAMRouting", "PLANNED_METHODS", "compute_dtype", "forget_copies", "keep_base_casts",
           "keep_stacked", "plannable", "route", "routing_options", "tokens_of", "weight_and_bias"]
