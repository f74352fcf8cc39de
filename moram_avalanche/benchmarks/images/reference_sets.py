"""Reference images and sentences (ZSCL, DDAS): from disk, or a small synthetic pair for offline runs.

ZSCL distils zero-shot CLIP on images and sentences unrelated to the stream; its paper uses
ImageNet's training set and the captions of Conceptual Captions' validation split [ZSCL
mtil/scripts/ZSCL.sh, mtil/src/datasets/cc.py]. Any image folder and any list of sentences
will do: :func:`image_folder`, :func:`read_sentences`. :func:`synthetic_reference` draws the
offline stand-in the demo uses.
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Callable, Sequence

import torch

from .datasets import IMAGE_ERRORS, BadImageError, BadImages, read_rgb


class ImageList(torch.utils.data.Dataset):
    """In-memory images, each passed through ``transform`` on access."""

    def __init__(self, images: Sequence, transform: Callable) -> None:
        self.images, self.transform = list(images), transform

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int) -> torch.Tensor:
        return self.transform(self.images[index])


def synthetic_reference(transform: Callable, *, images: int = 128, sentences: int = 200,
                        seed: int = 12345) -> tuple[ImageList, list[str]]:
    """Images and captions of the synthetic pre-training world, drawn apart from the demo's own.

    ``images`` captioned pictures (:func:`~moram_avalanche.benchmarks.images.synthetic.caption_pairs`,
    with their captions dropped) and the distinct captions of ``sentences`` further pairs --
    the synthetic counterpart of ImageNet images and Conceptual Captions sentences.
    ``transform`` is the model's eval transform.
    """
    from .synthetic import caption_pairs

    if images < 1 or sentences < 1:
        raise ValueError(f"need at least one image and one sentence, got {images} and {sentences}")
    pictures, captions = caption_pairs(images + sentences, seed=seed)
    return ImageList(pictures[:images], transform), list(dict.fromkeys(captions[images:]))


def image_folder(root, transform: Callable, what: str = "reference image folder", bad_images=None):
    """``torchvision.datasets.ImageFolder(root, transform)`` over a folder of class sub-folders of
    images (e.g. ImageNet's ``train/``), checked first with a clear error naming the folder.

    The reference images are unlabelled, so a class sub-folder without images is skipped (not
    refused, as ``ImageFolder`` alone does); a folder that is missing, a file, unreadable, a
    link loop, without sub-folders (images lying directly in it) or without any image is
    refused with what was found and the fix. An image that cannot be decoded (a decompression
    bomb included) goes to ``bad_images`` (a :class:`~moram_avalanche.benchmarks.images.datasets.BadImages`
    policy; default: skip it with a warning, using the next readable image instead).
    """
    import inspect

    from torchvision.datasets import ImageFolder
    from torchvision.datasets.folder import IMG_EXTENSIONS

    from ...utils.paths import check_input_path

    fix = "give a folder of class sub-folders of images (e.g. ImageNet's train/)"
    root = check_input_path(root, what, kind="dir", fix=fix)
    try:
        entries = list(os.scandir(root))
        classes = [e for e in entries if e.is_dir()]
        loose = [e.name for e in entries if e.is_file() and e.name.lower().endswith(IMG_EXTENSIONS)]
        if not classes:
            found = f"{len(loose)} image file(s) directly in it, e.g. {loose[0]}" if loose else "nothing usable"
            raise ValueError(f"{what} {root}: expected class sub-folders of images, found {found}; "
                             f"{fix} (loose images: move them into a sub-folder)")
        images = 0
        for folder in classes:
            for _, _, files in os.walk(folder.path, followlinks=True):
                images += sum(name.lower().endswith(IMG_EXTENSIONS) for name in files)
                if images:
                    break
            if images:
                break
    except OSError as err:
        raise ValueError(f"{what} {root} cannot be listed ({err.strerror or err} at "
                         f"{err.filename or root}); {fix}") from None
    if not images:
        raise ValueError(f"{what} {root}: its {len(classes)} sub-folder(s) hold no image files "
                         f"({', '.join(IMG_EXTENSIONS)}); {fix}")
    extra = {"allow_empty": True} if "allow_empty" in inspect.signature(ImageFolder).parameters else {}
    dataset = ImageFolder(str(root), transform=transform, loader=read_rgb, **extra)
    return CheckedImages(dataset, what, bad_images)


class CheckedImages(torch.utils.data.Dataset):
    """An ``ImageFolder`` whose unreadable files are handed to a ``BadImages`` policy: skipped
    (the next readable image is returned) or refused with the file named."""

    def __init__(self, folder, what: str, bad_images=None) -> None:
        self.folder, self.what = folder, what
        self.bad_images = bad_images or BadImages("skip")

    def __len__(self) -> int:
        return len(self.folder)

    def __getattr__(self, name):  # samples, classes, transform, ... of the ImageFolder
        if name == "folder":
            raise AttributeError(name)
        return getattr(self.folder, name)

    def __getitem__(self, index: int):
        for offset in range(len(self.folder)):
            candidate = (index + offset) % len(self.folder)
            try:
                return self.folder[candidate]
            except IMAGE_ERRORS as error:
                self.bad_images.handle(self.what, self.folder.samples[candidate][0], error)
        raise BadImageError(f"no image of {self.what} {self.folder.root} can be read")


def read_sentences(path, what: str = "reference sentence file") -> list[str]:
    """Sentences from a UTF-8 text file, one per line; or the caption column of a CSV/TSV file.

    A tab-separated file whose header has a ``title`` column (what ZSCL's ``gather_cc.py``
    writes for Conceptual Captions) gives that column; another ``.tsv`` gives its first
    column (Conceptual Captions' own ``caption<TAB>url`` files). Blank lines are skipped.
    A missing file, a folder, a binary or non-UTF-8 file, or one without sentences is a
    ValueError naming the file and what was found.
    """
    from ...utils.paths import check_input_path

    fix = "give a UTF-8 text file with one sentence per line, or a Conceptual Captions TSV"
    path = check_input_path(path, what, kind="file", fix=fix)
    try:
        raw = path.read_bytes()
        if b"\x00" in raw[:65536]:
            raise ValueError(f"{what} {path}: expected text, found a binary file (NUL bytes); {fix}")
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        line = raw[:err.start].count(b"\n") + 1
        raise ValueError(f"{what} {path}: expected UTF-8 text, found byte {raw[err.start]:#04x} on line "
                         f"{line} that is not UTF-8; convert it (iconv -t UTF-8) or {fix}") from None
    except OSError as err:
        raise ValueError(f"{what} {path} cannot be read ({err.strerror or err}); {fix}") from None
    if path.suffix.lower() in (".tsv", ".csv"):
        try:
            rows = list(csv.reader(io.StringIO(text, newline=""), delimiter="\t"))
        except csv.Error as err:
            raise ValueError(f"{what} {path}: not a readable tab-separated file ({err}); {fix}") from None
        column = rows[0].index("title") if rows and "title" in rows[0] else 0
        body = rows[1:] if rows and "title" in rows[0] else rows
        sentences = [row[column].strip() for row in body if len(row) > column]
    else:
        sentences = [line.strip() for line in text.splitlines()]
    sentences = [s for s in sentences if s]
    if not sentences:
        raise ValueError(f"{what} {path} holds no sentences (it is empty or blank); {fix}")
    return sentences


def reference_data(transform: Callable, *, images=None, sentences=None) -> dict:
    """``{"images": ..., "sentences": ...}`` read from command-line values (None: not given).

    ``images``: an image folder, "synthetic" (:func:`synthetic_reference`), or "none" (kept as
    the string: a strategy may opt out of reference images, MoE-Adapters' DDAS does);
    ``sentences``: a text/TSV file, or "synthetic". ``transform`` is the model's eval transform.
    Which of them a strategy takes is its declaration
    (:class:`~moram_avalanche.strategies.needs.StrategyNeeds`).
    """
    data = {"images": None, "sentences": None}
    if "synthetic" in (images, sentences):
        pictures, captions = synthetic_reference(transform)
    if images is not None:
        data["images"] = (pictures if images == "synthetic" else images if images == "none"
                          else image_folder(images, transform))
    if sentences is not None:
        data["sentences"] = captions if sentences == "synthetic" else read_sentences(sentences)
    return data


def check_image_dataset(dataset, name: str) -> None:
    """A clear error unless ``dataset`` is non-empty and yields image tensors ``[C, H, W]``."""
    try:
        size = len(dataset)
    except TypeError:
        raise ValueError(f"{name} must be a map-style dataset (with len), got {type(dataset).__name__}") from None
    if size == 0:
        raise ValueError(f"{name} is empty")
    item = dataset[0]
    image = item[0] if isinstance(item, (list, tuple)) else item
    if not isinstance(image, torch.Tensor) or image.dim() != 3:
        raise ValueError(f"{name} must yield image tensors [C, H, W] (or tuples starting with one), got "
                         f"{type(image).__name__}: give the dataset the model's eval transform, e.g. "
                         "ImageFolder(root, transform=eval_transform) with load_clip's eval_transform")


__all__ = ["CheckedImages", "ImageList", "check_image_dataset", "image_folder", "read_sentences", "reference_data",
           "synthetic_reference"]
