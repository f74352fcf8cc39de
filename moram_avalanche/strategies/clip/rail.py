"""RAIL-Primal and RAIL-Dual (Xu et al., NeurIPS 2024): training-free analytic heads on frozen CLIP.

Facts from the official code [linghan1997/Regression-based-Analytic-Incremental-Learning
``primal_RAIL.py``, ``dual_RAIL.py``, ``utils.py``, ``configs/analytic_clip.yaml``; HEAD
eaac644, config of commit c76eb37]:

* CLIP stays frozen. Image features are L2-normalised (``encode_images``).
* Per domain, one pass over its (few-shot) training set with the training transform
  (``augmentation_time: 1``), batch 128, labels one-hot over every class learned so far (the
  domain's classes after those of the domains before it).
* Primal: a fixed random ``512 -> 15000`` ReLU expansion and ridge regression with
  ``lambda = 0.1``, kept by the recursive (Woodbury) update. Dual: kernel ridge regression with
  a Gaussian kernel (``gamma = 0.1``, ``lambda = 0.001``) over every training feature so far.
* Inference: zero-shot softmax over the label space; where its argmax is a learned class,
  ``(1 - 0.8) p_zs + 0.8 * head`` (the head's scores in their classes' columns, 0 elsewhere);
  else the zero-shot probabilities (:func:`~moram_avalanche.algorithms.analytic.fuse_with_zero_shot`).

Where this differs (our choices, stated): the zero-shot classifier is the benchmark's (its
domains' ``template`` -- per-dataset ``template[0]`` as MoRAM and CoDyRA, or the MTIL template
ensemble) rather than RAIL's single "a photo of a {}." for every class, so that every row of a
table shares one classifier (baselines reference, section 5.1); the logit scale is the model's
``exp(logit_scale)`` (100 for OpenAI CLIP, RAIL's constant). In the per-domain label space
(MTIL) the zero-shot argmax is always one of the domain's classes, so the rule reads: fuse
exactly when the domain has been learned.
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from ...algorithms.analytic import FUSION_WEIGHT, HIDDEN_DIM, RBF_GAMMA, fuse_with_zero_shot
from ...benchmarks.images.clip_benchmark import domain_of
from ..needs import StrategyNeeds
from .loop import CLIPStrategy
from .plugins.analytic import AnalyticHead


class RAIL(CLIPStrategy):
    """RAIL on the shared CLIP loop: ``form`` "primal" or "dual" (see the module docstring).

    Training is one analytic pass per experience (no optimizer, no ``iterations``): CLIP's
    frozen image features feed the :class:`~moram_avalanche.strategies.clip.plugins.analytic.AnalyticHead`
    plugin; the training "loss" reported per batch is the mean squared residual of the head on
    that batch after taking it in. Evaluation outputs the fused scores.

    Args (keyword-only, besides CLIPStrategy's):
        form: "primal" or "dual".
        fusion_weight: the head's share where zero-shot CLIP picks a learned class (RAIL: 0.8,
            ``configs/analytic_clip.yaml`` ``fusion_weight``; the first commit had 0.9).
        hidden_dim: primal: the random expansion's size (15000, ``hidden_dim``); None: none.
        regularization: ridge ``lambda`` (None: 0.1 primal, ``regularization``; 0.001 dual,
            ``kernel_ridge_regression(lamda=0.001)`` in ``dual_RAIL.py``).
        kernel, gamma: dual: "rbf" with gamma 0.1 (``gamma``), or "linear".
        passes: passes over each training set (``augmentation_time``: 1); with an augmenting
            train transform each pass sees new views.
        seed: of the random expansion (None: torch's global RNG, as the original after its
            ``torch.manual_seed(42)``).
        train_mb_size: 128 (``batch_size``); the solution does not depend on it.
    """

    #: not data-parallel: each process would fit the analytic head on its own share of the data
    needs = StrategyNeeds(trains=False, data_parallel=False)
    check_values = staticmethod(lambda options: _check_rail_options(options))
    #: one analytic pass over each experience's data (:meth:`training_epoch`), no iteration budget
    trains_by_iterations = False

    def __init__(self, *, model, tokenizer, form: str = "primal", fusion_weight: float = FUSION_WEIGHT,
                 hidden_dim: Optional[int] = HIDDEN_DIM, regularization: Optional[float] = None,
                 kernel: str = "rbf", gamma: float = RBF_GAMMA, passes: int = 1, seed: Optional[int] = None,
                 train_mb_size: int = 128, device="cpu", plugins=None, **kwargs):
        kwargs.pop("iterations", None)
        model.requires_grad_(False)
        generator = torch.Generator().manual_seed(seed) if seed is not None else None
        self.head = AnalyticHead(form, int(model.visual.output_dim), hidden_dim=hidden_dim,
                                 regularization=regularization, kernel=kernel, gamma=gamma,
                                 generator=generator, device=device)
        self.fusion_weight = float(fusion_weight)
        self.passes = passes
        super().__init__(model=model, tokenizer=tokenizer, iterations=0, train_mb_size=train_mb_size,
                         device=device, plugins=[self.head, *(plugins or [])], **kwargs)

    # ------------------------------------------------------------------ training: one analytic pass
    def training_epoch(self, **kwargs):
        domain = domain_of(self.experience)
        offset = self.head.classes  # the domain's classes come after every class learned before
        self.head.begin_task(len(domain.classnames))
        total = self.passes * len(self.dataloader)
        bar = tqdm(total=total, desc=f"fit {domain.name}", disable=not self.progress, leave=False)
        for _ in range(self.passes):
            for self.mbatch in self.dataloader:  # noqa: B020 - Avalanche's templates' own idiom
                self._unpack_minibatch()
                self._before_training_iteration(**kwargs)
                features = self.image_features(self.mb_x)
                # the domain's own class of each sample (the "all" space's dataset labels are global)
                local = self.label_space.local_labels(self.mb_y, self.mb_task_id.long())
                targets = F.one_hot(local + offset, self.head.classes).float()
                self.head.observe(features, targets)
                if self.head.form == "primal":
                    scores = self.head.scores(features)
                    self.loss = F.mse_loss(scores, targets.to(scores.device)).to(self.device)
                    self.mb_output = scores[:, offset:].to(self.device)
                else:  # the dual head is solved at the end of the task
                    self.loss = self._make_empty_loss()
                    self.mb_output = targets[:, offset:].to(self.device)
                self._after_training_iteration(**kwargs)
                bar.update()
        self.head.end_task()
        bar.close()

    @torch.no_grad()
    def image_features(self, images: torch.Tensor) -> torch.Tensor:
        """L2-normalised CLIP image features (RAIL's ``encode_images``)."""
        with self.autocast():
            return F.normalize(self.model.encode_image(images).float(), dim=-1)

    # ------------------------------------------------------------------ evaluation: the fusion
    def forward(self):
        if self.is_training:
            raise RuntimeError("RAIL trains analytically (training_epoch); forward is for evaluation")
        features = self.image_features(self.mb_x)
        classifier = self.eval_classifier(self.experience).to(features.dtype)
        logits = self.model.logit_scale.exp() * features @ classifier.t()
        columns = self.head_columns(self.experience).to(logits.device)
        if not bool((columns >= 0).any()):
            return torch.softmax(logits.float(), dim=-1)
        return fuse_with_zero_shot(logits, self.head.scores(features).to(logits.device), columns,
                                   self.fusion_weight)

    def head_columns(self, experience) -> torch.Tensor:
        """For each class of ``experience``'s label space, its column in the head (-1: not learned)."""
        starts, start = {}, 0
        for domain in self.seen_domains:
            starts[domain.name] = start
            start += len(domain.classnames)
        domains = experience.domains if experience.label_space == "all" else (domain_of(experience),)
        columns = []
        for domain in domains:
            first = starts.get(domain.name)
            count = len(domain.classnames)
            columns.extend(range(first, first + count) if first is not None else [-1] * count)
        return torch.tensor(columns, dtype=torch.long)


def _check_rail_options(options) -> None:
    if options.get("iterations"):
        raise ValueError("RAIL is training-free (one analytic pass per domain): leave `iterations` "
                         "unset; `passes` sets the passes over the training data")
    if "fusion_weight" in options and not 0.0 <= options["fusion_weight"] <= 1.0:
        raise ValueError(f"fusion_weight must be in [0, 1], got {options['fusion_weight']}")
    passes = options.get("passes", 1)
    if not isinstance(passes, int) or passes < 1:
        raise ValueError(f"passes must be a positive int, got {passes!r}")


class RAILPrimal(RAIL):
    """RAIL-Primal: random ReLU expansion (15000) + recursive ridge regression (lambda 0.1)."""

    def __init__(self, *, model, tokenizer, **kwargs):
        if kwargs.setdefault("form", "primal") != "primal":
            raise ValueError("RAILPrimal is the primal form; use RAILDual or RAIL(form=...)")
        super().__init__(model=model, tokenizer=tokenizer, **kwargs)


class RAILDual(RAIL):
    """RAIL-Dual: Gaussian-kernel ridge regression (gamma 0.1, lambda 0.001) over every feature seen."""

    def __init__(self, *, model, tokenizer, **kwargs):
        if kwargs.setdefault("form", "dual") != "dual":
            raise ValueError("RAILDual is the dual form; use RAILPrimal or RAIL(form=...)")
        super().__init__(model=model, tokenizer=tokenizer, **kwargs)


__all__ = ["RAIL", "RAILDual", "RAILPrimal"]
