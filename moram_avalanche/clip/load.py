"""Load an open_clip model, its transforms and tokenizer, with clear errors when offline."""

from __future__ import annotations

import os
import pickle
import re
from typing import Any, Callable, Optional, Tuple

from torch import nn

from ..utils.devices import resolve_device
from ..utils.errors import UserError


class WeightsUnavailableError(UserError, RuntimeError):
    """Pretrained weights could not be obtained (no network, no cache, wrong file)."""


def load_clip(
    name: str = "ViT-B-16",
    pretrained: Optional[str] = "openai",
    device: Any = "cpu",
    cache_dir: Optional[str] = None,
    **open_clip_kwargs,
) -> Tuple[nn.Module, Callable, Callable, Callable]:
    """Return ``(model, train_transform, eval_transform, tokenizer)`` for an open_clip model.

    Args:
        name: open_clip model name (the paper: ``"ViT-B-16"``).
        pretrained: an open_clip tag (the paper: ``"openai"``), a path to a local weights
            file, or None for random initialisation (tests, offline demos).
        device: where the model is placed (``"auto"``: a CUDA GPU when there is one).
        cache_dir: where open_clip caches downloaded weights.
        open_clip_kwargs: passed to ``open_clip.create_model_and_transforms``
            (e.g. ``force_quick_gelu=True`` for OpenAI weights loaded from a local file).

    Raises:
        ValueError: unknown model name, ``pretrained`` is neither a known tag nor a file, or
            the file does not hold weights of this model; a device this machine lacks.
        WeightsUnavailableError: the tag's weights could not be downloaded or found in the
            cache; the message says how to pass a local weights file instead.
    """
    import open_clip  # heavy import, kept out of module import time

    if name not in open_clip.list_models():
        raise ValueError(
            f"unknown open_clip model {name!r}; known names include "
            f"{', '.join(m for m in open_clip.list_models() if m.startswith('ViT-B'))}, ... "
            "(open_clip.list_models() lists them all)"
        )
    device = resolve_device(device)
    local = False
    if pretrained:
        local = _fetch_pretrained(open_clip, name, pretrained, cache_dir)
    try:
        model, train_transform, eval_transform = open_clip.create_model_and_transforms(
            name, pretrained=pretrained or None, device=device, cache_dir=cache_dir, **open_clip_kwargs
        )
    except (RuntimeError, pickle.UnpicklingError, EOFError, KeyError, ValueError) as err:
        if not local:
            raise
        raise ValueError(
            f"pretrained={pretrained!r} does not hold weights of open_clip model {name!r} "
            f"({_describe_load_error(err)}); pass a weights file saved from {name} "
            "(its state_dict), the model those weights belong to, or 'none' for random weights"
        ) from None
    return model, train_transform, eval_transform, open_clip.get_tokenizer(name)


def _describe_load_error(err: BaseException) -> str:
    """One short line for a failed weights load: counts of missing / unexpected / mismatched
    keys for a state dict of another model, else the error's first line."""
    text = str(err)
    counts = {label: len(re.findall(r'"[^"]+"', line)) for label, line in
              (("missing", _line_after(text, "Missing key(s) in state_dict:")),
               ("unexpected", _line_after(text, "Unexpected key(s) in state_dict:")))}
    mismatched = text.count("size mismatch for ")
    if any(counts.values()) or mismatched:
        parts = [f"{n} {label} keys" for label, n in counts.items() if n]
        parts += [f"{mismatched} keys of other shapes"] if mismatched else []
        return "a state dict of another model: " + ", ".join(parts)
    if isinstance(err, (pickle.UnpicklingError, EOFError)) or "PytorchStreamReader" in text:
        return "torch.load cannot read it: a truncated file, or not a torch weights file"
    first = text.strip().splitlines()[0] if text.strip() else ""
    first = first if len(first) <= 120 else first[:117] + "..."
    return f"{type(err).__name__}: {first}"


def _line_after(text: str, marker: str) -> str:
    start = text.find(marker)
    return "" if start < 0 else text[start + len(marker):].split("\n", 1)[0]


def _fetch_pretrained(open_clip, name: str, pretrained: str, cache_dir: Optional[str]) -> bool:
    """Make sure the weights for ``pretrained`` are on disk, or fail with instructions.

    Returns whether ``pretrained`` is a local file (rather than a tag)."""
    tags = open_clip.list_pretrained_tags_by_model(name)
    config = open_clip.get_pretrained_cfg(name, pretrained)
    if not config:
        if os.path.isfile(os.path.expanduser(pretrained)):
            return True
        raise ValueError(
            f"pretrained={pretrained!r} is neither a known tag for {name!r} nor an existing file. "
            f"Known tags for {name}: {tags or 'none'}. To use weights you downloaded yourself, "
            f"pass their path: load_clip({name!r}, pretrained='/path/to/weights.bin')."
        )
    try:
        open_clip.download_pretrained(config, cache_dir=cache_dir)
    except Exception as err:  # network, hub and file-system errors all mean the same here
        raise WeightsUnavailableError(
            f"could not obtain the weights of open_clip model {name!r} with pretrained tag "
            f"{pretrained!r} ({type(err).__name__}: {err}). Without network access, download "
            f"them once elsewhere (open_clip.download_pretrained(open_clip.get_pretrained_cfg("
            f"{name!r}, {pretrained!r}))) and pass the file: load_clip({name!r}, "
            f"pretrained='/path/to/open_clip_pytorch_model.bin'"
            + (", force_quick_gelu=True" if config.get("quick_gelu") else "")
            + "), or point cache_dir at a cache that holds them."
        ) from err
    return False
