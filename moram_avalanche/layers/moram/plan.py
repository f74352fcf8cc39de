"""A MoRAM layer's eval call without a backward, decided once and repeated: the host cost of a call.

On a GPU a bf16 call of a 768-wide layer, and every layer of a language model's decode step, is
host-bound: its kernels take less time than the Python that launches them (issue "GPU path II",
items 1 and 7). Most of that Python re-derives, at every call, what a repeat of the same call
cannot change: the compute dtype, ``k`` and the eval gate, the kept path, the bank's size, the
kept copies' checks, each read through ``nn.Module`` attribute lookups of about half a
microsecond (``scripts/bench_call.py --pieces`` prints them).

:class:`EvalPlan` is what one eval call over a FROZEN bank decided, of either kind:

* over the stacked base and keys (:mod:`~moram_avalanche.layers.moram.stacked`: the base's copy
  kept, :func:`~moram_avalanche.layers.moram.layer.keep_base_casts`; :meth:`EvalPlan.of`), repeated
  by :class:`~moram_avalanche.layers.moram.paths.dense.StackedRepeat`;
* reading the base apart, cast at each call where it is in another dtype (the default: its copy
  not kept), or no base (:meth:`EvalPlan.apart`), repeated by
  :class:`~moram_avalanche.layers.moram.paths.dense.ApartRepeat` over the bank's kept rows
  (:meth:`~moram_avalanche.layers.moram.bank.AtomStore.frozen_bank`) with the path's mixture.

The layer keeps it (:meth:`~moram_avalanche.layers.moram.layer.MoRAMRouting.read`), and the next call
repeats it after one check (:meth:`EvalPlan.applies`) that every input of those decisions is as it was:

* the call: grad mode off, not inside ``torch.compile``, the path switch's
  :func:`~moram_avalanche.layers.moram.paths.switch.token`, the input's dtype, device and width,
  autocast's state for that device;
* the layer: the same base tensors and bank rows (identity, read from the module's registries,
  none shadowed in its own dictionary); the versions, data pointers, shapes, strides and dtypes
  (``copy_``, ``.to()``, a swapped, resized or transposed ``.data``) of what a kept copy was made
  from: the bank's rows, and the base where the call read it stacked (a base read apart is read
  at each call: its shape and dtypes, which decide the output's width and the cast); the kept copy
  the call read itself (the stacked copy, or the frozen bank's rows), whether the base's copy is
  kept (where the call read a base), the training flag, the routing options and the trainable
  values' scale (the same objects), recording off, and, where its class has its own,
  :meth:`stacks_base` (a subclass's say).

Anything else, and the call goes the long way, which plans again where it ends on a frozen bank.
The repeat computes exactly what the long way computes (same path, same tensors, same arguments):
only the checks are fewer. A class with its own version of a method the repeat skips (``read``,
``routing_now``, ``path``, ``mixture``, the kept copies', the bank's ``rows`` and size) is never
planned (:func:`~moram_avalanche.layers.moram.layer.plannable`). Under ``torch.compile`` there is no
plan (a graph holds its own decisions). Pure torch.
"""

from __future__ import annotations

from typing import Callable, Optional

import torch

from .bank import ROW_NAMES as ROWS
from .bank import stamp_of
from .paths.dense import apart_repeat, stacked_repeat
from .paths.switch import token
from .stacked import StackedBase


class EvalPlan:
    """What a layer's eval call decided (module docstring); built by :meth:`EvalPlan.of` (a stacked
    call) or :meth:`EvalPlan.apart` (a call that read the base apart)."""

    __slots__ = ("switch", "device", "device_type", "x_dtype", "autocast", "dtype", "in_features", "training",
                 "options", "weight", "bias", "buffers", "parameters", "rows", "stamps", "base_form", "stacks", "kept_base", "kept",
                 "entry", "asks", "tail", "steps")

    @classmethod
    def of(cls, layer, x: torch.Tensor, dtype: torch.dtype, weight: torch.Tensor, bias: Optional[torch.Tensor],
           mixture: Callable, stacked: StackedBase, k: int, gate: Optional[float], asks: bool) -> Optional["EvalPlan"]:
        """The plan of ``layer``'s call on ``x`` that just read ``stacked`` (its kept copy in ``dtype``)
        with ``mixture``, ``k`` and ``gate``; None where a repeat could not be checked cheaply (the
        bank's rows are not in the module's dictionaries, as under FSDP; recording). Not called under
        ``torch.compile`` (a graph holds its own decisions).
        ``asks``: the layer's class has its own ``stacks_base``, asked again at each repeat (else
        its ``keep_base_cast`` is read, the rest of the base class's answer being the plan's own checks)."""
        if x.dtype is torch.float64 and dtype is not torch.float64:
            return None  # (float64 under autocast: the long way casts the tokens, autocast never does)
        entry = layer._stacked.get(dtype)
        if entry is None or entry[2] is not stacked:
            return None
        plan = cls.made(layer, x, dtype, weight, bias, True, layer._stacked, entry, asks)
        if plan is not None:
            plan.steps = stacked_repeat(mixture, stacked, k, layer.temperature, gate)  # (what a repeat runs)
        return plan

    @classmethod
    def apart(cls, layer, x: torch.Tensor, dtype: torch.dtype, weight: Optional[torch.Tensor],
              bias: Optional[torch.Tensor], mixture: Callable, k: int, gate: Optional[float],
              asks: bool) -> Optional["EvalPlan"]:
        """The plan of ``layer``'s call on ``x`` that just read its FROZEN bank with ``mixture`` (the
        path's, :meth:`~moram_avalanche.layers.moram.layer.MoRAMRouting.path`), ``k`` and ``gate``,
        and the base ``weight`` / ``bias`` apart, cast to ``dtype`` at each call (its copy not kept:
        ``keep_base_cast`` off, the default), or no base; None where a repeat could not be checked
        cheaply (:meth:`of`) or the bank has trainable rows (a copy of them could go stale unseen:
        :meth:`~moram_avalanche.layers.moram.layer.MoRAMRouting.stacked_base`). ``asks``: as :meth:`of`."""
        if weight is not None and layer.keep_base_cast:
            return None  # (the base's kept copy is read by base_in: not this plan's call)
        entry = layer._cast_rows.get(dtype)  # (the frozen bank as the call read it: AtomStore.frozen_bank)
        if entry is None:
            return None
        plan = cls.made(layer, x, dtype, weight, bias, False, layer._cast_rows, entry, asks)
        if (plan is not None and plan.rows[2] is None and plan.rows[3] is None
                and entry[0] is plan.rows[0] and entry[1] is plan.rows[1]):  # (the rows the call read: kept)
            plan.steps = apart_repeat(mixture, entry[3], k, layer.temperature, gate, dtype, weight, bias,
                                      plan.device_type if plan.autocast else None)
            return plan
        return None

    @classmethod
    def made(cls, layer, x: torch.Tensor, dtype: torch.dtype, weight: Optional[torch.Tensor],
             bias: Optional[torch.Tensor], stacks: bool, kept: dict, entry: tuple, asks: bool) -> Optional["EvalPlan"]:
        """A plan (without its steps) of ``layer``'s call on ``x`` in ``dtype`` over ``weight`` /
        ``bias``, reading ``entry`` of the layer's ``kept`` copies (its stacked copies where
        ``stacks``, else its frozen bank's); None where it could not be checked cheaply (:meth:`of`)."""
        if layer.recording or torch.is_grad_enabled():
            return None
        own = layer.__dict__
        if ROWS[0] in own or ROWS[1] in own or ROWS[2] in own or ROWS[3] in own:
            return None
        buffers, parameters = layer._buffers, layer._parameters
        rows = (buffers.get("frozen_keys"), buffers.get("frozen_values"),
                parameters.get("new_keys"), parameters.get("new_values"))
        if (rows[0] is not layer.frozen_keys or rows[1] is not layer.frozen_values
                or rows[2] is not layer.new_keys or rows[3] is not layer.new_values):
            return None
        plan = cls()
        device_type = x.device.type
        plan.switch, plan.device, plan.device_type, plan.x_dtype = token(), x.device, device_type, x.dtype
        plan.autocast = torch.is_autocast_enabled(device_type)
        plan.dtype, plan.in_features, plan.tail, plan.training = dtype, x.shape[-1], (layer.out_features,), layer.training
        plan.options = (layer.topk, layer.temperature, layer.threshold, layer.new_value_scale)
        plan.weight, plan.bias, plan.buffers, plan.parameters, plan.rows = weight, bias, buffers, parameters, rows
        # what a copy was made from is stamped (bank.stamp_of): the bank's rows, and the base where the
        # call read it stacked; a base read apart is read live at each call, where its dtype decides
        # the cast and its out-features the output's width (base_form)
        stamped = (weight, bias) + rows if stacks else rows
        try:
            plan.stamps = tuple((t, *stamp_of(t)) for t in stamped if t is not None)
            # (nor over a base read apart, unstamped, that has no storage: a wrapper of one call)
            for t in () if stacks else (weight, bias):
                if t is not None:
                    t.data_ptr()
        except RuntimeError:  # a tensor without storage (a torch.func transform's wrapper): nothing to check
            return None
        plan.base_form = None if stacks or weight is None else (
            weight.shape, weight.dtype, None if bias is None else bias.dtype)
        plan.stacks, plan.kept, plan.entry, plan.asks = stacks, kept, entry, asks
        plan.kept_base = None if weight is None else stacks  # (the base's copy read kept, cast at the call, or no base)
        return plan

    def applies(self, layer, x: torch.Tensor, weight: Optional[torch.Tensor], bias: Optional[torch.Tensor]) -> bool:
        """Whether a call of ``layer`` on ``x`` over ``weight`` / ``bias`` would decide as this plan did
        (module docstring: every input of its decisions as it was). Not asked under ``torch.compile``
        (the layer does not read its plan there)."""
        if (torch.is_grad_enabled() or x.dtype is not self.x_dtype or weight is not self.weight
                or bias is not self.bias or token() is not self.switch or x.dim() == 0
                or x.shape[-1] != self.in_features or x.device != self.device):
            return False
        autocast = torch.is_autocast_enabled(self.device_type)
        if autocast != self.autocast or (autocast and torch.get_autocast_dtype(self.device_type) != self.dtype):
            return False
        options, stacks = self.options, self.stacks  # (options by identity: 4.0 set for 4 is news)
        # the layer's attributes from its instance dictionary, where the layer's __init__ puts them
        # (nn.Module's __getattr__ makes each attribute lookup cost about 0.4k instructions)
        own = layer.__dict__
        try:
            # (not keep_base_cast) is kept_base: a stacked call's copy no longer kept, or a call apart's
            # now kept (base_in would read it); a call without a base reads neither (kept_base None)
            if (own["training"] != self.training or own["_recording"] or (not own["keep_base_cast"]) is self.kept_base
                    or own["_stacked" if stacks else "_cast_rows"] is not self.kept
                    or self.kept.get(self.dtype) is not self.entry
                    or own["topk"] is not options[0] or own["temperature"] is not options[1]
                    or own["threshold"] is not options[2] or own["new_value_scale"] is not options[3]):
                return False
        except KeyError:  # (one deleted: the long way reads the attribute, or raises as it would)
            return False
        if self.asks and (not layer.stacks_base(weight)) is stacks:
            return False
        buffers, parameters, rows = self.buffers, self.parameters, self.rows
        if (buffers.get("frozen_keys") is not rows[0] or buffers.get("frozen_values") is not rows[1]
                or parameters.get("new_keys") is not rows[2] or parameters.get("new_values") is not rows[3]
                or ROWS[0] in own or ROWS[1] in own or ROWS[2] in own or ROWS[3] in own):
            return False
        for tensor, version, pointer, shape, strides, dtype in self.stamps:  # stamp_of, inline (None: an inference tensor's)
            if (version is not None and tensor._version != version) or tensor.data_ptr() != pointer \
                    or tensor.shape != shape or tensor.stride() != strides or tensor.dtype is not dtype:
                return False
        form = self.base_form  # (a base read apart: its out-features and dtypes as the plan's)
        return form is None or not (weight.shape != form[0] or weight.dtype is not form[1]
                                    or (bias is not None and bias.dtype is not form[2]))

    def read_over(self, layer, x: torch.Tensor, base: torch.nn.Module) -> Optional[torch.Tensor]:
        """The planned call on ``x`` over ``base``'s weight and bias (a host's repeat:
        :class:`~moram_avalanche.layers.moram.layer.MoRAMLinear`, the peft layer), or None where
        :meth:`applies` says no or the base's parameter table may not say what ``base.weight`` /
        ``base.bias`` give (either name missing from it, deleted and then set as a plain tensor or
        a buffer, or shadowed in the base's own dictionary): the caller then takes the long way,
        which reads the attributes. (The table because ``nn.Module`` attribute lookups cost about
        half a microsecond each.)"""
        own = base.__dict__
        parameters = own["_parameters"]
        if "weight" not in parameters or "bias" not in parameters or "weight" in own or "bias" in own:
            return None
        if not self.applies(layer, x, parameters["weight"], parameters["bias"]):
            return None
        return self.read(x)

    def read(self, x: torch.Tensor) -> torch.Tensor:
        """The planned call on ``x`` (after :meth:`applies`): steps 1-6 as the layer's
        :meth:`~moram_avalanche.layers.moram.layer.MoRAMRouting.read` computes them, on the token
        rows of ``x`` (its ``steps``), the output made in ``x``'s leading shape (no reshape of it
        after). A stacked call's steps never cast the tokens: without
        autocast they are in the compute dtype already, and under autocast the stacked GEMM
        (``addmm``, on autocast's list of lower-precision operators on the CPU and CUDA) casts them
        to it, the only place the stacked call reads them; a call apart casts them
        (:class:`~moram_avalanche.layers.moram.paths.dense.ApartRepeat`), as the long way does."""
        if x.dim() == 2:
            return self.steps(x)
        return self.steps(x.reshape(-1, self.in_features), x.shape[:-1] + self.tail)  # (made in its shape)


__all__ = ["EvalPlan"]
