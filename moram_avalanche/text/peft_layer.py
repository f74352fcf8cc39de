"""MoRAM's peft tuner layer: a base module and one bank of atoms per named adapter.

The layer follows the conventions of peft's tuner layers (``peft/tuners/tuners_utils.py``
``BaseTunerLayer``; ``peft/tuners/lora/layer.py`` ``LoraLayer`` is the model):

* the wrapped module is ``base_layer`` (so every full state dict names the base weights
  ``...base_layer.weight``, and peft's ``get_base_model_state_dict`` strips it);
* the per-adapter state lives in containers keyed by the adapter name, named with the tuner's
  prefix: ``moram_bank[name]`` (a :class:`~moram_avalanche.layers.moram.layer.MoRAMAtoms`: the bank,
  its routing options, steps 1-6) and ``moram_dropout[name]`` (dropout on the atoms' input), so
  parameters read ``...q_proj.moram_bank.default.new_keys``; ``adapter_layer_names`` and
  ``other_param_names`` name those containers, which is what peft's ``set_adapter``,
  ``delete_adapter``, ``enable_adapters`` and ``set_requires_grad`` walk;
* every active adapter adds its term to the base's output (LoRA's rule for several active
  adapters); each bank routes over its own atoms only.

Bases: ``nn.Linear`` and its subclasses (bitsandbytes' ``Linear4bit`` / ``Linear8bitLt`` are
``nn.Linear`` subclasses with their own, quantised forward), and transformers' ``Conv1D``
(GPT-2's projections; its weight is ``[in, out]``). A plain ``nn.Linear`` with one active adapter
whose compute dtype is the base's, or whose float32 / float16 / bfloat16 weight autocast would cast
(:func:`fusable`), hands its weight to the bank (the base fused into the atoms' read-out, as
:class:`~moram_avalanche.layers.moram.layer.MoRAMLinear` does); other bases run their own forward and
the atoms' term is added, cast to the base's output dtype.

Precision: the atoms compute in the dtype the base computes in (autocast's, else the input's),
whatever they are stored in. peft's ``autocast_adapter_dtype`` stores them in float32 on an fp16 /
bf16 base (float32 master weights and gradients, what a gradient scaler needs); the frozen rows are
cast to the compute dtype once and kept (``AtomStore.rows``), the trainable ones at each forward.
LoRA instead casts its input up to its weights' float32 (``peft/tuners/lora/layer.py``): for MoRAM
that would run the routing GEMMs in float32 beside a bf16 base and lose the fused read-out.

Nothing here is a second implementation of the method: the bank, its growth and steps 1-6 are
:mod:`moram_avalanche.layers`' (:class:`~moram_avalanche.layers.moram.layer.MoRAMAtoms`).
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import torch
from peft.tuners.tuners_utils import BaseTunerLayer
from torch import nn
from transformers.pytorch_utils import Conv1D

from ..layers.moram.hooks import plain_call, plain_linear
from ..layers.moram.layer import MoRAMAtoms, compute_dtype
from ..layers.moram.paths.dense import autocast_casts

#: the error a merge of MoRAM into the base weights raises, and why (the update depends on the input)
MERGE_REFUSED = (
    "MoRAM cannot be merged into the base weights: its update sum_i w_i(x) B_i A_i x depends on "
    "the input through the routing weights w(x) (top-k, softmax, eval gate), so it is no fixed "
    "matrix to add to W. Keep the adapter (PeftModel) for inference, or call unload() to get the "
    "base model back without the atoms.")


def fusable(x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor]) -> bool:
    """Whether a plain ``nn.Linear`` base's ``weight`` / ``bias`` may be handed to the bank for a call
    on ``x`` (the base fused into the atoms' read-out, one rounding to the compute dtype): where the
    base computes in its own dtype, and under autocast where ``F.linear`` would cast the base and
    ``x`` to autocast's dtype itself (a float32, float16 or bfloat16 base and input, on the CPU or
    CUDA: an fp32 model under ``Trainer(bf16=True)``), which the bank's read does as well. Anything
    else (a float64 input or base under autocast, a base in another dtype than a plain input) runs
    the base's own forward, which computes or refuses it as LoRA's base would."""
    if compute_dtype(x) == weight.dtype:
        return True
    device_type = x.device.type
    return autocast_casts(device_type, x, weight, bias) and torch.is_autocast_enabled(device_type)


def base_features(base: nn.Module, name: str = "target") -> Tuple[int, int]:
    """``(in_features, out_features)`` of a base MoRAM can wrap, else a TypeError naming what can."""
    if isinstance(base, nn.Linear):
        return base.in_features, base.out_features
    if isinstance(base, Conv1D):
        shape = getattr(base.weight, "ds_shape", None) or base.weight.shape  # [in, out] (DeepSpeed: ds_shape)
        return int(shape[0]), int(shape[1])
    raise TypeError(
        f"MoRAM wraps torch.nn.Linear layers (bitsandbytes' 4-bit and 8-bit linears included) and "
        f"transformers' Conv1D, but {name} is {type(base).__name__}; choose target_modules that name "
        "such layers (e.g. the attention's query and key projections)")


def base_template(base: nn.Module) -> torch.Tensor:
    """An empty tensor on the base's device, of the floating dtype its atoms are made in: the
    weight's, or for a quantised weight the layer's ``compute_dtype`` (bitsandbytes 4-bit) or
    float32 (peft's ``_get_base_layer_device_and_dtype`` reads the same attributes)."""
    weight = base.weight
    dtype = weight.dtype
    if not dtype.is_floating_point:
        dtype = getattr(base, "compute_dtype", None) or torch.float32
    return torch.empty(0, device=weight.device, dtype=dtype)


class MoRAMTunerLayer(nn.Module, BaseTunerLayer):
    """A base module plus one MoRAM bank per named adapter (module docstring).

    Args:
        base_layer: the module to wrap (``nn.Linear``, a bitsandbytes linear, or ``Conv1D``).
        adapter_name: the first adapter's name.
        config: its :class:`~moram_avalanche.text.peft_method.MoRAMConfig`.
    """

    adapter_layer_names = ("moram_bank",)
    other_param_names = ("moram_dropout",)

    def __init__(self, base_layer: nn.Module, adapter_name: str, config, **kwargs) -> None:
        super().__init__()
        self.in_features, self.out_features = base_features(base_layer)
        self.base_layer = base_layer
        self.moram_bank = nn.ModuleDict()
        self.moram_dropout = nn.ModuleDict()
        self._disable_adapters = False
        self.merged_adapters = []
        self._active_adapter = adapter_name
        self._repeat = None  # the last call its bank's plan served (repeat_read)
        # a base whose call is a plain F.linear is fused into the atoms' read-out (hooks.plain_linear,
        # asked at each call); others (a quantised layer, a hooked or offloaded base) run their own
        # call. False: never fused.
        self.fuse_base = True
        self.update_layer(adapter_name, config)

    def update_layer(self, adapter_name: str, config) -> None:
        """Add the bank of ``adapter_name``, holding its first task's atoms (values zero unless
        ``config.init_weights`` is False: the model's outputs are unchanged until it trains)."""
        if adapter_name in self.moram_bank:
            raise ValueError(f"this layer already holds MoRAM atoms of adapter {adapter_name!r}")
        bank = MoRAMAtoms(self.in_features, self.out_features, base_template(self.get_base_layer()),
                          **config.routing_options())
        bank.values_init = "zero" if config.init_weights else "kaiming"
        bank.new_value_scale = config.new_value_scale  # the release's atom scaling, when asked for
        bank.expand()
        self.moram_bank[adapter_name] = bank
        self.moram_dropout[adapter_name] = nn.Dropout(config.dropout) if config.dropout > 0 else nn.Identity()
        self.set_adapter(self.active_adapters, inference_mode=config.inference_mode)

    # ------------------------------------------------------------------ forward
    def forward(self, x: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        if kwargs and "adapter_names" in kwargs:  # peft's mixed-adapter batch (MoRAMModel._enable_peft_forward_hooks)
            return self.mixed_batch_forward(x, *args, **kwargs)
        compiling = torch.compiler.is_compiling()  # (a graph holds its own decisions: no repeat, no side effect)
        # (a decode step calls each layer in the same state; read from the instance's dictionary, as
        # repeat_read reads the rest: each nn.Module attribute lookup costs about 0.4k instructions)
        repeat = None if compiling else self.__dict__["_repeat"]
        if repeat is not None:
            out = None if args or kwargs else self.repeat_read(x, repeat)
            if out is not None:
                return out
            self._repeat = None
        banks = [] if self.disable_adapters else self.active_banks()
        base = self._modules["base_layer"]
        if not banks:
            return base(x, *args, **kwargs)
        if not x.is_floating_point() or x.dim() == 0 or x.shape[-1] != self.in_features:
            banks[0][1].check_input(x)  # the clear error
        if len(banks) == 1 and self.fuse_base and not args and not kwargs and plain_linear(base):
            dropout, bank = banks[0]
            weight = base.weight
            if ((isinstance(dropout, nn.Identity) or not self.training) and plain_call(bank)
                    and fusable(x, weight, base.bias)):
                out = bank.read(x, weight, base.bias)  # W x + b + the atoms, one read-out
                active = self._active_adapter  # (peft keeps a name or a list of names)
                names = [active] if isinstance(active, str) else list(active)  # (a copy: compared at a repeat)
                if not compiling and bank._plan is not None and len(names) == 1:
                    self._repeat = (active if isinstance(active, str) else names, names[0], bank, dropout, base)
                return out
        result = base(x, *args, **kwargs)
        for dropout, bank in banks:  # (the dropout drawn again in the backward: MoRAMRouting.read_dropped)
            # a bank with hooks or a wrapped forward (accelerate's offload) is called, its tensors
            # loaded by its hook: on the dropped tokens, kept for the backward as autograd keeps them
            term = bank.read_dropped(x, dropout) if plain_call(bank) else bank(dropout(x))
            result = result + term.to(dtype=result.dtype)
        return result

    def mixed_batch_forward(self, x: torch.Tensor, *args, adapter_names: Sequence[str], **kwargs) -> torch.Tensor:
        """peft's mixed-adapter batch: row ``i`` of ``x`` (its first dimension) through adapter
        ``adapter_names[i]``, ``"__base__"`` for the base alone (the contract of peft's LoRA,
        ``peft/tuners/lora/layer.py``: ``_check_forward_args``, ``_mixed_batch_forward``).

        The base runs once, on every row (its own call, ``args`` and ``kwargs`` handed to it); then,
        for each distinct name of an adapter this layer holds atoms of, that adapter's bank reads
        exactly the rows with that name (its dropout applied as in :meth:`forward`: none in eval
        mode, the only mode :meth:`MoRAMModel._enable_peft_forward_hooks` allows) and its term is
        added to those rows, in the base output's dtype. Names this layer holds no atoms of, and
        ``"__base__"``, leave their rows to the base, as LoRA's layer does. With adapters disabled
        (``disable_adapter()``) every row is the base's (LoRA's ``forward`` checks that first). The
        base is never fused into a bank's read-out here and the last call's repeat
        (:meth:`repeat_read`) is neither taken nor changed.

        ``x`` may hold ``m`` rows a name, each row repeated in place: ``generate`` expands its batch
        so (``repeat_interleave``) for ``num_return_sequences`` and for beams given in a
        ``GenerationConfig``, which the model's hook cannot see (it repeats the names for a
        ``num_beams`` keyword itself, and checks the names against the batch it is given); each name
        then stands for its ``m`` rows."""
        count = x.shape[0] if x.dim() else 0
        if not adapter_names or not count or count % len(adapter_names):
            raise ValueError(f"adapter_names names {len(adapter_names)} adapters, one per row of the input, but the "
                             f"input {tuple(x.shape)} has {count} rows (its first dimension), not a multiple of "
                             f"{len(adapter_names)}: give one adapter name (or \"__base__\") per row of the batch")
        if count > len(adapter_names):  # (each row repeated in place: generate's expansions)
            adapter_names = [name for name in adapter_names for _ in range(count // len(adapter_names))]
        result = self._modules["base_layer"](x, *args, **kwargs)
        if self.disable_adapters:
            return result
        banks, dropouts = self._modules["moram_bank"]._modules, self._modules["moram_dropout"]._modules
        for name in dict.fromkeys(adapter_names):  # (distinct names, in order of first use)
            bank = banks.get(name) if name != "__base__" else None
            if bank is None or not bank.num_atoms:
                continue
            rows = torch.tensor([i for i, each in enumerate(adapter_names) if each == name], device=x.device)
            part = x.index_select(0, rows)
            if not part.is_floating_point() or part.shape[-1] != self.in_features:
                bank.check_input(part)  # the clear error
            dropout = dropouts[name]
            term = bank.read_dropped(part, dropout) if plain_call(bank) else bank(dropout(part))
            result = result.index_add(0, rows, term.to(dtype=result.dtype))
        return result

    def repeat_read(self, x: torch.Tensor, repeat: tuple) -> Optional[torch.Tensor]:
        """The last call's read again, or None where this call would not take it: the bank's planned
        eval call (:class:`~moram_avalanche.layers.moram.plan.EvalPlan`, which checks the bank, the
        base's tensors and the call's context), after checking what this layer decided besides:
        adapters enabled, the same one adapter active, the same bank, dropout and base in their
        containers, the dropout off (eval) or none, the base's call still a plain ``F.linear`` and
        the bank's its own forward (:func:`~moram_avalanche.layers.moram.hooks.plain_linear`,
        :func:`~moram_avalanche.layers.moram.hooks.plain_call`: no hook added since, say) (the
        base's tensors, their dtype and the rest:
        :meth:`~moram_avalanche.layers.moram.plan.EvalPlan.read_over`). ``repeat``: ``(the active
        adapters as peft held them (a copy), the one adapter's name, its bank, dropout, base)`` of
        the last call that :meth:`forward` ended in the bank's plan (issue "GPU path II", item 7: a
        bf16 language model's decode step calls every adapted layer this way, host-bound)."""
        active, name, bank, dropout, base = repeat
        plan = bank.__dict__["_plan"]
        own = self.__dict__  # (the attributes __init__ and peft's set_adapter set, read from it: one lookup)
        if (plan is None or own["_disable_adapters"] or own["_active_adapter"] != active
                or (own["training"] and not isinstance(dropout, nn.Identity))):
            return None
        modules = own["_modules"]
        if (modules["base_layer"] is not base or modules["moram_bank"]._modules.get(name) is not bank
                or modules["moram_dropout"]._modules.get(name) is not dropout
                or not (own["fuse_base"] and plain_linear(base, bank))):
            return None
        return plan.read_over(bank, x, base)

    def __getstate__(self):
        state = dict(super().__getstate__())  # (a copy: object's is the instance's own dictionary)
        state["_repeat"] = None  # (a copy's banks hold no plan: MoRAMRouting.__getstate__)
        return state

    def __setstate__(self, state):
        state.setdefault("_repeat", None)  # (pickled before 0.7.5)
        super().__setstate__(state)

    def _replicate_for_data_parallel(self):
        """``nn.DataParallel``'s replica, without this layer's last call (its banks are the replica's own)."""
        replica = super()._replicate_for_data_parallel()
        replica._repeat = None
        return replica

    def active_banks(self) -> List[Tuple[nn.Module, MoRAMAtoms]]:
        """``(dropout, bank)`` of every active adapter this layer holds atoms of (read at every call:
        the two ``ModuleDict`` objects' own dictionaries, no attribute lookups)."""
        banks, dropouts = self._modules["moram_bank"]._modules, self._modules["moram_dropout"]._modules
        return [(dropouts[name], banks[name]) for name in self.active_adapters
                if name in banks and banks[name].num_atoms]

    def banks(self) -> Dict[str, MoRAMAtoms]:
        """Every adapter's bank, by adapter name."""
        return dict(self.moram_bank.items())

    # ------------------------------------------------------------------ peft's protocol
    def _move_adapter_to_device_of_base_layer(self, adapter_name: str, device: Optional[torch.device] = None) -> None:
        """Move ``adapter_name``'s bank to the base's device, keeping its dtype: peft's version also
        casts to the base's dtype, which would round float32 atoms of a bf16 base (after a
        ``low_cpu_mem_usage`` load) before ``_cast_adapter_dtype`` casts them back. The tuner's
        ``_cast_adapter_dtype`` decides the dtype."""
        device = device if device is not None else base_template(self.get_base_layer()).device
        for container in (self.moram_bank, self.moram_dropout):
            if adapter_name in container:
                module = container[adapter_name]
                if not any(t.is_meta for t in (*module.parameters(), *module.buffers())):
                    container[adapter_name] = module.to(device)

    def delete_adapter(self, adapter_name: str) -> None:
        """peft's, letting go of the last call's bank (``_repeat``) with it."""
        self._repeat = None
        super().delete_adapter(adapter_name)

    def merge(self, safe_merge: bool = False, adapter_names=None) -> None:
        raise ValueError(MERGE_REFUSED)

    def unmerge(self) -> None:
        """Nothing to undo: MoRAM is never merged."""

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}"


__all__ = ["MERGE_REFUSED", "MoRAMTunerLayer", "base_features", "base_template", "fusable"]
