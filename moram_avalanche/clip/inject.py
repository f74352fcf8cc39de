"""Reach every weight matrix of open_clip's residual blocks without copying any open_clip class.

An open_clip ``ResidualAttentionBlock`` calls ``self.attn(q, k, v, need_weights=False,
attn_mask=...)[0]`` and holds its MLP as ``mlp.c_fc`` / ``mlp.c_proj``. Replacing ``attn``
by :class:`~moram_avalanche.clip.attention.SplitAttention` exposes q, k, v and out as plain
``nn.Linear`` modules; after that every target is a leaf ``nn.Linear`` that
:func:`replace_linears` can swap for any wrapper (MoRAM atoms here, LoRA-style adapters in the
baselines).
"""

from __future__ import annotations

from typing import Callable, Dict, Iterable, List, Sequence, Tuple

from torch import nn

from ..atoms import MoRAMLinear
from ..lora import LoRALinear
from ..moe_lora import MoELoRALinear
from .attention import SplitAttention

#: Target name -> path of the linear inside a residual block. "qkvoinout" in the release.
TARGET_PATHS = {
    "q": "attn.q_proj",
    "k": "attn.k_proj",
    "v": "attn.v_proj",
    "out": "attn.out_proj",
    "fc": "mlp.c_fc",
    "proj": "mlp.c_proj",
}
ENCODERS = ("visual", "text")


def encoder_module(model: nn.Module, encoder: str) -> nn.Module:
    """The module holding an encoder's transformer: ``model.visual`` or the text tower.

    open_clip's ``CLIP`` keeps the text transformer at ``model.transformer``;
    ``CustomTextCLIP`` keeps the text tower at ``model.text``.
    """
    if encoder == "visual":
        if not hasattr(model, "visual"):
            raise ValueError(f"{type(model).__name__} has no `visual` tower: is it an open_clip model?")
        return model.visual
    if encoder == "text":
        for name in ("text", "transformer"):
            if isinstance(getattr(model, name, None), nn.Module):
                return getattr(model, name)
        raise ValueError(
            f"{type(model).__name__} has neither `text` nor `transformer`: is it an open_clip model?"
        )
    raise ValueError(f"unknown encoder {encoder!r}; expected one of {ENCODERS}")


def residual_blocks(module: nn.Module) -> List[Tuple[str, nn.Module]]:
    """``(name, block)`` for every transformer block (a module with ``attn`` and ``mlp.c_fc``)."""
    return [
        (name, block)
        for name, block in module.named_modules()
        if hasattr(block, "attn") and hasattr(getattr(block, "mlp", None), "c_fc")
    ]


def split_attention(model: nn.Module, encoders: Sequence[str] = ENCODERS) -> int:
    """Replace each block's ``nn.MultiheadAttention`` by an equal :class:`SplitAttention`.

    Idempotent (already split blocks are left alone). Returns how many were replaced.
    """
    replaced = 0
    for encoder in _check_names(encoders, ENCODERS, "encoder"):
        blocks = residual_blocks(encoder_module(model, encoder))
        if not blocks:
            raise ValueError(
                f"the {encoder} encoder of {type(model).__name__} has no transformer residual "
                "blocks (a ResNet or Hugging Face tower?); MoRAM injection supports ViT-style "
                "open_clip towers"
            )
        for name, block in blocks:
            if isinstance(block.attn, SplitAttention):
                continue
            if not isinstance(block.attn, nn.MultiheadAttention):
                raise TypeError(
                    f"{encoder} block {name!r} uses {type(block.attn).__name__}, not "
                    "nn.MultiheadAttention; only open_clip's standard ResidualAttentionBlock is supported"
                )
            block.attn = SplitAttention.from_mha(block.attn)
            replaced += 1
    return replaced


def target_linear_names(
    model: nn.Module, encoders: Sequence[str] = ENCODERS, targets: Sequence[str] = tuple(TARGET_PATHS)
) -> List[str]:
    """Dotted names (from ``model``) of the target linears of every residual block.

    Call :func:`split_attention` first when targets include q, k, v or out.
    """
    targets = _check_names(targets, tuple(TARGET_PATHS), "target")
    prefix_of = {module: name for name, module in model.named_modules()}
    names = []
    for encoder in _check_names(encoders, ENCODERS, "encoder"):
        root = encoder_module(model, encoder)
        root_name = prefix_of[root]
        for block_name, _ in residual_blocks(root):
            block_path = ".".join(part for part in (root_name, block_name) if part)
            names.extend(f"{block_path}.{TARGET_PATHS[target]}" for target in targets)
    return names


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
    if any(isinstance(module, adapter_type) for module in model.modules()):
        raise ValueError(f"the model already holds {adapter_type.__name__} layers: inject them "
                         "once per model")
    targets = _check_names(targets, tuple(TARGET_PATHS), "target")
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
    :class:`MoRAMLinear` (``atoms_per_task``, ``topk``, ``temperature``, ``threshold``, and
    the ablation options). With ``freeze_model`` every existing parameter is frozen first, so
    only atoms train. The layers start with no atoms (the model computes exactly what it
    did); call ``expand()`` on each (the MoRAM plugin does) before training a task.

    Returns ``{dotted name: MoRAMLinear}``.
    """
    return inject_adapters(model, lambda linear: MoRAMLinear(linear, **atom_kwargs), MoRAMLinear,
                           encoders, targets, freeze_model)


def inject_lora(
    model: nn.Module,
    encoders: Sequence[str] = ENCODERS,
    targets: Sequence[str] = ("k", "v"),
    *,
    rank: int,
    scale: float = 1.0,
    freeze_model: bool = True,
) -> Dict[str, LoRALinear]:
    """Wrap the target linears of every residual block of ``encoders`` in :class:`LoRALinear`.

    The LoRA counterpart of :func:`inject_moram` (same target names and encoders), used by
    SeqLoRA and InfLoRA. ``targets`` defaults to K and V, InfLoRA's choice (baselines
    reference, section 3.1). Returns ``{dotted name: LoRALinear}``.
    """
    return inject_adapters(model, lambda linear: LoRALinear(linear, rank=rank, scale=scale),
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
    """Wrap the target linears of ``encoders`` in :class:`~moram_avalanche.moe_lora.MoELoRALinear`
    (the MoE-LoRA ablation; same targets and encoders as :func:`inject_moram`)."""
    return inject_adapters(model, lambda linear: MoELoRALinear(linear, rank=rank, temperature=temperature),
                           MoELoRALinear, encoders, targets, freeze_model)


def _check_names(given: Sequence[str], valid: Tuple[str, ...], kind: str) -> Tuple[str, ...]:
    if isinstance(given, str):
        given = (given,)
    unknown = [name for name in given if name not in valid]
    if unknown or not given:
        raise ValueError(f"unknown {kind}(s) {unknown or given!r}; expected a non-empty subset of {valid}")
    return tuple(given)
