"""CLIPStrategy: the training and evaluation loop shared by every CLIP strategy of this package."""

from __future__ import annotations

import contextlib
import warnings
from typing import List, Optional

import torch
import torch.nn.functional as F
from avalanche.training.plugins.evaluation import default_evaluator
from avalanche.training.templates import SupervisedTemplate
from tqdm.auto import tqdm

from ...algorithms.data_parallel import all_reduce_sum, gather, gather_with_grad, world_size
from ...algorithms.losses import clip_continual_loss, image_to_text_loss, text_to_image_loss
from ...algorithms.schedules import DomainLR, cosine_lr_factor
from ...benchmarks.images.clip_benchmark import Domain, domain_of
from ...benchmarks.images.label_space import LabelSpace
from ...clip.head import TextHead
from ...clip.towers import text_parameters
from ...models.scoring import MASK_VALUE, class_embeddings, evaluation_classifier, own_domain_logits, scores
from ...utils.devices import resolve_device
from ..loop import ContinualLoop
from ..moram_setting import MORAM
from ..plugins.budget import IterationBudget
from ..plugins.progress import TrainingProgress
from ..plugins.schedule import IterationSchedule
from ..plugins.validate import check_plugins
from .image_cache import ImageFeatureCache


class CLIPStrategy(ContinualLoop):
    """Continual learning of an open_clip model, one domain (experience) at a time.

    The loop of the MoRAM release (and of the ZSCL / MoE-Adapters lineage): the package's loop
    harness (:class:`~moram_avalanche.strategies.loop.ContinualLoop`: the one option check, the
    adapters-only checkpoint state, a fresh AdamW per experience, sharded training batches, the
    data-parallel guard) with CLIP's problem:

    * Avalanche's own training loop with the plugins its strategies get too (:mod:`.builtins`):
      exactly ``iterations`` optimizer steps per experience, cycling (and reshuffling) the
      training data however small it is (:attr:`budget`,
      :class:`~moram_avalanche.strategies.plugins.budget.IterationBudget`), and a per-iteration
      cosine schedule with optional linear warm-up restarted every experience (:attr:`schedule`,
      :class:`~moram_avalanche.strategies.plugins.schedule.IterationSchedule`; a subclass may
      set :attr:`lr_factor` to another per-step factor);
    * AdamW's betas (0.9, 0.9999) and weight decay 0 by default (MoRAM release);
    * CLIP's scoring of :mod:`~moram_avalanche.models.scoring` (as
      :class:`~moram_avalanche.models.classifier.CLIPClassifier`): logits
      ``exp(logit_scale) * f_img @ E^T`` against the embeddings of ``template.format(classname)``;
      text embeddings are cached while the text encoder has no trainable parameters;
    * the loss of :func:`~moram_avalanche.algorithms.losses.clip_continual_loss` (image->text
      over the current classes, plus text->image over seen + current classes when the vision
      encoder trains; ``text_to_image_loss=False`` keeps the image->text term only);
    * evaluation in the label space the benchmark declares (``experience.label_space``):
      "all" -- every class of every domain, global labels (X-TAIL) -- or "domain" -- the
      experience's own classes with its template ensemble (MTIL);
    * evaluation on the fastest path that gives the same numbers: under
      ``torch.inference_mode()``, in minibatches of ``eval_mb_size`` (default
      :data:`EVAL_BATCH_FACTOR` x ``train_mb_size``: no activations are kept), and with the
      image features of an unchanged image tower computed once and replayed by later
      evaluations (:mod:`~moram_avalanche.strategies.clip.image_cache`; ``cache_image_features``);
    * replay composes: a training batch may hold samples of earlier domains (Avalanche's
      ``ReplayPlugin`` mixes them in); each sample is scored against its own domain's classes
      (its task label is its domain) in the image->text term, and against every seen and
      current class in the text->image term (:meth:`mixed_batch_loss`); a batch of the
      current domain alone gets exactly the release's loss;
    * data-parallel over ``torch.distributed`` processes with the
      :class:`~moram_avalanche.strategies.plugins.data_parallel.DataParallel` plugin: each
      process takes a contiguous share of every global batch (the batches of one process,
      :class:`~moram_avalanche.algorithms.data_parallel.ShardedBatches`), the text->image term
      sees the images of every process (gathered with gradient), so the averaged gradient is
      the one-process gradient of the whole batch.

    Experiences must carry ``classnames``, ``template``, ``domain`` and the label-space
    attributes that :func:`~moram_avalanche.benchmarks.images.clip_benchmark.clip_benchmark` sets.

    Replay in the loop, for strategies built on it (a replay buffer is any Avalanche
    ``ReplayPlugin`` / storage policy; the batch's ``mb_task_id`` tells each sample's domain):
    :attr:`label_space` (the stream's :class:`~moram_avalanche.benchmarks.images.label_space.LabelSpace`:
    ``local_labels`` maps dataset labels to each domain's classes), :meth:`training_text_of`
    (a domain's training class embeddings for the current minibatch), :meth:`seen_class_rows`
    (where each sample's domain starts among the seen + current classes) and
    :meth:`mixed_batch_loss` (the loss of a batch mixing domains; override it to change how
    replayed samples are scored). In training, :meth:`forward` returns each sample's scores
    against its own domain's classes laid out in the label space
    (:func:`~moram_avalanche.models.scoring.own_domain_logits`), so Avalanche's accuracy
    metrics and logit-storing plugins read them as any model's output.

    Growing adapters grow right before Avalanche's model adaptation and the experience's
    optimizer (:mod:`~moram_avalanche.strategies.plugins.growth`), as in any Avalanche strategy.

    Options are checked before anything is built (:meth:`~..loop.ContinualLoop.__new__`): an
    unknown or misspelled keyword or a value of the wrong type is a ``TypeError``, a value out
    of range a ``ValueError``, before the model is touched.

    Args (keyword-only; the rest go to ``SupervisedTemplate``):
        model: an open_clip CLIP model. tokenizer: its tokenizer.
        iterations: optimizer steps per experience (MoRAM's, :data:`~moram_avalanche.strategies.moram_setting.MORAM`).
        lr, weight_decay, warmup, label_smoothing: optimisation (MoRAM's; label smoothing 0);
            ``lr`` may be a :class:`~moram_avalanche.algorithms.schedules.DomainLR` (a rate per
            domain, read when each experience's optimizer is built).
        betas: AdamW betas (MoRAM release's).
        text_to_image_loss: add the text->image term of the loss when the vision encoder
            trains (MoRAM release: True; the ZSCL lineage trains on image->text only).
        amp: mixed precision (fp16 autocast + gradient scaling) on CUDA; ignored on CPU.
        eval_mb_size: evaluation minibatch (default ``EVAL_BATCH_FACTOR * train_mb_size``).
        cache_image_features: replay the image features of the test sets while the image
            tower is unchanged (:class:`~moram_avalanche.strategies.clip.image_cache.ImageFeatureCache`;
            strategies whose evaluation forward uses the images otherwise set
            :attr:`replays_image_features` False).
        text_batch_size: prompts per text-encoder call.
        progress: show tqdm bars for training iterations and evaluation (on a terminal only:
            written to a file or a pipe, bars are left out).
        device: a torch device, or ``"auto"`` (a CUDA GPU when there is one); a device this
            machine lacks is a ValueError.
    """

    #: whether the evaluation logits depend on the images only through
    #: :meth:`eval_image_features` (so cached features can stand in for the images)
    replays_image_features = True
    #: whether training is ``iterations`` optimizer steps per experience (the budget, schedule
    #: and progress plugins are attached); a strategy with a loop of its own (RAIL's analytic
    #: pass) sets it False
    trains_by_iterations = True

    def __init__(
        self,
        *,
        model,
        tokenizer,
        iterations: int = MORAM.iterations,
        lr: float | DomainLR = MORAM.lr,
        weight_decay: float = MORAM.weight_decay,
        warmup: int = MORAM.warmup,
        label_smoothing: float = 0.0,
        betas=MORAM.betas,
        text_to_image_loss: bool = True,
        amp: bool = False,
        text_batch_size: int = 256,
        progress: bool = True,
        train_mb_size: int = MORAM.train_mb_size,
        eval_mb_size: Optional[int] = None,
        device="cpu",
        plugins=None,
        evaluator=default_evaluator,
        eval_every: int = -1,
        cache_image_features: bool = True,
        **base_kwargs,
    ):
        # the options were checked once, by __new__ (check_strategy_options), before this runs
        device = resolve_device(device)
        #: the loop's plugins, the same as Avalanche's strategies get (:mod:`.builtins`): exactly
        #: ``iterations`` steps per experience and the per-iteration schedule, first in line
        self.budget = IterationBudget(iterations)
        self.schedule = IterationSchedule(iterations, warmup=warmup, factor=cosine_lr_factor)
        loop = [self.budget, self.schedule, TrainingProgress()] if self.trains_by_iterations else []
        super().__init__(
            model=model, lr=lr, betas=betas, weight_decay=weight_decay, progress=progress,
            train_mb_size=train_mb_size, eval_mb_size=eval_mb_size or EVAL_BATCH_FACTOR * train_mb_size,
            device=device, plugins=[*loop, *check_plugins(plugins)],  # instances of Avalanche's plugins, checked
            evaluator=evaluator, eval_every=eval_every, **base_kwargs,
        )
        self.tokenizer = tokenizer
        self.label_smoothing = label_smoothing
        self.text_to_image_loss = text_to_image_loss
        self.amp = amp and torch.device(device).type == "cuda"
        if amp and not self.amp:
            warnings.warn("amp=True needs a CUDA device; training in full precision", stacklevel=2)
        self.scaler = torch.amp.GradScaler("cuda") if self.amp else None
        self.text_head = TextHead(model, tokenizer, batch_size=text_batch_size)
        #: domains trained so far, in order (their classes are the "seen" classes of the loss)
        self.seen_domains: List[Domain] = []
        self._seen_text = None
        self._text_trains = False
        self._vision_trains = False
        self.image_cache = (ImageFeatureCache()
                            if cache_image_features and self.replays_image_features else None)
        self._replaying = False
        self._eval_features = None  # what eval_image_features computed for this minibatch
        #: the image encoder evaluation uses instead of the eager one while one is set
        #: (:class:`~moram_avalanche.strategies.clip.plugins.compiled_eval.CompiledEvaluation`)
        self.eval_image_encoder = None
        self._space: Optional[LabelSpace] = None
        self._batch_text = {}  # domain index -> class embeddings, for the current minibatch

    @property
    def iterations(self) -> int:
        """Optimizer steps per experience (:attr:`budget`'s, and :attr:`schedule`'s span)."""
        return self.budget.iterations

    @iterations.setter
    def iterations(self, value: int) -> None:
        self.budget.iterations = self.schedule.total = int(value)

    #: linear warm-up steps of :attr:`schedule`
    warmup = property(lambda self: self.schedule.warmup, lambda self, n: setattr(self.schedule, "warmup", int(n)))
    #: the per-step factor ``f(step, *, warmup, total)`` of :attr:`schedule` (default: cosine)
    lr_factor = property(lambda self: self.schedule.factor, lambda self, f: setattr(self.schedule, "factor", f))

    @property
    def label_space(self) -> LabelSpace:
        """The label space of the stream being trained (read when each training experience starts)."""
        if self._space is None:
            raise RuntimeError(f"{type(self).__name__} has not started a training experience yet")
        return self._space

    # ------------------------------------------------------------------ data
    # override: training data of several task labels keeps Avalanche's task-balanced loader
    def make_train_dataloader(self, **kwargs):
        """The loop's sharded batches (:meth:`~..loop.ContinualLoop.make_train_dataloader`: the
        text->image term needs each process's share of a global batch contiguous); training data
        of several task labels keeps Avalanche's task-balanced loader."""
        tasks = getattr(self.adapted_dataset, "targets_task_labels", None)
        if tasks is not None and len(tasks.uniques) > 1:
            return SupervisedTemplate.make_train_dataloader(self, **kwargs)
        return super().make_train_dataloader(**kwargs)

    # ------------------------------------------------------------------ optimisation
    def nothing_to_train(self) -> None:
        """No parameter requires grad: a clear error when the experience trains."""
        if self.trains_by_iterations and self.iterations:
            raise RuntimeError(
                f"{type(self).__name__} has nothing to train: no parameter of the model "
                "requires grad (use ZeroShot for an untrained baseline)")

    def experience_lr(self) -> float:
        """:attr:`lr`, or a :class:`~moram_avalanche.algorithms.schedules.DomainLR`'s rate for the
        experience's domain."""
        return self.lr(self.experience.domain) if isinstance(self.lr, DomainLR) else self.lr

    # override (with optimizer_step): mixed precision scales the loss's gradients (amp on CUDA)
    def backward(self):
        if self.scaler is None:
            return super().backward()
        self.scaler.scale(self.loss).backward(retain_graph=self.retain_graph)

    def optimizer_step(self):
        if self.scaler is None:
            return super().optimizer_step()
        self.scaler.step(self.optimizer)
        self.scaler.update()

    def autocast(self):
        """The mixed-precision context of the forward passes (fp16 on CUDA with ``amp``; else none).

        Plugins that run the model themselves (distillation) use it too."""
        if not self.amp:
            return contextlib.nullcontext()
        return torch.autocast("cuda", dtype=torch.float16)

    # ------------------------------------------------------------------ model output
    # override: the loss reuses this forward's image features and class embeddings (amp: autocast)
    def forward(self):
        with self.autocast():
            scale = self.model.logit_scale.exp()
            if self.is_training:
                image = F.normalize(self.model.encode_image(self.mb_x), dim=-1)
                self._image_features = image
                current = self.experience.current_experience
                self._current_text = self._class_text(current)
                self._batch_text = {current: self._current_text}
                # in the label space's layout: each sample's own domain's classes, the rest masked
                return own_domain_logits(image, self.mb_task_id.long(), self.training_text_of, scale,
                                         self._space, mask_value=MASK_VALUE)
            return scores(self.eval_image_features(), self.eval_classifier(self.experience), scale)

    def eval_image_features(self):
        """Normalised image features of the evaluation minibatch (replayed ones when cached)."""
        if self._replaying:
            return self.mb_x
        if self.eval_image_encoder is not None:
            self._eval_features = self.eval_image_encoder(self.mb_x)
        else:
            self._eval_features = F.normalize(self.model.encode_image(self.mb_x), dim=-1)
        return self._eval_features

    # override: the CLIP loss (image->text over own domain + text->image over seen + current classes)
    def criterion(self):
        if not self.is_training:
            return F.cross_entropy(self.mb_output.float(), self.mb_y)
        with self.autocast():
            return self._training_loss()

    def _training_loss(self):
        tasks = self.mb_task_id.long()
        labels = self._space.local_labels(self.mb_y, tasks)
        scale = self.model.logit_scale.exp()
        current = self.experience.current_experience
        if world_size() == 1 and bool((tasks == current).all()):  # the release's loss, as it computes it
            return clip_continual_loss(
                self._image_features, self._current_text, self._seen_text, labels, scale,
                text_to_image=self._uses_text_to_image(), label_smoothing=self.label_smoothing)
        return self.mixed_batch_loss(tasks, labels)

    def mixed_batch_loss(self, tasks: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """The loss of a batch mixing domains (replay), or of one process's share of a global batch.

        Args:
            tasks: ``[B]`` each sample's domain (its task label, ``mb_task_id``).
            labels: ``[B]`` each sample's class within its own domain
                (:meth:`~moram_avalanche.benchmarks.images.label_space.LabelSpace.local_labels`).

        Image->text (:func:`~moram_avalanche.algorithms.losses.image_to_text_loss`): each sample
        against its own domain's classes (:meth:`training_text_of`), summed over this process's
        samples and scaled by ``world_size / global batch``, so that the mean of the processes'
        gradients is the gradient of the mean over the global batch. Text->image
        (:func:`~moram_avalanche.algorithms.losses.text_to_image_loss`, when the vision encoder
        trains): every seen and current class against the images of the whole global batch
        (gathered with gradient), each sample's positive at :meth:`seen_class_rows` + its label.
        On a batch of the current domain alone, in one process, it equals the release's loss
        (:func:`~moram_avalanche.algorithms.losses.clip_continual_loss`).
        """
        scale = self.model.logit_scale.exp()
        image = self._image_features
        present = sorted(tasks.unique().tolist())
        texts = [self.training_text_of(task) for task in present]
        groups = torch.searchsorted(torch.tensor(present, device=tasks.device), tasks)
        total = int(all_reduce_sum(torch.tensor(image.shape[0], device=image.device)))
        loss = image_to_text_loss(image, texts, groups, labels, scale, label_smoothing=self.label_smoothing,
                                  reduction="sum") * (world_size() / total)
        if self._uses_text_to_image():
            seen = self._seen_text
            every = self._current_text if seen is None else torch.cat([seen, self._current_text])
            rows = labels + self.seen_class_rows(tasks)
            loss = loss + text_to_image_loss(gather_with_grad(image), every, gather(rows), scale)
        return loss

    def seen_class_rows(self, tasks: torch.Tensor) -> torch.Tensor:
        """``[B]``: the first row of each sample's domain in ``[seen classes; current classes]``
        (the seen domains in training order, then the current one); a clear error for a domain
        this strategy has not trained on."""
        starts, total = {}, 0
        for domain in self.seen_domains:
            starts[domain.name] = total
            total += len(domain.classnames)
        current = self.experience.current_experience
        first = {task: total if task == current else self._seen_start(starts, task)
                 for task in tasks.unique().tolist()}
        return torch.tensor([first[task] for task in tasks.tolist()], device=tasks.device)

    def _seen_start(self, starts, task):
        name = self._space.domains[task].name
        if name not in starts:
            raise RuntimeError(
                f"a training batch holds samples of domain {name!r}, which this strategy has not "
                f"trained on (trained: {[d.name for d in self.seen_domains]}): replayed samples must "
                "come from earlier experiences of the same stream")
        return starts[name]

    def training_text_of(self, task: int) -> torch.Tensor:
        """``[C, D]`` training class embeddings of domain ``task`` for the current minibatch.

        The current domain's are computed once per iteration (with gradient when the text side
        trains); a replayed domain's too when the text side trains (so replay also keeps its
        classes' text embeddings), else they are cached.
        """
        if task not in self._batch_text:
            name = self._space.domains[task].name
            if name not in {d.name for d in self.seen_domains}:
                self._seen_start({}, task)  # the error
            self._batch_text[task] = self._class_text(task)
        return self._batch_text[task]

    def _class_text(self, task: int) -> torch.Tensor:
        return class_embeddings(self.text_head, self._space, task, training=True, grad=self._text_trains)

    def _uses_text_to_image(self) -> bool:
        return self.text_to_image_loss and self._vision_trains

    def eval_classifier(self, experience, head: Optional[TextHead] = None):
        """The classifier of ``experience``'s label space, embedded by ``head`` (default: ours;
        :func:`~moram_avalanche.models.scoring.evaluation_classifier`)."""
        return evaluation_classifier(head or self.text_head, LabelSpace.of(experience),
                                     experience.current_experience)

    # ------------------------------------------------------------------ experience boundaries
    # override: the loss's label space, trained towers and seen-class text (after growth)
    def _before_training_exp(self, **kwargs):
        _check_clip_experience(self.experience)
        self._space = LabelSpace.of(self.experience)
        super()._before_training_exp(**kwargs)  # plugins may add parameters here
        self._vision_trains = _any_trainable(self.model.visual.parameters())
        self._text_trains = _any_trainable(text_parameters(self.model))
        # the text->image term's seen classes, embedded for the steps to come: none when the experience
        # takes no step (``moram-avalanche cost`` grows the tasks it does not time with 0 iterations)
        steps = not self.trains_by_iterations or self.iterations > 0
        prompts = [p for d in self.seen_domains for p in d.prompts()] if steps and self._uses_text_to_image() else []
        self._seen_text = self.text_head.embed(prompts) if prompts else None

    # override: the experience's classes join the text->image term's seen classes
    def _after_training_exp(self, **kwargs):
        self.seen_domains.append(domain_of(self.experience))
        self._seen_text = None
        self._batch_text = {}
        if self._text_trains:
            self.text_head.clear()
        super()._after_training_exp(**kwargs)

    # override (with eval_epoch): the image features of an unchanged image tower are replayed
    def _before_eval(self, **kwargs):
        super()._before_eval(**kwargs)
        if self.image_cache is not None:
            self.image_cache.start(self.model.visual)  # drops the features if the tower changed

    def _image_cache_key(self):
        """What identifies an experience's evaluation batches (None: not cached)."""
        if self.image_cache is None:
            return None
        experience = self.experience
        return (experience.origin_stream.name, experience.current_experience,
                len(experience.dataset), self.eval_mb_size)

    # override: feature replay (cached features stand in for images), inference_mode, autocast
    def eval_epoch(self, **kwargs):
        """One pass over the experience's test data under ``torch.inference_mode()``.

        With cached image features of this tower (:attr:`image_cache`) the minibatches are
        replayed from the cache (features instead of images; same labels, same order) and no
        image is read; otherwise the features are recorded for the next evaluation -- when the
        strategy's forward took them from :meth:`eval_image_features` (one that computes its
        features otherwise is never recorded, so never replayed).
        """
        key = self._image_cache_key()
        replay = self.image_cache.get(key) if key is not None else None
        batches = self.dataloader if replay is None else replay
        bar = tqdm(total=len(batches), desc=f"eval {getattr(self.experience, 'domain', '')}",
                   disable=None if self.progress else True, leave=False)  # None: terminals only
        self._replaying = replay is not None
        try:
            with torch.inference_mode():
                for self.mbatch in batches:
                    self.mbatch = list(self.mbatch)
                    rest = list(self.mbatch[1:])  # labels as read, before any offset
                    self._unpack_minibatch()
                    self._before_eval_iteration(**kwargs)
                    self._before_eval_forward(**kwargs)
                    self._eval_features = None
                    with self.autocast():
                        self.mb_output = self.forward()
                    if key is not None and replay is None:
                        if self._eval_features is None:  # a forward of its own: record nothing
                            self.image_cache.drop(key)
                            key = None
                        else:
                            self.image_cache.add(key, self._eval_features, *rest)
                    self._after_eval_forward(**kwargs)
                    self.loss = self.criterion()
                    self._after_eval_iteration(**kwargs)
                    bar.update()
            if key is not None and replay is None:
                self.image_cache.finish(key)
        finally:
            self._replaying = False
            bar.close()


def _check_clip_experience(experience) -> None:
    missing = [a for a in ("classnames", "template", "domain", "label_space", "domains")
               if not hasattr(experience, a)]
    if missing:
        raise AttributeError(
            f"experience {experience.current_experience} lacks {missing}: build the benchmark "
            "with moram_avalanche.benchmarks (xtail, mtil, synthetic or clip_benchmark)"
        )


def _any_trainable(params) -> bool:
    return any(p.requires_grad for p in params)


#: default evaluation minibatch, in training minibatches (inference keeps no activations)
EVAL_BATCH_FACTOR = 4

__all__ = ["CLIPStrategy", "EVAL_BATCH_FACTOR"]
