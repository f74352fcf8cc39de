"""Whether calling a module would run a hook (a call that skips the module's own call must not skip one)."""

from __future__ import annotations

from torch import nn
from torch.nn.modules import module as module_hooks


def hooked(module: nn.Module) -> bool:
    """Whether a call of ``module`` would run a hook: its own forward (pre-)hooks, its backward hooks,
    or a global module hook (``torch.nn.modules.module.register_module_forward_hook`` and kin)."""
    return bool(module._forward_hooks or module._forward_pre_hooks or module._backward_hooks
                or module._backward_pre_hooks or module_hooks._global_forward_hooks
                or module_hooks._global_forward_pre_hooks or module_hooks._global_backward_hooks
                or module_hooks._global_backward_pre_hooks)


__all__ = ["hooked"]
