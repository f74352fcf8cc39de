"""ZSCL: distil zero-shot CLIP on reference data, anchor and average the weights."""

from __future__ import annotations

from collections.abc import Sequence

from torch.utils.data import Dataset

from ...algorithms.teacher import FrozenCLIP
from ...algorithms.weight_copy import check_place
from ...benchmarks.images.reference_sets import check_image_dataset
from ...utils.checks import check_nonnegative_int
from ..needs import StrategyNeeds
from .lwf import check_distillation_options
from .plugins.distillation import ZSCLDistillation
from .plugins.weights import L2Anchor, WeightEnsemble
from .zscl_finetune import ZSCLFineTune

REFERENCE_HOW = (
    "ZSCL distils zero-shot CLIP on a reference image set and reference sentences "
    "(the paper: ImageNet's training images with the eval transform, and Conceptual "
    "Captions' validation captions); pass reference_images=<a dataset of image tensors, "
    "e.g. torchvision.datasets.ImageFolder(root, transform=eval_transform)> and "
    "reference_sentences=<a list of strings>; offline, "
    "moram_avalanche.benchmarks.images.reference_sets.synthetic_reference() gives a small "
    "synthetic pair (moram-avalanche run: --ref-images / --ref-sentences)")


class ZSCL(ZSCLFineTune):
    """ZSCL (Zheng et al., ICCV 2023) as its official MTIL code runs it (ZSCL.sh).

    Fine-tuning (:class:`ZSCLFineTune`: label smoothing 0.2, ``logit_scale`` frozen, ZSCL's
    MTIL learning rates, whose defaults apply) plus, every iteration:

    * two-way distillation of the frozen **zero-shot** teacher -- ``model`` as passed here --
      on a batch of ``reference_images`` against the teacher's embeddings of
      ``reference_sentences``
      (:class:`~moram_avalanche.strategies.clip.plugins.distillation.ZSCLDistillation`; T = 2,
      weights 1 and 1: ``--T``,
      ``--image_loss --text_loss``);
    * ``l2_weight * sum ||theta - theta_start||^2`` to the weights the experience started from
      (:class:`~moram_avalanche.strategies.clip.plugins.weights.L2Anchor`; ``--l2 1``);
    * weight ensembling every ``average_every`` iterations, the uniform average becoming the
      model -- the next experience's start and anchor -- at the end
      (:class:`~moram_avalanche.strategies.clip.plugins.weights.WeightEnsemble`; ``--we --avg_freq 100``).

    Args (keyword-only, besides ZSCLFineTune's):
        reference_images: a dataset of image tensors (or tuples whose first element is one),
            transformed with the model's *eval* transform -- e.g.
            ``torchvision.datasets.ImageFolder("imagenet/train", transform=eval_transform)``.
        reference_sentences: a list of strings, e.g. Conceptual Captions' validation captions.
        temperature, image_weight, text_weight: 2, 1, 1.
        l2_weight: 1 (0 disables the term). average_every: 100 (0 disables ensembling).
        weights_on: where the L2 anchor and the running average live: "cpu" (float32, the
            default: no accelerator memory, a host-to-device copy of the anchor every
            iteration) or "model" (the model's device and dtype: faster, two model-sized blocks).
        distill_batch_size: reference images per iteration (None: ``train_mb_size``, 64, as
            the reference). reference_workers: loader workers for the reference images.

    Raises:
        ValueError: when ``reference_images`` or ``reference_sentences`` is missing or empty.
    """

    needs = StrategyNeeds(references=("images", "sentences"))
    check_values = staticmethod(lambda options: _check_zscl_options(options))

    def __init__(self, *, model, tokenizer, reference_images: Dataset | None = None,
                 reference_sentences: Sequence[str] | None = None, temperature: float = 2.0,
                 image_weight: float = 1.0, text_weight: float = 1.0, l2_weight: float = 1.0,
                 average_every: int = 100, weights_on: str = "cpu",
                 distill_batch_size: int | None = None, reference_workers: int = 0,
                 plugins=None, **kwargs):
        _check_references(reference_images, reference_sentences)
        self.distillation = ZSCLDistillation(
            FrozenCLIP(model), reference_images, reference_sentences, temperature=temperature,
            image_weight=image_weight, text_weight=text_weight, batch_size=distill_batch_size,
            num_workers=reference_workers)
        self.l2_anchor = L2Anchor(l2_weight, on=weights_on) if l2_weight else None
        self.weight_ensemble = WeightEnsemble(average_every, on=weights_on) if average_every else None
        own = [p for p in (self.distillation, self.l2_anchor, self.weight_ensemble) if p is not None]
        super().__init__(model=model, tokenizer=tokenizer, plugins=[*own, *(plugins or [])], **kwargs)


def _check_zscl_options(options) -> None:
    missing = [name for name in ("reference_images", "reference_sentences") if options.get(name) is None]
    if missing:
        raise ValueError(f"ZSCL needs {' and '.join(missing)}: {REFERENCE_HOW}")
    check_distillation_options(options)
    for name in ("average_every", "reference_workers"):
        if name in options:
            check_nonnegative_int(name, options[name])
    if "weights_on" in options:
        check_place(options["weights_on"])


def _check_references(images, sentences) -> None:
    how = REFERENCE_HOW
    if isinstance(images, str):
        raise ValueError(f"reference_images={images!r} is not a dataset: {how}")
    if images is None or sentences is None:
        missing = [n for n, v in (("reference_images", images), ("reference_sentences", sentences))
                   if v is None]
        raise ValueError(f"ZSCL needs {' and '.join(missing)}: {how}")
    if isinstance(sentences, str) or not all(isinstance(s, str) for s in sentences):
        raise ValueError("reference_sentences must be a list of strings, not "
                         f"{type(sentences).__name__}: {how}")
    if not len(sentences):
        raise ValueError(f"reference_sentences is empty: {how}")
    check_image_dataset(images, "reference_images")


__all__ = ["ZSCL"]
