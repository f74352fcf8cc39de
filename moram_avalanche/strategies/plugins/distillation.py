"""ReferenceDistillation: the teacher-student term that LwF and ZSCL add to the CLIP loss."""

from __future__ import annotations

from collections.abc import Iterator

import torch
import torch.nn.functional as F
from avalanche.core import SupervisedPlugin
from torch.utils.data import DataLoader, Dataset

from .distill import two_way_distillation
from .teacher import FrozenCLIP


class ReferenceDistillation(SupervisedPlugin):
    """Each training iteration, distil a frozen teacher into the student on a reference batch.

    The ZSCL code's distillation step, shared by its LwF, LwF-VR and ZSCL runs [ZSCL
    mtil/src/models/finetune.py]: a batch of reference images -- drawn from its own shuffled
    loader, independent of the training batch, cycled when exhausted -- is embedded by the
    teacher (no gradient) and by the student's image encoder; both are scored against the
    same fixed text embeddings ``Z`` computed by the *teacher*, with the student's (frozen)
    logit scale, and :func:`~moram_avalanche.strategies.distill.two_way_distillation` of the
    two ``[batch, N]`` logit matrices is added to ``strategy.loss`` in ``before_backward``.
    The student's text encoder gets no distillation gradient (as in the reference).

    Subclasses say what is distilled: :meth:`reference_images` (a dataset whose items are
    image tensors, or tuples whose first element is one) and :meth:`reference_text` (``Z``,
    ``[N, D]``, L2-normalised); both are asked at the start of every training experience.
    The reference loader is rebuilt every experience (one ``--ref-dataset`` loader per task
    in the reference) from the global RNG, so a resumed run draws the same batches.

    Args:
        teacher: the frozen teacher.
        temperature, image_weight, text_weight: of the distillation (ZSCL: 2, 1, 1).
        batch_size: reference images per iteration (None: the strategy's ``train_mb_size``;
            the reference uses ``--batch-size``, 64, for both).
        num_workers: of the reference image loader.
    """

    def __init__(self, teacher: FrozenCLIP, *, temperature: float = 2.0, image_weight: float = 1.0,
                 text_weight: float = 1.0, batch_size: int | None = None, num_workers: int = 0) -> None:
        super().__init__()
        if temperature <= 0:
            raise ValueError(f"temperature must be positive, got {temperature}")
        self.teacher = teacher
        self.temperature = temperature
        self.image_weight = image_weight
        self.text_weight = text_weight
        self.batch_size = batch_size
        self.num_workers = num_workers
        self.last_loss: torch.Tensor | None = None
        self._batches: Iterator | None = None
        self._text: torch.Tensor | None = None

    # -- what is distilled (subclasses)
    def reference_images(self, strategy) -> Dataset:
        raise NotImplementedError

    def reference_text(self, strategy) -> torch.Tensor:
        raise NotImplementedError

    # -- hooks
    def before_training_exp(self, strategy, **kwargs):
        self.teacher.to(strategy.device)
        self._text = self.reference_text(strategy)
        loader = DataLoader(self.reference_images(strategy), shuffle=True,
                            batch_size=self.batch_size or strategy.train_mb_size,
                            num_workers=self.num_workers)
        self._batches = _cycle(loader)

    def before_backward(self, strategy, **kwargs):
        images = _images_of(next(self._batches)).to(strategy.device, non_blocking=True)
        with strategy._autocast():
            teacher = self.teacher.encode_image(images)
            student = F.normalize(strategy.model.encode_image(images), dim=-1)
            scale = strategy.model.logit_scale.exp()
            text = self._text.to(student.dtype)
            self.last_loss = two_way_distillation(
                scale * teacher.to(student.dtype) @ text.t(), scale * student @ text.t(),
                temperature=self.temperature, image_weight=self.image_weight,
                text_weight=self.text_weight)
        strategy.loss += self.last_loss

    def after_training_exp(self, strategy, **kwargs):
        self._batches = None  # frees loader workers; keeps the strategy picklable
        self._text = None
        self.last_loss = None

    def held_bytes(self) -> int:
        """Bytes held between iterations: the teacher and the text embeddings."""
        text = 0 if self._text is None else self._text.numel() * self._text.element_size()
        return self.teacher.nbytes + text


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


def _cycle(loader) -> Iterator:
    while True:
        empty = True
        for batch in loader:
            empty = False
            yield batch
        if empty:
            raise RuntimeError("the reference image set is empty")


def _images_of(batch) -> torch.Tensor:
    images = batch[0] if isinstance(batch, (list, tuple)) else batch
    if not isinstance(images, torch.Tensor):
        raise TypeError(f"reference images must be tensors, got {type(images).__name__}: "
                        "give the reference dataset the model's eval transform")
    return images
