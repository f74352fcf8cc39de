"""CLIPStrategy: the training and evaluation loop shared by every CLIP strategy of this package."""

from __future__ import annotations

import contextlib
import itertools
import warnings
from functools import partial
from typing import List, Optional, Sequence

import torch
import torch.nn.functional as F
from avalanche.training.plugins.evaluation import default_evaluator
from avalanche.training.templates import SupervisedTemplate
from tqdm.auto import tqdm

from ..algorithms.losses import clip_continual_loss
from ..algorithms.schedules import DomainLR, cosine_lr_factor
from ..benchmarks.clip_benchmark import Domain, domain_of
from ..clip.head import TextHead
from ..layers.base import adapter_state_dict, find_layers, load_adapter_state_dict
from ..utils.devices import resolve_device
from ..utils.iteration import cycle
from .image_cache import ImageFeatureCache
from .needs import StrategyNeeds
from .options import check_shared_options, check_strategy_options
from .plugins.growth import grow_adapters


class CLIPStrategy(SupervisedTemplate):
    """Continual learning of an open_clip model, one domain (experience) at a time.

    The loop of the MoRAM release (and of the ZSCL / MoE-Adapters lineage), as an Avalanche
    ``SupervisedTemplate``:

    * exactly ``iterations`` optimizer steps per experience, cycling (and reshuffling) the
      training data however small it is;
    * a fresh AdamW (betas (0.9, 0.9999), weight decay 0 by default; MoRAM release) over the
      parameters that require grad, and a per-iteration cosine schedule with optional linear
      warm-up (:func:`~moram_avalanche.algorithms.schedules.cosine_lr_factor`; a subclass may
      set :attr:`lr_factor` to another per-step factor), both rebuilt for every experience
      (:meth:`make_optimizer`);
    * logits ``exp(logit_scale) * f_img @ E^T`` against the embeddings of
      ``template.format(classname)``; text embeddings are cached while the text encoder has
      no trainable parameters;
    * the loss of :func:`~moram_avalanche.algorithms.losses.clip_continual_loss` (image->text
      over the current classes, plus text->image over seen + current classes when the vision
      encoder trains; ``text_to_image_loss=False`` keeps the image->text term only);
    * evaluation in the label space the benchmark declares (``experience.label_space``):
      "all" -- every class of every domain, labels offset by ``experience.label_offset``
      (X-TAIL) -- or "domain" -- the experience's own classes with its template ensemble (MTIL);
    * evaluation on the fastest path that gives the same numbers: under
      ``torch.inference_mode()``, in minibatches of ``eval_mb_size`` (default
      :data:`EVAL_BATCH_FACTOR` x ``train_mb_size``: no activations are kept), and with the
      image features of an unchanged image tower computed once and replayed by later
      evaluations (:mod:`~moram_avalanche.strategies.image_cache`; ``cache_image_features``).

    Experiences must carry ``classnames``, ``template``, ``domain`` and the label-space
    attributes that :func:`~moram_avalanche.benchmarks.clip_benchmark.clip_benchmark` sets.

    Growing adapters grow in Avalanche's model-adaptation step, right before the experience's
    optimizer is built (:meth:`model_adaptation`; :mod:`~moram_avalanche.strategies.plugins.growth`).
    A run checkpoint holds the declared state of the model's adapter layers when it has any
    (:func:`~moram_avalanche.layers.base.adapter_state_dict`), else the whole model.

    Options are checked before anything is built (:meth:`__new__`,
    :func:`~moram_avalanche.strategies.options.check_strategy_options`): an unknown or
    misspelled keyword or a value of the wrong type is a ``TypeError``, a value out of range a
    ``ValueError``, before the model is touched. The keyword arguments a strategy was built
    with stay in :attr:`given_options` (a run folder records them).

    Args (keyword-only; the rest go to ``SupervisedTemplate``):
        model: an open_clip CLIP model. tokenizer: its tokenizer.
        iterations: optimizer steps per experience (MoRAM: 500).
        lr, weight_decay, warmup, label_smoothing: optimisation (MoRAM: 5e-4, 0, 0, 0);
            ``lr`` may be a :class:`~moram_avalanche.algorithms.schedules.DomainLR` (a rate per
            domain, read when each experience's optimizer is built).
        betas: AdamW betas (MoRAM release: (0.9, 0.9999)).
        text_to_image_loss: add the text->image term of the loss when the vision encoder
            trains (MoRAM release: True; the ZSCL lineage trains on image->text only).
        amp: mixed precision (fp16 autocast + gradient scaling) on CUDA; ignored on CPU.
        eval_mb_size: evaluation minibatch (default ``EVAL_BATCH_FACTOR * train_mb_size``).
        cache_image_features: replay the image features of the test sets while the image
            tower is unchanged (:class:`~moram_avalanche.strategies.image_cache.ImageFeatureCache`;
            strategies whose evaluation forward uses the images otherwise set
            :attr:`replays_image_features` False).
        text_batch_size: prompts per text-encoder call.
        progress: show tqdm bars for training iterations and evaluation (on a terminal only:
            written to a file or a pipe, bars are left out).
        device: a torch device, or ``"auto"`` (a CUDA GPU when there is one); a device this
            machine lacks is a ValueError.
    """

    #: the per-step learning-rate factor ``f(step, *, warmup, total)`` of :meth:`make_optimizer`
    lr_factor = staticmethod(cosine_lr_factor)
    #: what the command line and the demo need to know (:mod:`~moram_avalanche.strategies.needs`)
    needs = StrategyNeeds()
    #: whether the evaluation logits depend on the images only through
    #: :meth:`eval_image_features` (so cached features can stand in for the images)
    replays_image_features = True

    def __new__(cls, *args, **kwargs):
        """Check the keyword options (names, types, ranges; nothing built yet) and keep them."""
        check_strategy_options(cls, kwargs)
        self = super().__new__(cls)
        #: the keyword arguments this strategy was built with, as given
        self.given_options = dict(kwargs)
        return self

    def __init__(
        self,
        *,
        model,
        tokenizer,
        iterations: int = 500,
        lr: float | DomainLR = 5e-4,
        weight_decay: float = 0.0,
        warmup: int = 0,
        label_smoothing: float = 0.0,
        betas=(0.9, 0.9999),
        text_to_image_loss: bool = True,
        amp: bool = False,
        text_batch_size: int = 256,
        progress: bool = True,
        train_mb_size: int = 64,
        eval_mb_size: Optional[int] = None,
        device="cpu",
        plugins=None,
        evaluator=default_evaluator,
        eval_every: int = -1,
        cache_image_features: bool = True,
        **base_kwargs,
    ):
        check_shared_options(dict(iterations=iterations, lr=lr, weight_decay=weight_decay, warmup=warmup,
                                  label_smoothing=label_smoothing, betas=betas,
                                  text_batch_size=text_batch_size, train_mb_size=train_mb_size,
                                  eval_mb_size=eval_mb_size))
        device = resolve_device(device)
        super().__init__(
            model=model, optimizer=None, train_mb_size=train_mb_size, train_epochs=1,
            eval_mb_size=eval_mb_size or EVAL_BATCH_FACTOR * train_mb_size, device=device,
            plugins=plugins,
            evaluator=evaluator, eval_every=eval_every, **base_kwargs,
        )
        self.tokenizer = tokenizer
        self.iterations = iterations
        self.lr = lr
        self.weight_decay = weight_decay
        self.warmup = warmup
        self.label_smoothing = label_smoothing
        self.betas = tuple(betas)
        self.text_to_image_loss = text_to_image_loss
        self.progress = progress
        self.amp = amp and torch.device(device).type == "cuda"
        if amp and not self.amp:
            warnings.warn("amp=True needs a CUDA device; training in full precision")
        self.scaler = torch.amp.GradScaler("cuda") if self.amp else None
        self.scheduler = None
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

    # ------------------------------------------------------------------ checkpoints
    def checkpoint_model_state(self) -> dict:
        """What of the model a run checkpoint holds: its adapters' declared state, or all of it.

        With adapter layers (MoRAM, LoRA, MoE-LoRA, MoE-Adapters) only what they declare
        (:func:`~moram_avalanche.layers.base.adapter_state_dict`): CLIP's own weights never
        change. Without (full fine-tuning and its relatives) the whole state dict.
        """
        if find_layers(self.model):
            return adapter_state_dict(self.model)
        return self.model.state_dict()

    def load_checkpoint_model_state(self, state: dict) -> None:
        if find_layers(self.model):
            load_adapter_state_dict(self.model, state)
        else:
            self.model.load_state_dict(state)

    # ------------------------------------------------------------------ model adaptation
    def model_adaptation(self, model=None):
        """Avalanche's model adaptation, then (when training) every growth plugin's ``grow``.

        Avalanche builds the optimizer right after this step, so it holds what the adapters
        added (:mod:`~moram_avalanche.strategies.plugins.growth`).
        """
        model = super().model_adaptation(model)
        if self.is_training:
            grow_adapters(self)
        return model

    # ------------------------------------------------------------------ optimisation
    def make_optimizer(self, **kwargs):
        """A fresh AdamW + :attr:`lr_factor` schedule over the parameters that require grad now."""
        params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimized_param_id = {}  # tells Avalanche the optimizer is initialised
        if not params:
            self.optimizer = self.scheduler = None
            return
        lr = self.lr(self.experience.domain) if isinstance(self.lr, DomainLR) else self.lr
        # foreach: CUDA's default implementation, also on CPU (bit-identical results there to
        # the per-tensor loop torch picks by default, and faster)
        self.optimizer = torch.optim.AdamW(
            params, lr=lr, betas=self.betas, weight_decay=self.weight_decay, foreach=True
        )
        factor = partial(self.lr_factor, warmup=self.warmup, total=self.iterations)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, factor)

    def training_epoch(self, **kwargs):
        """Exactly ``self.iterations`` steps, cycling the training data (one "epoch" per experience)."""
        if self.iterations == 0:
            return
        if self.optimizer is None:
            raise RuntimeError(
                f"{type(self).__name__} has nothing to train: no parameter of the model "
                "requires grad (use ZeroShot for an untrained baseline)"
            )
        batches = itertools.islice(
            cycle(self.dataloader, f"the training data of domain {self.experience.domain!r}"),
            self.iterations)
        bar = tqdm(total=self.iterations, desc=f"train {self.experience.domain}",
                   disable=None if self.progress else True, leave=False)  # None: terminals only
        for self.mbatch in batches:
            if self._stop_training:
                break
            self._unpack_minibatch()
            self._before_training_iteration(**kwargs)
            self.optimizer.zero_grad(set_to_none=True)
            self.loss = self._make_empty_loss()
            self._before_forward(**kwargs)
            with self.autocast():
                self.mb_output = self.forward()
                self._after_forward(**kwargs)
                self.loss += self.criterion()
            self._before_backward(**kwargs)
            self.backward()
            self._after_backward(**kwargs)
            self._before_update(**kwargs)
            self.optimizer_step()
            self._after_update(**kwargs)  # plugins see the learning rate of this step
            self.scheduler.step()
            self._after_training_iteration(**kwargs)
            bar.update()
            bar.set_postfix(loss=f"{self.loss.item():.3f}")
        bar.close()

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
    def forward(self):
        scale = self.model.logit_scale.exp()
        if self.is_training:
            image = F.normalize(self.model.encode_image(self.mb_x), dim=-1)
            self._image_features = image
            self._current_text = self._training_text()
            return scale * image @ self._current_text.t()
        image = self.eval_image_features()
        return scale * image @ self.eval_classifier(self.experience).t().to(image.dtype)

    def eval_image_features(self):
        """Normalised image features of the evaluation minibatch (replayed ones when cached)."""
        if self._replaying:
            return self.mb_x
        self._eval_features = F.normalize(self.model.encode_image(self.mb_x), dim=-1)
        return self._eval_features

    def criterion(self):
        if not self.is_training:
            return F.cross_entropy(self.mb_output.float(), self.mb_y)
        return clip_continual_loss(
            self._image_features, self._current_text, self._seen_text, self.mb_y,
            self.model.logit_scale.exp(), text_to_image=self._uses_text_to_image(),
            label_smoothing=self.label_smoothing,
        )

    def _uses_text_to_image(self) -> bool:
        return self.text_to_image_loss and self._vision_trains

    def _training_text(self):
        domain = domain_of(self.experience)
        if self._text_trains:
            return self.text_head.embed(domain.prompts(), grad=True)
        return self.text_head.embed(domain.prompts())

    def eval_classifier(self, experience, head: Optional[TextHead] = None):
        """The classifier of ``experience``'s label space, embedded by ``head`` (default: ours)."""
        head = head or self.text_head
        if experience.label_space == "all":
            return head.embed([p for d in experience.domains for p in d.prompts()])
        domain = domain_of(experience)
        return head.ensemble([domain.prompts(t) for t in domain.eval_templates])

    def _unpack_minibatch(self):
        super()._unpack_minibatch()
        if not self.is_training and getattr(self.experience, "label_space", None) == "all":
            self.mbatch[1] = self.mbatch[1] + self.experience.label_offset

    # ------------------------------------------------------------------ experience boundaries
    def _before_training_exp(self, **kwargs):
        _check_clip_experience(self.experience)
        super()._before_training_exp(**kwargs)  # plugins may add parameters here
        self._vision_trains = _any_trainable(self.model.visual.parameters())
        self._text_trains = _any_trainable(_text_parameters(self.model))
        prompts = [p for d in self.seen_domains for p in d.prompts()] if self._uses_text_to_image() else []
        self._seen_text = self.text_head.embed(prompts) if prompts else None

    def _after_training_exp(self, **kwargs):
        self.seen_domains.append(domain_of(self.experience))
        self._seen_text = None
        if self._text_trains:
            self.text_head.clear()
        super()._after_training_exp(**kwargs)

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


def _text_parameters(model) -> Sequence[torch.nn.Parameter]:
    """Parameters of the text tower: everything but the vision tower and the logit scale/bias."""
    skip = {id(p) for p in model.visual.parameters()}
    skip |= {id(getattr(model, n)) for n in ("logit_scale", "logit_bias") if getattr(model, n, None) is not None}
    return [p for p in model.parameters() if id(p) not in skip]


#: default evaluation minibatch, in training minibatches (inference keeps no activations)
EVAL_BATCH_FACTOR = 4

__all__ = ["CLIPStrategy", "EVAL_BATCH_FACTOR"]
