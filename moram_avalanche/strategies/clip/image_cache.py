"""Image features of an unchanged image tower, computed once and reused by later evaluations.

X-TAIL and MTIL evaluate every domain's test set after every task (about 90k images x 10
evaluations on X-TAIL). When the image tower has not changed since the last evaluation --
zero-shot CLIP, a text-only adapter, a frozen vision encoder -- the image features of a test
set are the same numbers again, so :class:`ImageFeatureCache` keeps them (with the labels of
each minibatch) and the next evaluation replays them without decoding a single image.

Whether the tower changed is decided by :func:`module_fingerprint`, a hash of everything that
determines its output: every parameter's and buffer's name, dtype, shape, device and bytes
(MoRAM's atom banks are buffers), and every submodule's type, ``training`` flag and
``extra_repr()`` (MoRAM's ``topk`` / ``temperature`` / ``threshold``, for instance). Hashing
ViT-B/16's image tower (86M parameters) takes well under a second; evaluating X-TAIL's test
sets takes minutes even on a GPU.

Assumes what every benchmark of this package satisfies: an experience's evaluation data is
the same from one evaluation to the next (deterministic eval transforms, no shuffling).
Only the features of the latest tower are kept (one evaluation's worth: 90k x 512 floats,
about 180 MB, on the model's device).
"""

from __future__ import annotations

import hashlib
from typing import Dict, Hashable, List, Optional, Tuple

import torch
from torch import nn


def module_fingerprint(module: nn.Module) -> str:
    """A hash of ``module``'s structure, options and tensors (see the module docstring)."""
    digest = hashlib.blake2b(digest_size=20)
    for index, sub in enumerate(module.modules()):  # the tree, in order (tensors carry the names)
        digest.update(f"{index}:{type(sub).__qualname__}:{sub.training}:{sub.extra_repr()}\n".encode())
    tensors = list(module.named_parameters(remove_duplicate=False))
    tensors += list(module.named_buffers(remove_duplicate=False))
    for name, tensor in tensors:
        tensor = tensor.detach()
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)}:{tensor.device}\n".encode())
        if tensor.numel():
            data = tensor.contiguous().view(-1).view(torch.uint8)
            digest.update(data.cpu().numpy().tobytes())
    return digest.hexdigest()


#: one minibatch as replayed: ``(image features, labels, task labels, ...)``
CachedBatch = Tuple[torch.Tensor, ...]


class ImageFeatureCache:
    """Per-experience image features of the tower with fingerprint :attr:`fingerprint`.

    Use: :meth:`start` at the beginning of every evaluation (it drops everything when the
    tower changed); :meth:`get` an experience's batches, or record them with :meth:`add` and
    :meth:`finish` (only a completely evaluated experience is kept).
    """

    def __init__(self) -> None:
        self.fingerprint: Optional[str] = None
        self._store: Dict[Hashable, List[CachedBatch]] = {}
        self._pending: Dict[Hashable, List[CachedBatch]] = {}

    def start(self, tower: nn.Module) -> None:
        fingerprint = module_fingerprint(tower)
        if fingerprint != self.fingerprint:
            self._store.clear()
            self.fingerprint = fingerprint
        self._pending.clear()

    def get(self, key: Hashable) -> Optional[List[CachedBatch]]:
        return self._store.get(key)

    def add(self, key: Hashable, features: torch.Tensor, *rest: torch.Tensor) -> None:
        """Record one minibatch: its features and the rest of the minibatch as read (labels, ...)."""
        self._pending.setdefault(key, []).append((features, *rest))

    def drop(self, key: Hashable) -> None:
        """Forget what was recorded of ``key`` in this evaluation."""
        self._pending.pop(key, None)

    def finish(self, key: Hashable) -> None:
        if key in self._pending:
            self._store[key] = self._pending.pop(key)

    def clear(self) -> None:
        self._store.clear()
        self._pending.clear()
        self.fingerprint = None

    def __len__(self) -> int:
        return len(self._store)


__all__ = ["CachedBatch", "ImageFeatureCache", "module_fingerprint"]
