"""Distillation plugins: the teacher-student term LwF, ZSCL and iCaRL add to the CLIP loss, and their teachers."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch
import torch.nn.functional as F
from avalanche.core import SupervisedPlugin
from torch.utils.data import DataLoader, Dataset

from ....algorithms.distillation import two_way_distillation
from ....algorithms.teacher import FrozenCLIP
from ....benchmarks.images.clip_benchmark import domain_of
from ....utils.iteration import cycle
from .exemplars import ExemplarMemory


class ReferenceDistillation(SupervisedPlugin, supports_distributed=True):
    """Each training iteration, distil a frozen teacher into the student on a reference batch.

    The ZSCL code's distillation step, shared by its LwF, LwF-VR and ZSCL runs [ZSCL
    mtil/src/models/finetune.py]: a batch of reference images -- drawn from its own shuffled
    loader, independent of the training batch, cycled when exhausted -- is embedded by the
    teacher (no gradient) and by the student's image encoder; both are scored against the
    same fixed text embeddings ``Z`` computed by the *teacher*, with the student's (frozen)
    logit scale, and :func:`~moram_avalanche.algorithms.distillation.two_way_distillation` of the
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

    #: whether the reference loader shuffles (the ZSCL code's iCaRL reads its memory in order)
    shuffle: bool = True

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
        loader = DataLoader(self.reference_images(strategy), shuffle=self.shuffle,
                            batch_size=self.batch_size or strategy.train_mb_size,
                            num_workers=self.num_workers)
        self._batches = cycle(loader, "the reference image set")

    def before_backward(self, strategy, **kwargs):
        images = _images_of(next(self._batches)).to(strategy.device, non_blocking=True)
        with strategy.autocast():
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


class LwFDistillation(ReferenceDistillation, supports_distributed=True):
    """LwF's teacher, images and texts [ZSCL mtil/scripts/lwf.sh, lwf_vr.sh; mtil/src/models/finetune.py].

    * teacher: the model as the experience starts, i.e. the previous experience's final model
      (``--ref-model`` = the previous checkpoint; zero-shot CLIP for the first task);
    * images: the experience's own training set with the *eval* transform, in a separately
      shuffled loader (``--ref-dataset`` = the current dataset, loaded with the eval transform);
    * texts: the current domain's class prompts (its training template), embedded by the
      teacher -- or, for LwF-VR, the fixed ``tokens`` (``--ref-sentences random``).
    """

    def __init__(self, teacher: FrozenCLIP, tokens: torch.Tensor | None = None, **kwargs) -> None:
        super().__init__(teacher, **kwargs)
        self.tokens = tokens

    def before_training_exp(self, strategy, **kwargs):
        self.teacher.to(strategy.device)
        self.teacher.copy_from(strategy.model)
        super().before_training_exp(strategy, **kwargs)

    def reference_images(self, strategy):
        return strategy.experience.dataset.eval()

    def reference_text(self, strategy):
        if self.tokens is not None:
            return self.teacher.encode_tokens(self.tokens, strategy.text_head.batch_size)
        prompts = domain_of(strategy.experience).prompts()
        return self.teacher.encode_text(prompts, strategy.tokenizer, strategy.text_head.batch_size)


class ZSCLDistillation(ReferenceDistillation, supports_distributed=True):
    """ZSCL's teacher, images and texts [ZSCL mtil/src/models/finetune.py, mtil/scripts/ZSCL.sh].

    * teacher: zero-shot CLIP, never updated (not the previous model);
    * images: a reference image set (ImageNet's training set, eval transform, in the paper);
    * texts: reference sentences (the Conceptual Captions validation captions in the paper),
      embedded once by the teacher (the reference re-embeds them every iteration with the
      same frozen teacher: the same values).
    """

    def __init__(self, teacher: FrozenCLIP, images: Dataset, sentences: Sequence[str], **kwargs) -> None:
        super().__init__(teacher, **kwargs)
        self.images = images
        self.sentences = list(sentences)
        self._embedded = None

    def reference_images(self, strategy):
        return self.images

    def reference_text(self, strategy):
        if self._embedded is None:
            self._embedded = self.teacher.encode_text(self.sentences, strategy.tokenizer,
                                                      strategy.text_head.batch_size)
        self._embedded = self._embedded.to(self.teacher.device)
        return self._embedded


class ExemplarDistillation(ReferenceDistillation):
    """iCaRL's distillation in the ZSCL MTIL code [Thunderbeee/ZSCL mtil/src/models/icarl.py]:

    * images: the exemplar memory (:class:`~moram_avalanche.strategies.clip.plugins.exemplars.ExemplarMemory`,
      eval transform), read in order in batches of the training batch size and cycled
      (``batch(ref_images, args.batch_size)``); nothing is distilled while it is empty (the
      first domain is plain fine-tuning, ``pure_finetune``);
    * texts: the current domain's class prompts (its training template), embedded by the teacher
      ("use training dataset template in iCaRL");
    * teacher: zero-shot CLIP (``--ref-model`` is never set by the iCaRL driver, so
      ``ref_model`` is the freshly loaded pre-trained model) or, with ``previous=True``, the
      model as each experience starts (classic iCaRL's previous network).
    """

    shuffle = False

    def __init__(self, teacher: FrozenCLIP, memory: ExemplarMemory, *, previous: bool = False, **kwargs) -> None:
        super().__init__(teacher, **kwargs)
        self.memory = memory
        self.previous = previous

    def before_training_exp(self, strategy, **kwargs):
        if not len(self.memory):
            self._batches = None
            return
        if self.previous:
            self.teacher.to(strategy.device)
            self.teacher.copy_from(strategy.model)
        super().before_training_exp(strategy, **kwargs)

    def before_backward(self, strategy, **kwargs):
        if self._batches is not None:
            super().before_backward(strategy, **kwargs)

    def reference_images(self, strategy):
        return self.memory.dataset(strategy.experience)

    def reference_text(self, strategy):
        prompts = domain_of(strategy.experience).prompts()
        return self.teacher.encode_text(prompts, strategy.tokenizer, strategy.text_head.batch_size)


def _images_of(batch) -> torch.Tensor:
    images = batch[0] if isinstance(batch, (list, tuple)) else batch
    if not isinstance(images, torch.Tensor):
        raise TypeError(f"reference images must be tensors, got {type(images).__name__}: "
                        "give the reference dataset the model's eval transform")
    return images


__all__ = ["ExemplarDistillation", "LwFDistillation", "ReferenceDistillation", "ZSCLDistillation"]
