"""Lazily loaded image datasets, and what happens when an image cannot be decoded.

:class:`ImageFiles` holds file paths only and decodes one image per ``__getitem__`` with PIL
(RGB); :class:`ImageArrays` indexes an array that stays on disk (a ``numpy.memmap`` for MNIST)
or that the format forces into memory (CIFAR-100's pickles, 150 MB of uint8). Both return
``(PIL image, local label)`` and carry ``targets``, as Avalanche's classification datasets
expect; transforms are Avalanche's (the benchmark's train / eval transform groups).

A corrupt or unreadable file is handed to a :class:`BadImages` policy: ``"skip"`` (default)
warns once per file, records it, and returns the next readable image of the same class in
its place; ``"raise"`` stops with the file's path and dataset. Records go to an append-only
JSON-lines file, so DataLoader worker processes report them too.
"""

from __future__ import annotations

import json
import os
import tempfile
import warnings
import weakref
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np
from PIL import Image

BAD_IMAGE_POLICIES = ("skip", "raise")


class BadImageError(RuntimeError):
    """An image file could not be decoded and the policy is ``"raise"``."""


class BadImages:
    """Policy and record for corrupt or unreadable images.

    Args:
        policy: "skip" -- warn, record, and substitute another image of the same class --
            or "raise" -- stop with :class:`BadImageError`.
        log_path: JSON-lines file the records are appended to (one line per failed read,
            from any process). Default: a fresh file in the temporary directory.
    """

    def __init__(self, policy: str = "skip", log_path: Optional[os.PathLike] = None) -> None:
        if policy not in BAD_IMAGE_POLICIES:
            raise ValueError(f"bad-image policy must be one of {BAD_IMAGE_POLICIES}, got {policy!r}")
        self.policy = policy
        self._warned: set = set()
        self._cleanup = None
        if log_path is None:
            handle, log_path = tempfile.mkstemp(prefix="moram-bad-images-", suffix=".jsonl")
            os.close(handle)
            self._cleanup = weakref.finalize(self, _remove, log_path)
        self.log_path = Path(log_path)

    def redirect(self, log_path: os.PathLike) -> None:
        """Append to ``log_path`` from now on (e.g. a run's output folder, so the record
        survives a resume), carrying over what was recorded so far."""
        log_path = Path(log_path)
        if log_path == self.log_path:
            return
        old = self.log_path.read_text(encoding="utf-8") if self.log_path.exists() else ""
        if old:
            with open(log_path, "a", encoding="utf-8") as log:
                log.write(old)
        if self._cleanup is not None:
            self._cleanup()
            self._cleanup = None
        self.log_path = log_path

    def handle(self, dataset: str, path: str, error: BaseException) -> None:
        """Record one failed read; raise when the policy says so."""
        message = f"cannot read image {path} of dataset {dataset!r}: {type(error).__name__}: {error}"
        if self.policy == "raise":
            raise BadImageError(
                f"{message}\n(pass on_bad_image='skip' / --on-bad-image skip to skip such files "
                "with a warning, or replace the file)"
            ) from error
        record = json.dumps({"dataset": dataset, "path": str(path), "error": str(error)})
        with open(self.log_path, "a", encoding="utf-8") as log:  # O_APPEND: one line per write
            log.write(record + "\n")
        if path not in self._warned:
            self._warned.add(path)
            warnings.warn(f"{message}; skipped (another image of its class is used instead)",
                          stacklevel=3)

    def skipped(self) -> Dict[str, str]:
        """``{path: dataset}`` of every file skipped so far, by any process."""
        if not self.log_path.exists():
            return {}
        found = {}
        for line in self.log_path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                record = json.loads(line)
                found[record["path"]] = record["dataset"]
        return found

    def __getstate__(self):  # copies (worker processes) share the log file; only we delete it
        return {"policy": self.policy, "log_path": self.log_path, "_warned": set(), "_cleanup": None}


def _remove(path) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


class _LabelledImages:
    """Shared part: local labels, the dataset's name, substitution of unreadable items."""

    def __init__(self, targets: Sequence[int], name: str, bad_images: Optional[BadImages]) -> None:
        self.targets: List[int] = [int(t) for t in targets]
        self.name = name
        self.bad_images = bad_images or BadImages()

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, index: int):
        label = self.targets[index]
        n = len(self.targets)
        for offset in range(n):
            candidate = (index + offset) % n
            if offset and self.targets[candidate] != label:
                continue
            try:
                return self._load(candidate), label
            except (OSError, SyntaxError, ValueError) as error:  # what PIL raises on bad files
                self.bad_images.handle(self.name, self._describe(candidate), error)
        raise BadImageError(f"no image of class {label} of dataset {self.name!r} can be read")

    def _load(self, index: int) -> Image.Image:
        raise NotImplementedError

    def _describe(self, index: int) -> str:
        raise NotImplementedError


class ImageFiles(_LabelledImages):
    """Images stored as files, decoded on access.

    Args:
        paths: one file per item. targets: local labels (0..C-1).
        name: the dataset's name, for messages. bad_images: the :class:`BadImages` policy.
    """

    def __init__(self, paths: Sequence[os.PathLike], targets: Sequence[int], *, name: str,
                 bad_images: Optional[BadImages] = None) -> None:
        if len(paths) != len(targets):
            raise ValueError(f"{name}: {len(paths)} paths but {len(targets)} labels")
        super().__init__(targets, name, bad_images)
        self.paths: List[str] = [str(p) for p in paths]

    def _load(self, index: int) -> Image.Image:
        with Image.open(self.paths[index]) as image:
            return image.convert("RGB")  # convert() decodes the whole file, so errors surface here

    def _describe(self, index: int) -> str:
        return self.paths[index]

    def subset(self, indices: Sequence[int]) -> "ImageFiles":
        return ImageFiles([self.paths[i] for i in indices], [self.targets[i] for i in indices],
                          name=self.name, bad_images=self.bad_images)


class ImageArrays(_LabelledImages):
    """Images stored as one uint8 array ``[N, H, W]`` (grey) or ``[N, H, W, 3]`` (RGB), read
    per item (so a ``numpy.memmap`` stays on disk). Grey images are returned as RGB, the
    three-channel input CLIP expects."""

    def __init__(self, array: np.ndarray, targets: Sequence[int], *, name: str,
                 index: Optional[Sequence[int]] = None, bad_images: Optional[BadImages] = None,
                 source: str = "") -> None:
        self.array = array
        self.index = np.arange(len(array)) if index is None else np.asarray(index, dtype=np.int64)
        if len(self.index) != len(targets):
            raise ValueError(f"{name}: {len(self.index)} images but {len(targets)} labels")
        super().__init__(targets, name, bad_images)
        self.source = source

    def _load(self, index: int) -> Image.Image:
        return Image.fromarray(np.asarray(self.array[self.index[index]])).convert("RGB")

    def _describe(self, index: int) -> str:
        return f"{self.source}[{int(self.index[index])}]"

    def subset(self, indices: Sequence[int]) -> "ImageArrays":
        return ImageArrays(self.array, [self.targets[i] for i in indices], name=self.name,
                           index=self.index[list(indices)], bad_images=self.bad_images,
                           source=self.source)
