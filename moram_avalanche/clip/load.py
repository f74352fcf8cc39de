"""Load an open_clip model, its transforms and tokenizer, with clear errors when offline.

OpenAI's CLIP weights were trained with QuickGELU (``x * sigmoid(1.702 x)``). open_clip 3.3
builds ``nn.GELU`` for ``"ViT-B-16"`` whatever the tag and only *warns* that the ``"openai"``
tag was trained otherwise; the MoRAM release's open_clip 2.12 built QuickGELU
[Artificer-AI-Lab/MoRAM XTAIL/requirements]. Every number, zero-shot included, shifts with the
wrong activation, so :func:`load_clip` always builds the activation the weights were trained
with:

* from a tag: the tag's own ``quick_gelu`` flag (open_clip's pretrained config);
* from a local file: the tag named by ``weights_origin`` (``"openai"`` for OpenAI's
  weights, ``--weights-origin openai`` on the command line), or a ``-quickgelu`` model name
  (``"ViT-B-16-quickgelu"``); a file of unknown origin for an architecture that OpenAI
  published is loaded as the name says (``nn.GELU``) with a warning saying how to tell.

Besides open_clip's names and tags, :func:`load_clip` loads the models and weights the package
registers (:mod:`.registry`): the demo's tiny CLIP by name, ``"moram-synthetic-tiny"``, with
random weights (``pretrained=None``) or the demo's pre-trained ones (``pretrained="synthetic"``,
made once and cached).
"""

from __future__ import annotations

import os
import pickle
import re
import warnings
from typing import Any, Callable, Optional, Tuple

from torch import nn

from ..utils.devices import resolve_device
from ..utils.errors import UserError
from .registry import made_tags, register_model_configs, registered_models, resolve_pretrained

#: the pretrained-config fields that set the image preprocessing -> open_clip's keyword
_PREPROCESS_KEYWORDS = {"mean": "image_mean", "std": "image_std", "interpolation": "image_interpolation",
                        "resize_mode": "image_resize_mode"}


class WeightsUnavailableError(UserError, RuntimeError):
    """Pretrained weights could not be obtained (no network, no cache, wrong file)."""


class UnknownWeightsOriginWarning(UserWarning):
    """A local weights file was loaded without saying which published weights it holds."""


def load_clip(
    name: str = "ViT-B-16",
    pretrained: Optional[str] = "openai",
    device: Any = "cpu",
    cache_dir: Optional[str] = None,
    weights_origin: Optional[str] = None,
    **open_clip_kwargs,
) -> Tuple[nn.Module, Callable, Callable, Callable]:
    """Return ``(model, train_transform, eval_transform, tokenizer)`` for an open_clip model.

    Args:
        name: open_clip model name (the paper: ``"ViT-B-16"``), or one the package registers
            (:mod:`.registry`: ``"moram-synthetic-tiny"``, the demo's tiny CLIP).
        pretrained: an open_clip tag (the paper: ``"openai"``), a tag whose weights the package
            makes (``"synthetic"`` of the tiny CLIP: the demo's pre-training, made once and
            cached), a path to a local weights file, or None for random initialisation (tests,
            offline demos).
        device: where the model is placed (``"auto"``: a CUDA GPU when there is one).
        cache_dir: where open_clip caches downloaded weights; for weights the package makes,
            where they are cached (default: ``$MORAM_AVALANCHE_CACHE``, else
            ``~/.cache/moram-avalanche``, the demo's cache).
        weights_origin: with a local file, the open_clip tag the file's weights were
            published under (e.g. ``"openai"``): the model is built as that tag's weights
            were trained (QuickGELU for OpenAI's) and preprocesses images as that tag does.
        open_clip_kwargs: passed to ``open_clip.create_model_and_transforms``.

    The activation always matches the weights: a tag (or ``weights_origin``) whose weights
    were trained with QuickGELU gets ``force_quick_gelu=True`` (see the module docstring).

    Raises:
        ValueError: unknown model name, ``pretrained`` is neither a known tag nor a file, or
            the file does not hold weights of this model; a device this machine lacks;
            ``weights_origin`` is not a tag of the model (or contradicts the tag given).
        WeightsUnavailableError: the tag's weights could not be downloaded or found in the
            cache; the message says how to pass a local weights file instead.
    """
    import open_clip  # heavy import, kept out of module import time

    register_model_configs()  # the package's own names, known to open_clip from here on
    if name not in open_clip.list_models():
        raise ValueError(
            f"unknown open_clip model {name!r}; known names include "
            f"{', '.join(m for m in open_clip.list_models() if m.startswith('ViT-B'))}, ... "
            f"(open_clip.list_models() lists them all) and the package's own, {', '.join(registered_models())}"
        )
    device = resolve_device(device)
    pretrained = resolve_pretrained(name, pretrained, cache_dir)  # weights the package makes: their file
    options = dict(open_clip_kwargs)
    local = False
    if pretrained:
        tag = _weights_tag(open_clip, name, pretrained, weights_origin)
        local = _fetch_pretrained(open_clip, name, pretrained, cache_dir)
        options.update(_trained_as(open_clip, name, tag, is_file=tag != pretrained))
        if tag is None:
            _warn_unknown_origin(open_clip, name, pretrained)
    elif weights_origin is not None:
        raise ValueError(f"weights_origin={weights_origin!r} describes a weights file, but no "
                         "pretrained weights are loaded (pretrained=None)")
    try:
        model, train_transform, eval_transform = open_clip.create_model_and_transforms(
            name, pretrained=pretrained or None, device=device, cache_dir=cache_dir, **options
        )
    except Exception as err:  # noqa: BLE001 - a local file: whatever it holds, one clear message
        if not local or not isinstance(err, (RuntimeError, pickle.UnpicklingError, EOFError, KeyError, ValueError,
                                             TypeError, AttributeError, IndexError, OverflowError,
                                             UnicodeDecodeError)):
            raise
        raise ValueError(
            f"pretrained={pretrained!r} does not hold weights of open_clip model {name!r} "
            f"({_describe_load_error(err, pretrained)}); pass a weights file saved from {name} "
            "(its state_dict), the model those weights belong to, or 'none' for random weights"
        ) from None
    return model, train_transform, eval_transform, open_clip.get_tokenizer(name)


def _describe_load_error(err: BaseException, path: Optional[str] = None) -> str:
    """One short line for a failed weights load: counts of missing / unexpected / mismatched
    keys for a state dict of another model; "torch.load cannot read it" when the file itself
    does not load (whatever error its bytes raise: a file of random bytes can raise many);
    else the error's first line."""
    text = str(err)
    counts = {label: len(re.findall(r'"[^"]+"', line)) for label, line in
              (("missing", _line_after(text, "Missing key(s) in state_dict:")),
               ("unexpected", _line_after(text, "Unexpected key(s) in state_dict:")))}
    mismatched = text.count("size mismatch for ")
    if any(counts.values()) or mismatched:
        parts = [f"{n} {label} keys" for label, n in counts.items() if n]
        parts += [f"{mismatched} keys of other shapes"] if mismatched else []
        return "a state dict of another model: " + ", ".join(parts)
    if isinstance(err, (pickle.UnpicklingError, EOFError)) or "PytorchStreamReader" in text or \
            (path is not None and not _torch_loads(path)):
        return "torch.load cannot read it: a truncated file, or not a torch weights file"
    first = text.strip().splitlines()[0] if text.strip() else ""
    first = first if len(first) <= 120 else first[:117] + "..."
    return f"{type(err).__name__}: {first}"


def _torch_loads(path: str) -> bool:
    """Whether ``torch.load`` reads ``path`` (tensors only, nothing executed)."""
    import torch

    try:
        torch.load(path, map_location="cpu", weights_only=True)
    except Exception:  # noqa: BLE001 - any failure means: not a readable weights file
        return False
    return True


def _line_after(text: str, marker: str) -> str:
    start = text.find(marker)
    return "" if start < 0 else text[start + len(marker):].split("\n", 1)[0]


def trained_with_quick_gelu(name: str, tag: str) -> bool:
    """Whether the weights of open_clip model ``name`` published as ``tag`` were trained with QuickGELU."""
    import open_clip

    return bool((open_clip.get_pretrained_cfg(name, tag) or {}).get("quick_gelu", False))


def _weights_tag(open_clip, name: str, pretrained: str, origin: Optional[str]) -> Optional[str]:
    """The tag whose training the weights follow: ``pretrained`` itself when it is a tag,
    ``origin`` for a file (None when not said)."""
    tags = open_clip.list_pretrained_tags_by_model(name)
    is_tag = bool(open_clip.get_pretrained_cfg(name, pretrained))
    if origin is not None and not open_clip.get_pretrained_cfg(name, origin):
        raise ValueError(f"weights_origin={origin!r} is not a pretrained tag of {name!r}; known tags: "
                         f"{tags or 'none'} (name the tag the weights file was published under)")
    if is_tag:
        if origin is not None and open_clip.get_pretrained_cfg(name, origin) is not \
                open_clip.get_pretrained_cfg(name, pretrained):
            raise ValueError(f"weights_origin={origin!r} contradicts pretrained={pretrained!r}: "
                             "weights_origin is for local files; leave it out with a tag")
        return pretrained
    return origin


def _trained_as(open_clip, name: str, tag: Optional[str], *, is_file: bool) -> dict:
    """open_clip keywords that build the model as the weights of ``tag`` were trained:
    QuickGELU when the tag's weights used it; for a file, the tag's image preprocessing."""
    if tag is None:
        return {}
    config = open_clip.get_pretrained_cfg(name, tag)
    options = {"force_quick_gelu": True} if config.get("quick_gelu") else {}
    if is_file:  # a tag brings its preprocessing itself; a file takes it from its origin
        options.update({keyword: config[field] for field, keyword in _PREPROCESS_KEYWORDS.items()
                        if config.get(field) is not None})
    return options


def _warn_unknown_origin(open_clip, name: str, path: str) -> None:
    """Warn when a file is loaded for an architecture some of whose published weights were
    trained with another activation than the one the model name builds."""
    gelu_is_quick = bool((open_clip.get_model_config(name) or {}).get("quick_gelu", False))
    other = [t for t in open_clip.list_pretrained_tags_by_model(name)
             if bool(open_clip.get_pretrained_cfg(name, t).get("quick_gelu", False)) != gelu_is_quick]
    if not other:
        return
    built = "QuickGELU" if gelu_is_quick else "nn.GELU"
    warnings.warn(
        f"loading {name!r} weights from {path} with {built}, as the model name says, but the "
        f"{name} weights published as {other} were trained with "
        f"{'nn.GELU' if gelu_is_quick else 'QuickGELU'}: if the file holds those (e.g. OpenAI's), "
        f"say so with weights_origin={other[0]!r} (command line: --weights-origin {other[0]})"
        + ("" if gelu_is_quick else f" or use the model name {name}-quickgelu")
        + "; if it holds other weights, name their tag to silence this warning",
        UnknownWeightsOriginWarning, stacklevel=3)


def _fetch_pretrained(open_clip, name: str, pretrained: str, cache_dir: Optional[str]) -> bool:
    """Make sure the weights for ``pretrained`` are on disk, or fail with instructions.

    Returns whether ``pretrained`` is a local file (rather than a tag)."""
    tags = [*open_clip.list_pretrained_tags_by_model(name), *made_tags(name)]
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
            f"pretrained='/path/to/open_clip_pytorch_model.bin', weights_origin={pretrained!r}"
            + ("" if not config.get("quick_gelu") else "; OpenAI's weights run with QuickGELU")
            + "), or point cache_dir at a cache that holds them."
        ) from err
    return False


__all__ = ["UnknownWeightsOriginWarning", "WeightsUnavailableError", "load_clip", "trained_with_quick_gelu"]
