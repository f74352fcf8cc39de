"""CLIPClassifier: an open_clip model as an Avalanche model, images -> logits in the stream's label space."""

from __future__ import annotations

from typing import Dict, Optional

import torch
import torch.nn.functional as F
from avalanche.models import MultiTaskModule
from torch import nn

from ..benchmarks.images.label_space import LabelSpace
from ..clip.head import TextHead
from ..clip.towers import text_parameters
from .scoring import MASK_VALUE, class_embeddings, evaluation_classifier, masked_columns, own_domain_logits, scores


class _Omitted:
    """The default of ``task_labels``: called as ``model(x)``, not ``model(x, None)``."""

    def __repr__(self) -> str:
        return "<omitted>"


#: the default of ``task_labels``: the model was called as ``model(x)``, not ``model(x, None)``
OMITTED = _Omitted()


class CLIPClassifier(MultiTaskModule):
    """CLIP as an Avalanche model: ``forward(images, task_labels)`` gives logits over classes.

    Wraps an open_clip model (``self.model``, with any adapters injected into it) and its
    tokenizer. Avalanche's model adaptation (:meth:`adaptation`, before every training and
    evaluation experience) reads the label space the benchmark declares
    (:class:`~moram_avalanche.benchmarks.images.label_space.LabelSpace`) from the experience; the
    classifier of a class is the text embedding of its prompt, as in CLIP's zero-shot
    classification. So any Avalanche strategy (``Naive``, ``EWC``, ``LwF``, ``Replay``,
    ``DER``, ``AGEM``, ``GDumb``, ...) trains CLIP on X-TAIL, MTIL or the synthetic stream with
    the user's optimizer and criterion, and the package's growth plugins (``MoRAMPlugin``, ...)
    compose with them.

    The logits always have ``LabelSpace.width`` columns; columns a sample is not scored against
    hold ``mask_value`` (Avalanche's ``IncrementalClassifier`` convention; they never win an
    arg-max and drop out of a softmax):

    * ``"all"`` space (X-TAIL; global labels): in training mode, every class of the domains up
      to the experience of the last training adaptation -- the stream seen so far, in stream
      order -- with later domains masked (their class names are not known yet); in eval mode,
      every class of every domain (X-TAIL's test). Task labels are not read (class-incremental).
    * ``"domain"`` space (MTIL; local labels): each sample against its own domain's classes,
      picked by its task label (Avalanche's multi-head convention), so a batch mixing domains
      (replay) is scored per domain. Evaluation averages the domain's prompt ensemble.

    Calling conventions of ``forward(x, task_labels)`` (Avalanche's ``avalanche_forward`` passes
    the batch's task labels): a tensor or an int as above; ``None`` -- Avalanche's "every head"
    -- a dict ``{task: logits}`` over the tasks trained so far (what Avalanche's LwF distils);
    omitted (``model(x)``, as Avalanche's DER stores logits) -- every image scored as the
    experience the model was last adapted to.

    Text embeddings are cached per prompt list (and per train / eval mode, as adapters such as
    MoRAM gate differently at evaluation) while no parameter of the text side requires grad;
    otherwise they are computed with gradient in training, and the cache is dropped at the next
    use and at every training adaptation (after adapters grew). Call :meth:`clear_text_cache`
    after changing the text tower's weights by hand.

    Args:
        model: an open_clip CLIP model.
        tokenizer: its tokenizer.
        text_batch_size: prompts per text-encoder call.
        mask_value: the value of masked columns (Avalanche's default, -1000).
    """

    def __init__(self, model: nn.Module, tokenizer, *, text_batch_size: int = 256,
                 mask_value: float = MASK_VALUE) -> None:
        super().__init__()
        for name in ("encode_image", "encode_text", "logit_scale"):
            if not hasattr(model, name):
                raise TypeError(f"CLIPClassifier wraps an open_clip CLIP model (with encode_image, "
                                f"encode_text and logit_scale); {type(model).__name__} has no {name}")
        self.model = model
        self.tokenizer = tokenizer
        self.mask_value = float(mask_value)
        #: the label space of the stream, read at the first adaptation
        self.space: Optional[LabelSpace] = None
        #: the experience of the last training adaptation (-1: none yet)
        self.trained_index = -1
        #: the experience of the last adaptation, training or evaluation
        self.adapted_index: Optional[int] = None
        self._heads = {mode: TextHead(model, tokenizer, batch_size=text_batch_size)
                       for mode in (True, False)}
        self._text_stale = False
        #: the image encoder evaluation uses instead of :meth:`encode_image`'s eager one, while one is
        #: set (:class:`~moram_avalanche.strategies.clip.plugins.compiled_eval.CompiledEvaluation`
        #: sets a compiled one for each evaluation); never pickled
        self.eval_image_encoder = None

    def __getstate__(self):
        return {**self.__dict__, "eval_image_encoder": None}  # a compiled function does not pickle

    # ------------------------------------------------------------------ Avalanche adaptation
    def adaptation(self, experience) -> None:
        """Read the experience's label space; in training mode, the stream now extends to it."""
        space = LabelSpace.of(experience)
        if self.space is not None and space != self.space:
            self.clear_text_cache()  # another stream
        self.space = space
        self.max_class_label = space.width
        index = int(experience.current_experience)
        self.adapted_index = index
        if self.training:
            self.trained_index = index
            self.known_train_tasks_labels = self.known_train_tasks_labels | set(experience.task_labels)
            self.clear_text_cache()  # adapters may have grown in the text tower

    def clear_text_cache(self) -> None:
        """Forget every cached text embedding."""
        for head in self._heads.values():
            head.clear()
        self._text_stale = False

    # ------------------------------------------------------------------ forward
    def forward(self, x: torch.Tensor, task_labels=OMITTED):
        self._space()  # a clear error before any encoding when the model was never adapted
        if task_labels is None:
            return self.forward_all_tasks(x)
        image = self.encode_image(x)
        if task_labels is OMITTED:
            task_labels = self.adapted_index
        return self.logits(image, task_labels)

    def forward_single_task(self, x: torch.Tensor, task_label: int) -> torch.Tensor:
        return self.logits(self.encode_image(x), int(task_label))

    def forward_all_tasks(self, x: torch.Tensor) -> Dict[int, torch.Tensor]:
        """``{task: logits}`` for every task trained so far (Avalanche's ``task_labels=None``)."""
        self._space()
        image = self.encode_image(x)
        return {task: self.logits(image, task) for task in sorted(self.known_train_tasks_labels)}

    def encode_image(self, x: torch.Tensor) -> torch.Tensor:
        """Normalised image features ``[B, D]`` (in evaluation, through :attr:`eval_image_encoder` when set)."""
        if self.eval_image_encoder is not None and not self.training:
            return self.eval_image_encoder(x)
        return F.normalize(self.model.encode_image(x), dim=-1)

    def logits(self, image: torch.Tensor, task_labels) -> torch.Tensor:
        """``[B, width]`` logits of normalised image features (see the class docstring)."""
        space = self._space()
        scale = self.model.logit_scale.exp()
        if space.kind == "all":
            if not self.training:  # every class of every domain
                return scores(image, self._eval_text(space), scale)
            if self.trained_index < 0:
                raise RuntimeError("CLIPClassifier in training mode has not been adapted to a "
                                   "training experience: train it through an Avalanche strategy")
            text = torch.cat([self.text(task) for task in range(self.trained_index + 1)])
            return masked_columns(scores(image, text, scale), 0, space.width, self.mask_value)
        tasks = _task_tensor(task_labels, image)
        return own_domain_logits(image, tasks, self.text, scale, space, mask_value=self.mask_value)

    def text(self, task: int) -> torch.Tensor:
        """``[C, D]`` class embeddings of domain ``task`` in the current mode."""
        space = self._space()
        training = self.training
        if training and torch.is_grad_enabled() and self.text_trains():
            self._text_stale = True
            return class_embeddings(self._heads[True], space, task, training=True, grad=True)
        if self._text_stale:
            self.clear_text_cache()
        return class_embeddings(self._heads[training], space, task, training=training)

    def _eval_text(self, space: LabelSpace) -> torch.Tensor:
        if self._text_stale:
            self.clear_text_cache()
        return evaluation_classifier(self._heads[False], space, 0)

    def text_trains(self) -> bool:
        """Whether any parameter of the text side requires grad."""
        return any(p.requires_grad for p in text_parameters(self.model))

    def _space(self) -> LabelSpace:
        if self.space is None:
            raise RuntimeError("CLIPClassifier has not been adapted to an experience yet: Avalanche "
                               "strategies do it before each experience (or call "
                               "model.adaptation(experience) with an experience of "
                               "moram_avalanche.benchmarks)")
        return self.space


def _task_tensor(task_labels, image: torch.Tensor) -> torch.Tensor:
    if task_labels is None:
        raise ValueError("no task label to score against: adapt the model to an experience first")
    if isinstance(task_labels, torch.Tensor):
        return task_labels.to(image.device).long().reshape(-1).expand(image.shape[0]) \
            if task_labels.numel() == 1 else task_labels.to(image.device).long()
    return torch.full((image.shape[0],), int(task_labels), dtype=torch.long, device=image.device)


__all__ = ["OMITTED", "CLIPClassifier"]
