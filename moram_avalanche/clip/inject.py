"""Reach every weight matrix of open_clip's residual blocks without copying any open_clip class.

An open_clip ``ResidualAttentionBlock`` calls ``self.attn(q, k, v, need_weights=False,
attn_mask=...)[0]`` and holds its MLP as ``mlp.c_fc`` / ``mlp.c_proj``. Replacing ``attn``
by :class:`~moram_avalanche.clip.attention.SplitAttention` exposes q, k, v and out as plain
``nn.Linear`` modules; after that every target is a leaf ``nn.Linear`` that
:func:`replace_linears` can swap for any wrapper (MoRAM atoms here, LoRA-style adapters in the
baselines).
"""

from __future__ import annotations

from typing import Callable, Dict, List, Sequence

from torch import nn

from ..layers.base import find_layers
from ..layers.gated_lora import GatedLoRALinear
from ..layers.lora import LoRALinear
from ..layers.moe_lora import MoELoRALinear
from ..layers.moram.layer import MoRAMLinear
from ..layers.moram.variants import check_moram_options, moram_layer
from ..layers.replace import replace_linears
from ..utils.names import check_names
from .attention import split_attention
from .towers import ENCODERS, blocks

#: Target name -> path of the linear inside a residual block. "qkvoinout" in the release.
TARGET_PATHS = {
    "q": "attn.q_proj",
    "k": "attn.k_proj",
    "v": "attn.v_proj",
    "out": "attn.out_proj",
    "fc": "mlp.c_fc",
    "proj": "mlp.c_proj",
}


def target_linear_names(
    model: nn.Module, encoders: Sequence[str] = ENCODERS, targets: Sequence[str] = tuple(TARGET_PATHS)
) -> List[str]:
    """Dotted names (from ``model``) of the target linears of every residual block.

    Call :func:`split_attention` first when targets include q, k, v or out.
    """
    targets = check_names(targets, tuple(TARGET_PATHS), "target")
    return [f"{block.name}.{TARGET_PATHS[target]}" for block in blocks(model, encoders)
            for target in targets]


def inject_adapters(
    model: nn.Module,
    adapter: Callable[[nn.Linear], nn.Module],
    adapter_type: type,
    encoders: Sequence[str] = ENCODERS,
    targets: Sequence[str] = tuple(TARGET_PATHS),
    freeze_model: bool = True,
) -> Dict[str, nn.Module]:
    """Wrap the target linears of every residual block of ``encoders`` in ``adapter(linear)``.

    The injection step of MoRAM and of every adapter baseline: refuses a model that already
    holds ``adapter_type`` layers, freezes every existing parameter first (``freeze_model``,
    so only the adapters train), splits the attention when q, k, v or out are targets, and
    replaces the linears by name (:func:`replace_linears`). Returns ``{dotted name: adapter}``.
    """
    if find_layers(model, adapter_type):
        raise ValueError(f"the model already holds {adapter_type.__name__} layers: inject them "
                         "once per model")
    targets = check_names(targets, tuple(TARGET_PATHS), "target")
    if freeze_model:
        model.requires_grad_(False)
    if any(TARGET_PATHS[t].startswith("attn.") for t in targets):
        split_attention(model, encoders)
    return replace_linears(model, target_linear_names(model, encoders, targets), adapter)


def inject_moram(
    model: nn.Module,
    encoders: Sequence[str] = ENCODERS,
    targets: Sequence[str] = tuple(TARGET_PATHS),
    freeze_model: bool = True,
    **atom_kwargs,
) -> Dict[str, MoRAMLinear]:
    """Wrap the target linears of every residual block of ``encoders`` in :class:`MoRAMLinear`.

    Defaults are the paper's CLIP setting: both encoders, q, k, v, out, c_fc and c_proj
    ("qkvoinout" on encoder "all" in the official release). ``atom_kwargs`` go to
    :class:`~moram_avalanche.layers.moram.layer.MoRAMLinear` (``atoms_per_task``, ``topk``,
    ``temperature``, ``threshold``); with the ablation options ``router`` or ``load_balance``
    set, the layers are :class:`~moram_avalanche.layers.moram.variants.MoRAMAblationLinear`
    (:func:`~moram_avalanche.layers.moram.variants.moram_layer`). With ``freeze_model``
    every existing parameter is frozen first, so only atoms train. The layers start with no
    atoms (the model computes exactly what it did); call ``expand()`` on each (the MoRAM
    plugin does) before training a task.

    Returns ``{dotted name: MoRAMLinear}``.
    """
    check_moram_options(**atom_kwargs)  # before the model changes
    return inject_adapters(model, lambda linear: moram_layer(linear, **atom_kwargs), MoRAMLinear,
                           encoders, targets, freeze_model)


def inject_lora(
    model: nn.Module,
    encoders: Sequence[str] = ENCODERS,
    targets: Sequence[str] = ("k", "v"),
    *,
    rank: int,
    scale: float = 1.0,
    mergeable: bool = False,
    freeze_model: bool = True,
) -> Dict[str, LoRALinear]:
    """Wrap the target linears of every residual block of ``encoders`` in :class:`LoRALinear`.

    The LoRA counterpart of :func:`inject_moram` (same target names and encoders), used by
    SeqLoRA and InfLoRA (``mergeable=True``: it merges after each task). ``targets`` defaults
    to K and V, InfLoRA's choice (baselines reference, section 3.1). Returns
    ``{dotted name: LoRALinear}``.
    """
    return inject_adapters(
        model, lambda linear: LoRALinear(linear, rank=rank, scale=scale, mergeable=mergeable),
        LoRALinear, encoders, targets, freeze_model)


def inject_moe_lora(
    model: nn.Module,
    encoders: Sequence[str] = ENCODERS,
    targets: Sequence[str] = tuple(TARGET_PATHS),
    *,
    rank: int = 16,
    temperature: float = 1.0,
    freeze_model: bool = True,
) -> Dict[str, MoELoRALinear]:
    """Wrap the target linears of ``encoders`` in :class:`~moram_avalanche.layers.moe_lora.MoELoRALinear`
    (the MoE-LoRA ablation; same targets and encoders as :func:`inject_moram`)."""
    return inject_adapters(model, lambda linear: MoELoRALinear(linear, rank=rank, temperature=temperature),
                           MoELoRALinear, encoders, targets, freeze_model)


def inject_gated_lora(
    model: nn.Module,
    encoders: Sequence[str] = ENCODERS,
    targets: Sequence[str] = tuple(TARGET_PATHS),
    *,
    rank: int = 16,
    freeze_model: bool = True,
) -> Dict[str, GatedLoRALinear]:
    """Wrap the target linears of ``encoders`` in :class:`~moram_avalanche.layers.gated_lora.GatedLoRALinear`
    (CoDyRA; its release's setting is :func:`inject_moram`'s: both encoders, q/k/v/out/c_fc/c_proj,
    rank 16 [Artificer-AI-Lab/CoDyRA runner_codyra.sh ``TARGET_ENCODER=all``, ``qkvoinout``])."""
    return inject_adapters(model, lambda linear: GatedLoRALinear(linear, rank=rank), GatedLoRALinear,
                           encoders, targets, freeze_model)


__all__ = ["TARGET_PATHS", "inject_adapters", "inject_gated_lora", "inject_lora", "inject_moe_lora", "inject_moram",
           "replace_linears", "target_linear_names"]
