"""What every adapter layer of the package shares: the protocol, the frozen base, one finder, one filter.

* :class:`AdapterLayer` -- a module added to a frozen pre-trained model. It declares, in
  :attr:`~AdapterLayer.state_keys`, the entries of its ``state_dict`` that hold what it
  learned (peft's ``adapter_layer_names``). That is all a checkpoint needs: generic code
  saves (:func:`adapter_state_dict`), restores (:func:`load_adapter_state_dict`) and finds
  (:func:`find_layers`) any adapter, so no strategy lists keys of its own.
* :class:`GrowingAdapter` -- an adapter that grows with every task: :meth:`~GrowingAdapter.expand`
  freezes what it holds and adds new trainable parameters; :meth:`~GrowingAdapter.freeze`
  freezes them at the end of the task (MoRAM's atoms, MoE-LoRA's experts, MoE-Adapters'
  routers). A growing layer loads a state of any size, so a checkpoint taken after several
  tasks loads into a freshly injected model.
* :class:`LinearWrapper` -- the base of the adapters over one frozen ``nn.Linear`` (MoRAM,
  LoRA, MoE-LoRA), kept by composition as ``self.base`` (peft's ``base_layer`` pattern).

Pure torch: no Avalanche, no open_clip.
"""

from __future__ import annotations

from typing import ClassVar, Dict, Mapping, Optional, Tuple, Type, TypeVar

import torch
from torch import nn

L = TypeVar("L", bound=nn.Module)


class AdapterLayer(nn.Module):
    """Base class of every adapter layer: a module whose declared state is all it learned.

    Subclasses set :attr:`STATE_KEYS` (or override :attr:`state_keys` when it depends on how the
    layer was built). A declared key covers itself and everything below it: ``"gates"`` covers
    ``"gates.0"``, ``"gates.1"``, ...
    """

    #: state-dict entries (relative to the layer) that hold the adapter's learned state
    STATE_KEYS: ClassVar[Tuple[str, ...]] = ()

    @property
    def state_keys(self) -> Tuple[str, ...]:
        """The entries of :meth:`state_dict` a checkpoint keeps (see the class docstring)."""
        return self.STATE_KEYS

    def declares(self, key: str) -> bool:
        """Whether the local state-dict key ``key`` is part of the adapter's declared state."""
        return any(key == entry or key.startswith(entry + ".") for entry in self.state_keys)


class GrowingAdapter(AdapterLayer):
    """An adapter that grows task by task (the protocol of :mod:`moram_avalanche.strategies.plugins.growth`)."""

    def expand(self) -> int:
        """Freeze what the layer holds and add this task's trainable parameters; returns the new size."""
        raise NotImplementedError

    def freeze(self) -> None:
        """Freeze the trainable parameters added by the last :meth:`expand` (kept, no longer trained)."""
        raise NotImplementedError


class LinearWrapper(AdapterLayer):
    """Base class of the adapters over one ``nn.Linear``: holds ``base`` frozen.

    ``in_features``, ``out_features``, ``weight`` and ``bias`` are the base layer's, under the
    names code written for ``nn.Linear`` reads (open_clip reads ``c_fc.weight.dtype``).
    """

    def __init__(self, base: nn.Linear) -> None:
        super().__init__()
        if not isinstance(base, nn.Linear):
            raise TypeError(
                f"{type(self).__name__} wraps an nn.Linear, got {type(base).__name__}. "
                "Replace only linear layers (see moram_avalanche.clip.inject)."
            )
        self.base = base
        base.requires_grad_(False)

    @property
    def in_features(self) -> int:
        return self.base.in_features

    @property
    def out_features(self) -> int:
        return self.base.out_features

    @property
    def weight(self) -> torch.Tensor:
        """The base weight (with any update merged into it)."""
        return self.base.weight

    @property
    def bias(self) -> Optional[torch.Tensor]:
        return self.base.bias

    @property
    def template(self) -> torch.Tensor:
        """An empty plain tensor on the base weight's device and dtype: what the adapter's own
        tensors are made like (``template.new_zeros(...)``). Not ``base.weight.new_*``: those
        keep the weight's tensor subclass, and a sharded weight (FSDP's ``DTensor``,
        :mod:`moram_avalanche.algorithms.fsdp`) would make sharded adapters."""
        weight = self.base.weight
        return torch.empty(0, device=weight.device, dtype=weight.dtype)


def find_layers(model: nn.Module, kind: Type[L] = AdapterLayer) -> Dict[str, L]:
    """Every module of ``model`` that is a ``kind`` (default: every adapter layer), by dotted name.

    The one finder of the package: ``find_layers(model, MoRAMLinear)``,
    ``find_layers(model, LoRALinear)``, ... A module registered under two names is listed once.
    """
    return {name: module for name, module in model.named_modules() if isinstance(module, kind)}


def adapter_state_dict(model: nn.Module) -> Dict[str, torch.Tensor]:
    """The declared state of every adapter layer of ``model``, under the model's state-dict keys.

    What a checkpoint of a model with adapters holds: MoRAM's atom banks, LoRA factors (and
    the merged base weight of a mergeable LoRA), MoE experts and routers -- none of the frozen
    pre-trained weights.
    """
    state = {}
    for name, layer in find_layers(model).items():
        prefix = f"{name}." if name else ""
        state.update({prefix + key: value for key, value in layer.state_dict().items()
                      if layer.declares(key)})
    return state


def trained_state_dict(model: nn.Module) -> Dict[str, torch.Tensor]:
    """What a run checkpoint keeps of ``model``: its adapters' declared state when it has adapter
    layers (the pre-trained weights never change), else its whole state dict (full fine-tuning)."""
    return adapter_state_dict(model) if find_layers(model) else model.state_dict()


def load_trained_state_dict(model: nn.Module, state: Mapping[str, torch.Tensor]) -> None:
    """Restore what :func:`trained_state_dict` returned."""
    if find_layers(model):
        load_adapter_state_dict(model, state)
    else:
        model.load_state_dict(state)


def load_adapter_state_dict(model: nn.Module, state: Mapping[str, torch.Tensor]) -> None:
    """Restore :func:`adapter_state_dict` output into ``model`` (growing layers resize to fit).

    Everything is checked before anything is loaded: a key that no adapter of ``model``
    declares, or a declared key the state lacks, is a ValueError naming a few of them (built
    with other encoders, targets or options?). Shape errors inside a layer raise torch's
    RuntimeError.
    """
    layers = find_layers(model)
    if not layers:
        raise ValueError(f"{type(model).__name__} holds no adapter layers to load the state into; "
                         "inject the adapters first (the strategy does it when it is built)")
    unexpected = [key for key in state if not _declared(key, layers)]
    missing = sorted(set(adapter_state_dict(model)) - set(state))
    if unexpected or missing:
        raise ValueError(
            "the adapter state does not fit this model: "
            + (f"{len(unexpected)} entries no adapter of the model declares, e.g. {unexpected[:3]}; "
               if unexpected else "")
            + (f"{len(missing)} declared entries missing, e.g. {missing[:3]}; " if missing else "")
            + "build the model with the encoders, targets and options of the run that saved it")
    result = model.load_state_dict(dict(state), strict=False)
    missing = [key for key in result.missing_keys if _declared(key, layers)]
    if missing:
        raise ValueError(f"the adapter state lacks {len(missing)} entries of this model, e.g. "
                         f"{missing[:3]}")


def _declared(key: str, layers: Mapping[str, AdapterLayer]) -> bool:
    """Whether the model-level ``key`` belongs to the declared state of one of ``layers``."""
    name = key
    while name:
        name = name.rpartition(".")[0]
        layer = layers.get(name)
        if layer is not None:
            return layer.declares(key[len(name) + 1:])
    layer = layers.get("")
    return layer is not None and layer.declares(key)


__all__ = ["load_trained_state_dict", "trained_state_dict", "AdapterLayer", "GrowingAdapter", "LinearWrapper", "adapter_state_dict", "find_layers",
           "load_adapter_state_dict"]
