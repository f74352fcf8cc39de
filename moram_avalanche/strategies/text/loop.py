"""TextStrategy: the generative continual-learning loop of language models, as an Avalanche strategy.

One loop for every language-model strategy of the package (MoRAM, SeqFT, SeqLoRA, IncLoRA,
O-LoRA: :mod:`.strategies`): the package's loop harness
(:class:`~moram_avalanche.strategies.loop.ContinualLoop`: the one option check, the adapters-only
checkpoint state, a fresh AdamW per experience, sharded training batches, the data-parallel
guard) whose problem -- model, loss, evaluation -- is a
:class:`~moram_avalanche.models.language_model.LanguageModel`'s:

* a minibatch is ``[prompts, answers, task labels]`` (the items of the text streams,
  :mod:`moram_avalanche.benchmarks.text.stream`); :attr:`mb_x` are the prompts, :attr:`mb_y`
  the answers;
* training: the teacher-forced token cross-entropy of the answers (``LanguageModel.loss``)
  with AdamW, a fresh optimizer over the parameters that require grad for every experience
  (growth plugins add atoms or adapters before it is built,
  :mod:`~moram_avalanche.strategies.plugins.growth`), a constant learning rate by default
  (``lr_schedule="cosine"``: a half cosine over each task's steps, the paper's CodeAlpaca run) (O-LoRA's
  ``scripts/order_1.sh``: ``lr_scheduler_type constant``, warm-up 0; the MoRAM release's TRACE
  run too, see :func:`epochs_of`); the budget is ``epochs`` passes over each task (the paper: one
  epoch per task, Sec. 4 LLM settings), or one count per task (the release's TRACE run:
  2,1,3,2,1,2,2,3), or, with ``iterations``, exactly that many optimizer steps per
  task, cycling the data (:class:`~moram_avalanche.strategies.plugins.budget.FixedBatches`);
* precision as the published runs train (:mod:`~moram_avalanche.algorithms.mixed_precision`): a
  model loaded in bf16 computes in bf16 while AdamW steps float32 master copies of its trainable
  weights, with float32 moments (DeepSpeed's bf16 mode, which the MoRAM release, TRACE and
  TreeLoRA run: ``utils/ds_utils.py``; ``master_weights=False``: pure bf16 weights), and each
  step's gradients, accumulated over ``accumulation_steps`` minibatches, are clipped to global
  norm ``max_grad_norm`` (1.0: their DeepSpeed configurations' ``"gradient_clipping": 1.0``,
  ``transformers``' Trainer's ``max_grad_norm`` for O-LoRA's and SAPT's) on their float32 copies;
* prompts: a long prompt is cut as its task declares (``experience.tasks``: TRACE's MeetingBank
  keeps its head, up to 4,096 tokens) or else as the model cuts it (a causal model keeps the
  prompt's end, in training sharing ``max_source_length + max_target_length`` with the answer;
  :mod:`~moram_avalanche.models.language_model`);
* evaluation: greedy generation (``LanguageModel.generate``; ``repetition_penalty`` and
  ``no_repeat_ngram_size`` as the release's TRACE inference passes them when set,
  :class:`~moram_avalanche.models.language_model.Decoding`), each answer scored alone with the
  experience's metric (``experience.metric``, a name of
  :data:`~moram_avalanche.benchmarks.text.metrics.TEXT_METRICS`: exact match after O-LoRA's
  normalisation on the classification streams; TRACE's accuracy, ROUGE-L, edit similarity and
  SARI on its generation tasks, SARI against the prompt as its source). The evaluation output
  :attr:`mb_output` is each sample's score as a fraction (1.0 / 0.0 for a hit-or-miss metric,
  in between for a graded one) and the strategy declares ``eval_output = "scores"``, which
  :class:`~moram_avalanche.experiments.metrics.AccuracyMatrix` reads to fill ``A[t, j]`` with
  their mean: every metric of the package is a mean over samples (corpus SARI included, the
  mean of the sentences' SARI), so the matrix cell is the task's metric;
* run checkpoints hold the adapters' declared state
  (:func:`~moram_avalanche.layers.base.adapter_state_dict`) when the model has adapters, else
  the whole model (SeqFT), so :func:`~moram_avalanche.experiments.runner.run_stream` resumes.

Avalanche's plugins that score the model themselves (EWC's importances, GEM / A-GEM's memory
gradients, LwF's distillation) are re-classed as their text counterparts when the loop is
built (:mod:`~moram_avalanche.strategies.text.plugins.avalanche`): they score text batches by
the token loss, so they compose with every language-model strategy; Avalanche's strategies by
name (``avalanche.ewc``, ...) are this loop too (:mod:`.builtins`).

Avalanche has no text loop of its own; its ``examples/nlp.py`` shows the intended way
(override ``_unpack_minibatch``, ``forward`` and ``criterion`` for batches of strings).
"""

from __future__ import annotations

from typing import List, Literal, Mapping, Optional, Sequence, Union

import torch
from avalanche.training.plugins import EvaluationPlugin
from torch.utils.data import DataLoader

from ...algorithms.mixed_precision import GradientClip
from ...benchmarks.text.metrics import TEXT_METRICS
from ...benchmarks.text.stream import collate_text
from ...models.language_model import (
    MAX_SOURCE_LENGTH,
    MAX_TARGET_LENGTH,
    Decoding,
    LanguageModel,
    check_compile_generation,
    prompt_cuts,
)
from ...utils.checks import check_int_range, check_positive_int
from ..loop import ContinualLoop
from ..moram_setting import MORAM_TEXT_LOOP as LOOP
from ..needs import StrategyNeeds
from ..plugins.budget import FixedBatches
from .plugins.accumulation import AccumulatedSteps
from .plugins.avalanche import text_plugins
from .plugins.schedule import LR_SCHEDULES, schedule_plugins

#: the paper's classification setting for language models (paper Sec. 4, LLM settings):
#: lr 1e-3 (fixed), batch 64, one epoch per task (:data:`~..moram_setting.MORAM_TEXT_LOOP`)
PAPER_TEXT_LOOP = {"lr": LOOP.lr, "train_mb_size": LOOP.train_mb_size, "epochs": LOOP.epochs}
#: AdamW betas: torch's / transformers' Trainer defaults, which O-LoRA's T5 runs use
TEXT_BETAS = LOOP.betas


#: the most minibatches one optimizer step may accumulate (the release's TRACE run: 32; beyond
#: this a step is a pass over a whole task, and a mistyped 1e6 would run for days without a word)
MAX_ACCUMULATION_STEPS = 1024


def check_text_loop_options(options) -> None:
    """Value checks of the text loop's own options given in ``options``."""
    for name in ("max_source_length", "max_target_length", "max_new_tokens"):
        if name in options:
            check_positive_int(name, options[name])
    if "accumulation_steps" in options:
        check_int_range("accumulation_steps", options["accumulation_steps"], high=MAX_ACCUMULATION_STEPS,
                        hint="minibatches per optimizer step; the release's TRACE run: 32")
    if "epochs" in options:
        check_epochs(options["epochs"])
    if "repetition_penalty" in options or "no_repeat_ngram_size" in options:
        Decoding(options.get("repetition_penalty", 1.0), options.get("no_repeat_ngram_size", 0))
    if "compile_generation" in options:
        check_compile_generation(options["compile_generation"])
    if "lr_schedule" in options and options["lr_schedule"] not in LR_SCHEDULES:
        schedule_plugins(options["lr_schedule"])  # the one-line error
    if options.get("max_grad_norm") is not None:
        GradientClip(options["max_grad_norm"])  # the one-line error


def check_epochs(epochs) -> None:
    """``epochs`` is a positive integer, a non-empty sequence of them (one per task, in stream
    order) or a mapping of task names to them."""
    example = "e.g. epochs=1, or epochs={'C-STANCE': 2, 'FOMC': 1} (the MoRAM release's TRACE run)"
    if isinstance(epochs, Mapping):
        items = list(epochs.items())
    elif isinstance(epochs, (list, tuple)):
        items = [(f"[{index}]", count) for index, count in enumerate(epochs)]
    else:
        check_positive_int("epochs", epochs)
        return
    if not items:
        raise ValueError(f"epochs: expected a positive integer or one per task, got an empty {type(epochs).__name__} "
                         f"({example})")
    for key, count in items:
        if isinstance(epochs, Mapping) and not isinstance(key, str):
            raise ValueError(f"epochs: a mapping's keys are task names, got {key!r} ({example})")
        check_positive_int(f"epochs[{key!r}]" if isinstance(epochs, Mapping) else f"epochs{key}", count)


def epochs_of(epochs: Union[int, Sequence[int], Mapping[str, int]], experience) -> int:
    """The passes over ``experience``'s training data: ``epochs``; or, when it gives one count per
    task, the count of the experience's task -- by name from a mapping (a subset or another
    order of the tasks keeps each task's count), by place in the stream from a sequence. The
    MoRAM release's TRACE run gives one per task (``TRACE/runner_moram.sh``: ``--num_train_epochs
    2,1,3,2,1,2,2,3`` in TRACE's order, read per task by ``TRACE/model/base_model.py``'s
    ``train_continual``).

    The release passes ``--lr_scheduler_type cosine``, but ``TRACE/training/main.py`` builds
    ``get_constant_schedule_with_warmup`` (warm-up 0) whatever that flag says, and its DeepSpeed
    configuration (``utils/ds_utils.py``) adds no scheduler: its runs train at a constant rate,
    as this loop does.
    """
    if not isinstance(epochs, (list, tuple, Mapping)):
        return int(epochs)
    tasks = getattr(experience, "tasks", None) or ()
    names = [task.name for task in tasks]
    if isinstance(epochs, Mapping):
        missing = [name for name in names if name not in epochs]
        name = getattr(experience, "task_name", None)
        if missing or name not in epochs:
            raise ValueError(f"epochs gives counts for tasks {sorted(epochs)}, but not for "
                             f"{missing or [name]}: give a count for every task of the stream")
        return int(epochs[name])
    if tasks and len(epochs) != len(tasks):
        raise ValueError(f"epochs gives {len(epochs)} counts, one per task, but the stream has {len(tasks)} "
                         f"tasks ({', '.join(names)}): give one count per task in stream order, a mapping "
                         "of task names to counts, or one count for every task")
    index = experience.current_experience
    if index >= len(epochs):
        raise ValueError(f"epochs gives {len(epochs)} counts, one per task; experience {index} has none")
    return int(epochs[index])


def default_text_evaluator():
    """The evaluator when none is given: the training loss per epoch, no loggers (Avalanche's
    default evaluator reads logits and class labels, which a text loop has not)."""
    from avalanche.evaluation.metrics import loss_metrics

    return EvaluationPlugin(loss_metrics(epoch=True), loggers=[])


class TextStrategy(ContinualLoop):
    """Continual learning of a language model, one task (experience) at a time (module docstring).

    Args (keyword-only; the rest go to ``SupervisedTemplate``):
        model: a :class:`~moram_avalanche.models.language_model.LanguageModel`, or a
            ``transformers`` model wrapped in one with ``tokenizer``.
        tokenizer: the model's tokenizer (ignored when ``model`` is a ``LanguageModel``).
        epochs: passes over each task's training data (paper: 1), or one count per task: a
            mapping of task names, or a sequence in stream order (:func:`epochs_of`; the
            release's TRACE run: 2,1,3,2,1,2,2,3 in TRACE's order).
        iterations: when given, exactly this many optimizer steps per task instead of ``epochs``
            (the command line's shared budget; 0 trains nothing).
        accumulation_steps: minibatches per optimizer step (gradient accumulation,
            :class:`~moram_avalanche.strategies.text.plugins.accumulation.AccumulatedSteps`; 1: none;
            the release's TRACE run: 8).
        lr: AdamW's learning rate (paper: 1e-3), constant unless ``lr_schedule`` says otherwise.
        lr_schedule: ``"constant"`` (the paper's classification streams, O-LoRA's scripts, the
            release's TRACE runs) or ``"cosine"``: a half cosine from ``lr`` to 0 over each task's
            steps (:class:`~moram_avalanche.strategies.text.plugins.schedule.TaskCosine`; the
            paper's CodeAlpaca fine-tuning, "cosine from 5e-4").
        weight_decay, betas: AdamW's (0; (0.9, 0.999), module constants).
        max_grad_norm: each optimizer step's gradients (after accumulation, in float32) are
            scaled to global L2 norm at most this (1.0: the published runs' DeepSpeed and
            Trainer setting, module docstring); None: no clipping.
        master_weights: step float32 master copies of bf16 / fp16 trainable weights (True, as
            DeepSpeed's bf16 mode); False: pure low-precision weights (updates below half a
            bf16 spacing are lost). A float32 model is the same either way.
        max_source_length, max_target_length, max_new_tokens: prompt tokens kept, answer
            tokens trained, tokens generated (O-LoRA: 512, 50, 50).
        repetition_penalty, no_repeat_ngram_size: greedy decoding's extras (1.0 and 0: plain
            greedy; the release's TRACE inference: 1.2 and 3, ``TRACE/inference/infer_part.py``).
        compile_generation: ``"auto"`` (on a CUDA device, generation with a static KV cache and
            the decode step compiled into CUDA graphs), True or False
            (:class:`~moram_avalanche.models.language_model.LanguageModel`).
        progress: accepted for the run path's signature (the loop prints no bars).
        train_mb_size: minibatch (paper: 64). eval_mb_size: evaluation minibatch (default:
            ``train_mb_size``).
        device: a torch device or ``"auto"``.
    """

    #: data-parallel under torchrun: every global batch of ``train_mb_size`` is split between the
    #: processes (:class:`~moram_avalanche.algorithms.data_parallel.ShardedBatches`), gradients
    #: are averaged and each test sample is scored by one process (the DataParallel plugin)
    needs = StrategyNeeds()
    #: how the text streams' items become a batch (the DataParallel plugin's evaluation shards too)
    batch_collate = staticmethod(collate_text)
    #: the value checks of its own options (run once, by check_strategy_options)
    check_values = staticmethod(lambda options: check_text_loop_options(options))
    #: what :attr:`mb_output` holds in evaluation: each sample's hit (read by AccuracyMatrix)
    eval_output = "scores"

    @classmethod
    def check_benchmark(cls, options: Mapping, benchmark) -> None:
        """What the options say against the stream they will train on, before anything is built:
        with an ``iterations`` budget, one optimizer step may not accumulate more minibatches
        than a task holds (each step would read the task's examples more than once, and the run
        would take ``accumulation_steps`` times the passes asked for). With the ``epochs`` budget a
        task's shorter last cycle is stepped at the epoch's end (:class:`AccumulatedSteps`)."""
        from ..options import strategy_parameters

        defaults = {name: p.default for name, p in strategy_parameters(cls).items()}
        given = {**defaults, **{k: v for k, v in options.items() if v is not None}}
        steps, batch = given.get("accumulation_steps", 1), given.get("train_mb_size", LOOP.train_mb_size)
        if given.get("iterations") is None or not isinstance(steps, int) or steps <= 1:
            return
        for index, experience in enumerate(benchmark.train_stream):
            size = len(experience.dataset)
            batches = -(-size // batch)
            if steps > batches:
                name = getattr(experience, "task_name", None) or f"task {index + 1}"
                raise ValueError(
                    f"accumulation_steps {steps} is more minibatches than {name!r} holds ({size} examples, "
                    f"{batches} minibatch(es) of train_mb_size {batch}): with iterations={given['iterations']} "
                    f"each optimizer step would read its examples more than once; give accumulation_steps "
                    f"<= {batches}, or leave iterations out (one epoch per task)")

    def __init__(self, *, model, tokenizer=None, epochs: Union[int, Sequence[int], Mapping[str, int]] = LOOP.epochs,
                 iterations: Optional[int] = None, lr: float = LOOP.lr, weight_decay: float = LOOP.weight_decay,
                 betas=LOOP.betas, max_source_length: int = MAX_SOURCE_LENGTH,
                 max_target_length: int = MAX_TARGET_LENGTH, max_new_tokens: int = MAX_TARGET_LENGTH,
                 progress: bool = True, train_mb_size: int = LOOP.train_mb_size,
                 eval_mb_size: Optional[int] = None, device="cpu", plugins=None, evaluator=default_text_evaluator,
                 eval_every: int = -1, accumulation_steps: int = 1, repetition_penalty: float = 1.0,
                 no_repeat_ngram_size: int = 0, compile_generation: Union[bool, Literal["auto"]] = "auto",
                 lr_schedule: str = "constant", max_grad_norm: Optional[float] = LOOP.max_grad_norm,
                 master_weights: bool = True, **base_kwargs):
        # the options were checked once, by __new__ (check_strategy_options), before this runs
        if not isinstance(model, LanguageModel):
            model = LanguageModel(model, tokenizer, max_source_length=max_source_length,
                                  max_target_length=max_target_length)
        model.max_source_length, model.max_target_length = max_source_length, max_target_length
        model.compile_generation = compile_generation
        plugins = [*(plugins or []), *schedule_plugins(lr_schedule)]  # a new list: the caller's is not changed
        super().__init__(model=model, lr=lr, betas=betas, weight_decay=weight_decay, progress=progress,
                         train_mb_size=train_mb_size, eval_mb_size=eval_mb_size or train_mb_size,
                         train_epochs=epochs if iterations is None and isinstance(epochs, int) else 1,
                         device=device, plugins=plugins, evaluator=evaluator, eval_every=eval_every, **base_kwargs)
        text_plugins(self.plugins)  # Avalanche's plugins that run their own forward, on text batches
        self.tokenizer = model.tokenizer
        self.iterations = iterations
        self.epochs = (tuple(epochs) if isinstance(epochs, (list, tuple))
                       else dict(epochs) if isinstance(epochs, Mapping) else epochs)
        self.accumulation_steps = accumulation_steps
        self.max_grad_norm = None if max_grad_norm is None else float(max_grad_norm)
        self.master_weights = bool(master_weights)
        self.max_new_tokens = max_new_tokens
        #: greedy decoding's extras (the release's TRACE inference: repetition penalty 1.2, no repeated 3-grams)
        self.decoding = Decoding(repetition_penalty, no_repeat_ngram_size)
        #: the answers generated for the current evaluation minibatch
        self.mb_predictions: List[str] = []

    @property
    def decoding_settings(self) -> dict:
        """What evaluation decodes with (recorded in a run's record, ``contents.decoding``):
        ``max_new_tokens`` and the model's :meth:`~moram_avalanche.models.language_model.LanguageModel.greedy_settings`,
        a generation config built from scratch (the model folder's ``generation_config.json`` is not read)."""
        return {"max_new_tokens": self.max_new_tokens, **self.model.greedy_settings(self.decoding)}

    # ------------------------------------------------------------------ data
    def make_eval_dataloader(self, num_workers=0, pin_memory=None, persistent_workers=False, **kwargs):
        """Batches of ``eval_mb_size`` in the experience's order, collated as text (:attr:`batch_collate`)."""
        self.dataloader = DataLoader(
            self.adapted_dataset, batch_size=self.eval_mb_size, shuffle=False, collate_fn=self.batch_collate,
            num_workers=num_workers, persistent_workers=bool(persistent_workers) and num_workers > 0,
            pin_memory=self.device.type == "cuda" if pin_memory is None else pin_memory)

    def _unpack_minibatch(self):
        """Prompts and answers stay strings; the task labels go to the device."""
        self.mbatch = list(self.mbatch)
        self.mbatch[-1] = self.mbatch[-1].to(self.device)

    # ------------------------------------------------------------------ optimisation
    def _before_training_exp(self, **kwargs):
        """This experience's epochs (:func:`epochs_of`) unless ``iterations`` fixes the budget."""
        if self.iterations is None:
            self.train_epochs = epochs_of(self.epochs, self.experience)
        super()._before_training_exp(**kwargs)

    def training_optimizer(self, params):
        """The loop's optimizer (float32 masters, clipping: the harness's), stepping once per
        ``accumulation_steps`` minibatches
        (:class:`~moram_avalanche.strategies.text.plugins.accumulation.AccumulatedSteps`)."""
        optimizer = super().training_optimizer(params)
        return AccumulatedSteps(optimizer, self.accumulation_steps) if self.accumulation_steps > 1 else optimizer

    def training_epoch(self, **kwargs):
        if self.iterations == 0:
            return
        if self.optimizer is None:
            raise RuntimeError(f"{type(self).__name__} has nothing to train: no parameter of the model "
                               "requires grad")
        if self.iterations is not None:  # optimizer steps: accumulation_steps minibatches each
            what = f"the training data of task {getattr(self.experience, 'task_name', '?')!r}"
            self.dataloader = FixedBatches(self.dataloader, self.iterations * self.accumulation_steps, what)
        super().training_epoch(**kwargs)
        if isinstance(self.optimizer, AccumulatedSteps):
            self.optimizer.flush()  # an epoch's shorter last cycle

    def backward(self):
        """The loss's backward; divided by ``accumulation_steps`` when gradients accumulate."""
        loss = self.loss / self.accumulation_steps if self.accumulation_steps > 1 else self.loss
        loss.backward(retain_graph=self.retain_graph)

    # ------------------------------------------------------------------ model output
    @property
    def mb_prompt_cuts(self):
        """How each prompt of the minibatch is cut, from its task's declaration (None: the model's way)."""
        tasks = getattr(self.experience, "tasks", None)
        return prompt_cuts(tasks, self.mb_task_id.tolist()) if tasks else None

    def forward(self):
        """Training: the token loss of the minibatch. Evaluation: each sample's hit (1.0 / 0.0)."""
        if self.is_training:
            return self.model.loss(self.mb_x, self.mb_y, self.mb_prompt_cuts)
        self.mb_predictions = self.model.generate(self.mb_x, self.max_new_tokens, self.mb_prompt_cuts, self.decoding)
        return sample_scores(self.mb_predictions, self.mb_y, self.experience.metric, self.device,
                             sources=self.mb_x)

    def criterion(self):
        """Training: the token loss (:meth:`forward`; plugins add their terms to ``loss``).
        Evaluation: zero (answers are scored by generation, not by the loss)."""
        if self.is_training:
            return self.mb_output
        return torch.zeros((), device=self.device)


def sample_scores(predictions: Sequence[str], references: Sequence[str], metric: str, device=None, *,
                  sources: Optional[Sequence[str]] = None) -> torch.Tensor:
    """``[B]`` float tensor: each answer's score under ``metric`` as a fraction (score / 100).

    ``sources`` (the prompts) are what SARI compares the answer with. The mean of the scores is
    the metric over the batch: every metric of
    :data:`~moram_avalanche.benchmarks.text.metrics.TEXT_METRICS` is a mean over samples.
    """
    if metric not in TEXT_METRICS:
        raise ValueError(f"unknown text metric {metric!r}; known: {', '.join(TEXT_METRICS)}")
    sources = [None] * len(predictions) if sources is None else list(sources)
    score = TEXT_METRICS[metric]
    scores = [score([p], [r], sources=None if s is None else [s])
              for p, r, s in zip(predictions, references, sources)]
    return torch.tensor([s / 100.0 for s in scores], dtype=torch.float64, device=device)


__all__ = ["MAX_ACCUMULATION_STEPS", "PAPER_TEXT_LOOP", "TEXT_BETAS", "TextStrategy", "check_epochs", "check_text_loop_options",
           "collate_text", "default_text_evaluator", "epochs_of", "sample_scores"]
