"""Whether calling a module would run a hook (a call that skips the module's own call must not skip one),
and whether a base's call is a plain ``F.linear`` (what may be fused into the atoms' read-out)."""

from __future__ import annotations

from torch import nn
from torch.nn.modules import module as module_hooks


def hooked(module: nn.Module) -> bool:
    """Whether a call of ``module`` would run a hook: its own forward (pre-)hooks, its backward hooks,
    or a global module hook (``torch.nn.modules.module.register_module_forward_hook`` and kin)."""
    own = module.__dict__  # (one attribute lookup: nn.Module's __getattr__ makes each lookup slow, about 0.4k instructions)
    return bool(own["_forward_hooks"] or own["_forward_pre_hooks"] or own["_backward_hooks"]
                or own["_backward_pre_hooks"] or module_hooks._global_forward_hooks
                or module_hooks._global_forward_pre_hooks or module_hooks._global_backward_hooks
                or module_hooks._global_backward_pre_hooks)


def plain_call(module: nn.Module) -> bool:
    """Whether calling ``module`` runs its class's ``forward`` and nothing else: none set on the
    instance (accelerate's offload and ``device_map`` hooks wrap it there, and load the module's
    tensors from ``meta`` placeholders inside it) and no hook that the call would run
    (:func:`hooked`). A caller that reads the module's tensors itself, past its call, asks this first."""
    return "forward" not in module.__dict__ and not hooked(module)


def plain_linear(module: nn.Module, *others: nn.Module) -> bool:
    """Whether calling ``module`` computes ``F.linear(x, module.weight, module.bias)`` and nothing
    else, so that a MoRAM layer may read its weight and bias into the atoms' read-out instead of
    calling it: ``nn.Linear``'s own ``forward`` (not a subclass's: a quantised layer), no ``forward``
    set on the instance (accelerate's offload and ``device_map`` hooks wrap it there, and load the
    weight from a ``meta`` placeholder inside it), and no hook that the call would run
    (:func:`hooked`; ``torch.nn.utils.weight_norm`` and ``torch.nn.utils.prune`` recompute the
    weight in a forward pre-hook); and, for each of ``others``, :func:`plain_call` (the peft
    layer's bank). Asked at each call (a planned one too: :func:`hooked`'s reads written out, one
    Python call, each module's hook registries read from its instance dictionary, where
    ``nn.Module.__init__`` puts them), as any of these can change after the layer is built (a base
    swapped, a hook added)."""
    own = module.__dict__  # (the instance's dictionary read once: hooked)
    if (type(module).forward is not nn.Linear.forward or "forward" in own or own["_forward_hooks"]
            or own["_forward_pre_hooks"] or own["_backward_hooks"] or own["_backward_pre_hooks"]):
        return False
    for other in others:
        own = other.__dict__
        if ("forward" in own or own["_forward_hooks"] or own["_forward_pre_hooks"] or own["_backward_hooks"]
                or own["_backward_pre_hooks"]):
            return False
    return not (module_hooks._global_forward_hooks or module_hooks._global_forward_pre_hooks
                or module_hooks._global_backward_hooks or module_hooks._global_backward_pre_hooks)


__all__ = ["hooked", "plain_call", "plain_linear"]
