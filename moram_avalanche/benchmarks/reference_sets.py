"""Reference images and sentences (ZSCL, DDAS): from disk, or a small synthetic pair for offline runs.

ZSCL distils zero-shot CLIP on images and sentences unrelated to the stream; its paper uses
ImageNet's training set and the captions of Conceptual Captions' validation split [ZSCL
mtil/scripts/ZSCL.sh, mtil/src/datasets/cc.py]. Any image folder and any list of sentences
will do: :func:`image_folder`, :func:`read_sentences`. :func:`synthetic_reference` draws the
offline stand-in the demo uses.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Sequence
from pathlib import Path

import torch


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

    ``images`` captioned pictures (:func:`~moram_avalanche.benchmarks.synthetic.caption_pairs`,
    with their captions dropped) and the distinct captions of ``sentences`` further pairs --
    the synthetic counterpart of ImageNet images and Conceptual Captions sentences.
    ``transform`` is the model's eval transform.
    """
    from .synthetic import caption_pairs

    if images < 1 or sentences < 1:
        raise ValueError(f"need at least one image and one sentence, got {images} and {sentences}")
    pictures, captions = caption_pairs(images + sentences, seed=seed)
    return ImageList(pictures[:images], transform), list(dict.fromkeys(captions[images:]))


def image_folder(root, transform: Callable):
    """``torchvision.datasets.ImageFolder(root, transform)`` with a clear error for a missing folder."""
    from torchvision.datasets import ImageFolder

    root = Path(root).expanduser()
    if not root.is_dir():
        raise ValueError(f"reference image folder {root} does not exist: give a folder of class "
                         "sub-folders of images (e.g. ImageNet's train/)")
    return ImageFolder(str(root), transform=transform)


def read_sentences(path) -> list[str]:
    """Sentences from a text file, one per line; or the caption column of a CSV/TSV file.

    A tab-separated file whose header has a ``title`` column (what ZSCL's ``gather_cc.py``
    writes for Conceptual Captions) gives that column; another ``.tsv`` gives its first
    column (Conceptual Captions' own ``caption<TAB>url`` files). Blank lines are skipped.
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise ValueError(f"reference sentence file {path} does not exist: give a text file with "
                         "one sentence per line, or a Conceptual Captions TSV")
    with path.open(newline="", encoding="utf-8") as file:
        if path.suffix.lower() in (".tsv", ".csv"):
            rows = list(csv.reader(file, delimiter="\t"))
            column = rows[0].index("title") if rows and "title" in rows[0] else 0
            body = rows[1:] if rows and "title" in rows[0] else rows
            sentences = [row[column].strip() for row in body if len(row) > column]
        else:
            sentences = [line.strip() for line in file]
    sentences = [s for s in sentences if s]
    if not sentences:
        raise ValueError(f"{path} holds no sentences")
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


__all__ = ["ImageList", "check_image_dataset", "image_folder", "read_sentences", "reference_data",
           "synthetic_reference"]
