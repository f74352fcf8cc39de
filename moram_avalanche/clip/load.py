"""Load an open_clip model, its transforms and tokenizer, with clear errors when offline."""

from __future__ import annotations

import os
from typing import Any, Callable, Optional, Tuple

from torch import nn



class WeightsUnavailableError(RuntimeError):
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
        device: where the model is placed.
        cache_dir: where open_clip caches downloaded weights.
        open_clip_kwargs: passed to ``open_clip.create_model_and_transforms``
            (e.g. ``force_quick_gelu=True`` for OpenAI weights loaded from a local file).

    Raises:
        ValueError: unknown model name, or ``pretrained`` is neither a known tag nor a file.
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
    if pretrained:
        _fetch_pretrained(open_clip, name, pretrained, cache_dir)
    model, train_transform, eval_transform = open_clip.create_model_and_transforms(
        name, pretrained=pretrained or None, device=device, cache_dir=cache_dir, **open_clip_kwargs
    )
    return model, train_transform, eval_transform, open_clip.get_tokenizer(name)


def _fetch_pretrained(open_clip, name: str, pretrained: str, cache_dir: Optional[str]) -> None:
    """Make sure the weights for ``pretrained`` are on disk, or fail with instructions."""
    tags = open_clip.list_pretrained_tags_by_model(name)
    config = open_clip.get_pretrained_cfg(name, pretrained)
    if not config:
        if os.path.isfile(os.path.expanduser(pretrained)):
            return
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
