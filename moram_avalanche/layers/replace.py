"""The generic injection step: replace named ``nn.Linear`` modules of any model by wrappers.

Shared by every family: CLIP (:mod:`moram_avalanche.clip.inject`, after the attention split)
and Hugging Face language models (:mod:`moram_avalanche.text.inject`). Which names to replace
is the family's business; this step only checks and swaps. Pure torch.
"""

from __future__ import annotations

from typing import Callable, Dict, Iterable

from torch import nn


def replace_linears(
    model: nn.Module, names: Iterable[str], factory: Callable[[nn.Linear], nn.Module]
) -> Dict[str, nn.Module]:
    """Replace each named ``nn.Linear`` of ``model`` by ``factory(linear)``.

    The generic injection step shared by MoRAM and the LoRA-style baselines. Every name is
    checked before anything is replaced, so a bad name leaves the model untouched.
    Returns ``{name: new module}`` in the order given.
    """
    names = list(names)
    found = {}
    for name in names:
        parent_name, _, attr = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        module = getattr(parent, attr, None)
        if not isinstance(module, nn.Linear):
            raise TypeError(
                f"{name!r} is {type(module).__name__ if module is not None else 'missing'}, not an "
                "nn.Linear (already injected? call the injection once per model)"
            )
        found[name] = (parent, attr, module)
    replaced = {}
    for name, (parent, attr, module) in found.items():
        replaced[name] = factory(module)
        setattr(parent, attr, replaced[name])
    return replaced


__all__ = ["replace_linears"]
