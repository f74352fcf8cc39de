"""Lazily loaded image datasets, and what happens when an image cannot be decoded.

:class:`ImageFiles` holds file paths only and decodes one image per ``__getitem__`` with PIL
(RGB); :class:`ImageArrays` indexes an array that stays on disk (a ``numpy.memmap`` for MNIST)
or that the format forces into memory (CIFAR-100's pickles, 150 MB of uint8). Both return
``(PIL image, local label)`` and carry ``targets``, as Avalanche's classification datasets
expect; transforms are Avalanche's (the benchmark's train / eval transform groups).

Every image becomes 8-bit RGB the way it looks (:func:`to_rgb`): 16-bit grey scaled to 8
bits, palettes looked up, CMYK converted, transparency composited over white; a mode that
cannot be shown faithfully (32-bit integer beyond 16 bits, float) is refused like a corrupt
file. A corrupt, unreadable or refused file is handed to a :class:`BadImages` policy:
``"skip"`` (default) warns once per file, records it, and returns the next readable image of
the same class in its place; ``"raise"`` stops with the file's path and dataset. Records go
to an append-only JSON-lines file, so DataLoader worker processes report them too; a line
torn by a killed process is ignored when the file is read.
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

from ...utils.errors import UserError

#: what an unreadable image does (``on_bad_image``, ``--on-bad-image``): "skip" it with a warning,
#: counted in results.json, or "raise"
BAD_IMAGE_POLICIES = ("skip", "raise")

#: what decoding a bad file raises: PIL's errors for corrupt, truncated or unknown files,
#: :class:`UnsupportedImageError`, and a decompression bomb (a header claiming more pixels than
#: ``Image.MAX_IMAGE_PIXELS`` allows: not an OSError, so named here) -- each skipped and counted
#: like any other bad image, or refused with the file named
IMAGE_ERRORS = (OSError, SyntaxError, ValueError, Image.DecompressionBombError)

#: PIL modes :func:`to_rgb` converts with ``Image.convert("RGB")`` (no alpha, 8 bits a channel)
PLAIN_MODES = ("RGB", "L", "1", "CMYK", "YCbCr", "LAB", "HSV", "RGBX")
#: PIL modes with an alpha channel, composited over white
ALPHA_MODES = ("RGBA", "RGBa", "LA", "La", "PA")
#: 16-bit grey (PNG): scaled to 8 bits
SIXTEEN_BIT_MODES = ("I;16", "I;16L", "I;16B", "I;16N")


class BadImageError(UserError, RuntimeError):
    """An image file could not be decoded and the policy is ``"raise"``."""


class UnsupportedImageError(ValueError):
    """An image whose PIL mode :func:`to_rgb` cannot convert faithfully."""


def to_rgb(image: Image.Image) -> Image.Image:
    """``image`` as 8-bit RGB, as it looks.

    * RGB, grey, bilevel, CMYK, YCbCr, LAB, HSV: PIL's conversion;
    * palette: looked up (with its transparent index composited over white);
    * alpha (RGBA, LA, PA, premultiplied): composited over a white background -- the
      reference code's ``convert("RGB")`` drops alpha and shows whatever colour the file
      keeps under transparent pixels;
    * 16-bit grey: ``round(v * 255 / 65535)``; ``convert("RGB")`` would clip every value
      above 255 to white;
    * 32-bit integer grey ("I"): kept when its values fit in 8 bits, scaled when they fit in
      16, else refused; float ("F") and other modes: refused.

    Refusals raise :class:`UnsupportedImageError` (a ValueError) naming the mode.
    """
    mode = image.mode
    if mode == "P":
        mode = "PA" if "transparency" in image.info else "RGB"
        image = image.convert("RGBA" if mode == "PA" else "RGB")
    if mode in PLAIN_MODES:
        return image.convert("RGB")
    if mode in ALPHA_MODES:
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    if mode in SIXTEEN_BIT_MODES or mode == "I":
        values = np.asarray(image).astype(np.int64)
        low, high = (int(values.min()), int(values.max())) if values.size else (0, 0)
        if low < 0 or high > 65535:
            raise UnsupportedImageError(f"32-bit grey values in [{low}, {high}] do not fit in 16 "
                                        "bits; convert the file to 8-bit")
        if mode in SIXTEEN_BIT_MODES or high > 255:
            values = (values * 255 + 32767) // 65535
        return Image.fromarray(values.astype(np.uint8), mode="L").convert("RGB")
    raise UnsupportedImageError(f"PIL mode {image.mode!r} cannot be shown as 8-bit RGB faithfully; "
                                "convert the file to 8-bit RGB")


def read_rgb(path) -> Image.Image:
    """Decode the image file ``path`` completely, as :func:`to_rgb` converts it."""
    with Image.open(path) as image:
        image.load()  # decodes the whole file, so truncation errors surface here
        return to_rgb(image)


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
        _end_torn_line(log_path)
        old = self.log_path.read_text(encoding="utf-8") if self.log_path.exists() else ""
        if old:
            with open(log_path, "a", encoding="utf-8") as log:
                log.write(old if old.endswith("\n") else old + "\n")
        if self._cleanup is not None:
            self._cleanup()
            self._cleanup = None
        self.log_path = log_path

    def handle(self, dataset: str, path: str, error: BaseException) -> None:
        """Record one failed read; raise when the policy says so."""
        message = f"cannot read image {path} of dataset {dataset!r}: {type(error).__name__}: {error}"
        if self.policy == "raise":
            raise BadImageError(
                f"{message} (replace the file, or pass on_bad_image='skip' / --on-bad-image skip "
                "to skip such files with a warning)"
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
        text = self.log_path.read_bytes().decode("utf-8", errors="replace")
        for line in text.splitlines():
            try:
                record = json.loads(line)
                found[record["path"]] = record["dataset"]
            except (ValueError, KeyError, TypeError):  # a line torn by a killed process
                continue
        return found

    def __getstate__(self):  # copies (worker processes) share the log file; only we delete it
        return {"policy": self.policy, "log_path": self.log_path, "_warned": set(), "_cleanup": None}


def _end_torn_line(path: Path) -> None:
    """Give a log whose last line was torn (a process killed mid-write) its line break, so the
    next record starts on a line of its own."""
    try:
        with open(path, "rb") as log:
            log.seek(0, os.SEEK_END)
            if log.tell() == 0:
                return
            log.seek(-1, os.SEEK_END)
            torn = log.read(1) != b"\n"
    except FileNotFoundError:
        return
    if torn:
        with open(path, "a", encoding="utf-8") as log:
            log.write("\n")


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
            except IMAGE_ERRORS as error:  # what PIL raises on bad files, bombs included
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
        return read_rgb(self.paths[index])

    def fingerprint(self) -> str:
        """The (path, label) pairs, not the image bytes (:mod:`~..fingerprint`)."""
        from ..fingerprint import digest

        return digest([self.name, *zip(self.paths, self.targets)])

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
        return to_rgb(Image.fromarray(np.asarray(self.array[self.index[index]])))

    def fingerprint(self) -> str:
        """The indices, labels, the array's shape and source (:mod:`~..fingerprint`)."""
        from ..fingerprint import digest

        return digest([self.name, self.source, list(np.shape(self.array)), self.index.tolist(), self.targets])

    def _describe(self, index: int) -> str:
        return f"{self.source}[{int(self.index[index])}]"

    def subset(self, indices: Sequence[int]) -> "ImageArrays":
        return ImageArrays(self.array, [self.targets[i] for i in indices], name=self.name,
                           index=self.index[list(indices)], bad_images=self.bad_images,
                           source=self.source)


__all__ = ["ALPHA_MODES", "BAD_IMAGE_POLICIES", "IMAGE_ERRORS", "PLAIN_MODES", "SIXTEEN_BIT_MODES", "BadImageError",
           "BadImages", "ImageArrays", "ImageFiles", "UnsupportedImageError", "read_rgb", "to_rgb"]
