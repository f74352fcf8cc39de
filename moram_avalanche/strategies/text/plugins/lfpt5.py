"""LFPT5Plugin: LFPT5's pseudo-samples and its two extra losses, on a language model with a soft prompt.

At each task's start (:meth:`LFPT5Plugin.before_train_dataset_adaptation`) the plugin

0. at the first task, writes the official initial rows into the prompt (:meth:`LFPT5Plugin.init_rows`;
   ``label_rows=False``: not);
1. adds the separator ``__ans__`` and one generation token per task of the stream to the
   tokenizer (:func:`~moram_avalanche.text.lfpt5_prompt.add_tokens`);
2. keeps a frozen copy of the prompt as it is now (the model "before" the task, for the
   distillation);
3. from the second task on, samples ``draws`` texts after each earlier task's generation token
   (official ``model.py`` ``_generative_samples``: top-k 64, repetition penalty 2.5, at most 128
   tokens), seeded by ``seed`` and the task's place (torch's global generator is left as it was),
   parses them and keeps ``per_label`` per label (:mod:`moram_avalanche.algorithms.lfpt5`);

then adds those pseudo-samples, labelled with their task, to the task's training data
(:meth:`after_train_dataset_adaptation`). At each step (:meth:`before_backward`) the strategy's
loss ``L_task`` becomes ``(L_task + lm_lambda * L_lm) * (1 - kd_lambda) + kd_lambda * L_kd``:
``L_lm`` is the token loss of every row's ``"<prompt> __ans__ <answer>"`` after its task's
generation token (its target cut at ``lm_target_length`` tokens; official: twice its 128-token
input length), ``L_kd`` the summed KL of the pseudo-samples' answer-token distributions before
and now (zero on the first task, which has none). The pseudo-samples of the current task and the
frozen prompt are the plugin's checkpoint state (:meth:`state_dict`), so a resumed run trains on
the same data.

Where this differs from the official code: the distillation sums over the answer tokens
(``LanguageModel.answer_logits``), not over every decoder position of the padded batch (whose
count depends on the batch's longest answer); a task without label words (a generation task)
keeps any non-empty answer.

How many draws: the official code samples ``numberreturnseq`` texts for each of ``filecopynum``
copies of every line of the task's few-shot test file (``Classification.py:365-366, 491-493,
510-512``: 3 x 1 per line in its first run, 12 x 3 and 12 x 4 in the other two), so the count
follows a file these loops do not read; :data:`PSEUDO_DRAWS` (500 per earlier task) is this
library's choice, ample for the ``2 x pseudo_per_label`` per label the selection draws from.
(The "100 x 5" once cited for it came from TRACE's commit 0ba4b64, since replaced: TRACE's LFPT5
now writes no pseudo-samples from a generation token at all, :mod:`moram_avalanche.algorithms.lfpt5`.)
"""

from __future__ import annotations

import contextlib
import copy
import logging
import random
import warnings
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import torch
from avalanche.core import SupervisedPlugin
from torch.utils.data import ConcatDataset, Dataset

from ....algorithms.lfpt5 import (
    ANSWER_TOKEN,
    KD_LAMBDA,
    LM_LAMBDA,
    PSEUDO_PER_LABEL,
    combined_loss,
    generation_token,
    kd_loss,
    lm_target,
    parse_pseudo,
    select_pseudo,
)
from ....text.lfpt5_prompt import PROMPT_INIT_WORDS, add_tokens, word_rows
from ....utils.checks import check_int_range, check_number, check_positive_int
from ....utils.random_state import kept_rng_state
from ..settings import given_config

logger = logging.getLogger(__name__)

#: sampled texts per earlier task: this library's choice (module docstring: the official count
#: follows the task's few-shot test file)
PSEUDO_DRAWS = 500
#: sampling (official ``model.py`` ``_generative_samples``: ``top_k=64``, ``repetition_penalty=2.5``,
#: ``max_length=args.max_length`` = 128)
PSEUDO_TOP_K = 64
PSEUDO_REPETITION_PENALTY = 2.5
PSEUDO_MAX_TOKENS = 128
#: tokens of an LM target ``"<prompt> __ans__ <answer>"`` (official ``dataset.py``: ``maxlen * 2`` = 256)
LM_TARGET_LENGTH = 256
#: the sampling seed (official ``Classification.sh --seed 42``)
PSEUDO_SEED = 42
#: the most texts sampled per earlier task (beyond, a mistyped count would sample for hours)
MAX_PSEUDO_DRAWS = 100_000


@dataclass(frozen=True)
class LFPT5PluginConfig:
    """:class:`LFPT5Plugin`'s options: its losses' weights and its pseudo-samples' draws (defaults
    LFPT5's code, each cited where its constant is written: :data:`~moram_avalanche.algorithms.lfpt5.LM_LAMBDA`,
    :data:`~moram_avalanche.algorithms.lfpt5.KD_LAMBDA`,
    :data:`~moram_avalanche.algorithms.lfpt5.PSEUDO_PER_LABEL`, :data:`PSEUDO_DRAWS`,
    :data:`PSEUDO_TOP_K`, :data:`PSEUDO_REPETITION_PENALTY`, :data:`PSEUDO_MAX_TOKENS`,
    :data:`LM_TARGET_LENGTH`, :data:`PSEUDO_SEED`).

    Checked once, when it is made: a ValueError naming the option, what was given and LFPT5's value.
    """

    lm_lambda: float = LM_LAMBDA
    kd_lambda: float = KD_LAMBDA
    pseudo_per_label: int = PSEUDO_PER_LABEL
    pseudo_draws: int = PSEUDO_DRAWS
    pseudo_top_k: int = PSEUDO_TOP_K
    pseudo_repetition_penalty: float = PSEUDO_REPETITION_PENALTY
    pseudo_max_tokens: int = PSEUDO_MAX_TOKENS
    lm_target_length: int = LM_TARGET_LENGTH
    pseudo_seed: int = PSEUDO_SEED

    def __post_init__(self) -> None:
        check_number("lm_lambda", self.lm_lambda, low=0, hint=f"LFPT5: {LM_LAMBDA:g}")
        check_number("kd_lambda", self.kd_lambda, low=0, high=1, hint=f"LFPT5: {KD_LAMBDA:g}")
        check_positive_int("pseudo_max_tokens", self.pseudo_max_tokens)
        check_positive_int("lm_target_length", self.lm_target_length)
        check_int_range("pseudo_draws", self.pseudo_draws, high=MAX_PSEUDO_DRAWS,
                        hint=f"texts sampled per earlier task; this library's default: {PSEUDO_DRAWS}")
        check_int_range("pseudo_per_label", self.pseudo_per_label, low=0, high=MAX_PSEUDO_DRAWS,
                        hint=f"pseudo-samples per label of each earlier task; LFPT5: {PSEUDO_PER_LABEL}; 0: none")
        check_int_range("pseudo_top_k", self.pseudo_top_k, low=0, high=10 ** 7, hint=f"LFPT5: {PSEUDO_TOP_K}; 0: no cut")
        check_number("pseudo_repetition_penalty", self.pseudo_repetition_penalty, low=0, low_open=True,
                     hint=f"LFPT5: {PSEUDO_REPETITION_PENALTY:g}; 1: none")
        check_int_range("pseudo_seed", self.pseudo_seed, low=0, high=2 ** 31 - 1, hint=f"LFPT5: {PSEUDO_SEED}")


#: LFPT5's code's plugin settings: the defaults of :class:`LFPT5PluginConfig`
LFPT5_PLUGIN_SETTING = LFPT5PluginConfig()


def check_lfpt5_options(options) -> None:
    """Value checks of LFPT5's own options given in ``options`` (one line each): its plugin's
    configuration (:class:`LFPT5PluginConfig`)."""
    given_config(LFPT5PluginConfig, options)


class PseudoSamples(Dataset):
    """``(prompt, answer, task label)`` items, as the text streams' (:func:`collate_text`)."""

    def __init__(self, items: List[Tuple[str, str, int]]) -> None:
        self.items = list(items)

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index):
        return self.items[index]


class LFPT5Plugin(SupervisedPlugin):
    """LFPT5's pseudo-samples and losses (module docstring). The strategy's model is a
    :class:`~moram_avalanche.models.language_model.LanguageModel` whose :attr:`prefix` is the
    soft prompt (a :class:`~moram_avalanche.text.soft_prompt.SoftPrompt`).

    Its options are checked once, as an :class:`LFPT5PluginConfig` (:attr:`config`)."""

    def __init__(self, *, lm_lambda: float = LM_LAMBDA, kd_lambda: float = KD_LAMBDA,
                 pseudo_per_label: int = PSEUDO_PER_LABEL, pseudo_draws: int = PSEUDO_DRAWS,
                 pseudo_top_k: int = PSEUDO_TOP_K, pseudo_repetition_penalty: float = PSEUDO_REPETITION_PENALTY,
                 pseudo_max_tokens: int = PSEUDO_MAX_TOKENS, lm_target_length: int = LM_TARGET_LENGTH,
                 pseudo_seed: int = PSEUDO_SEED, label_rows: bool = True) -> None:
        super().__init__()
        #: the options, checked once
        self.config = config = LFPT5PluginConfig(lm_lambda, kd_lambda, pseudo_per_label, pseudo_draws, pseudo_top_k,
                                                 pseudo_repetition_penalty, pseudo_max_tokens, lm_target_length,
                                                 pseudo_seed)
        self.lm_lambda, self.kd_lambda = float(config.lm_lambda), float(config.kd_lambda)
        self.per_label, self.draws = config.pseudo_per_label, config.pseudo_draws
        self.top_k, self.repetition_penalty = config.pseudo_top_k, float(config.pseudo_repetition_penalty)
        self.max_tokens, self.lm_target_length = config.pseudo_max_tokens, config.lm_target_length
        self.seed = config.pseudo_seed
        #: whether the first task's start writes the official word rows into the prompt (:meth:`init_rows`)
        self.label_rows = bool(label_rows)
        #: the experience whose pseudo-samples :attr:`pseudo` holds (-1: none yet)
        self.task_index = -1
        #: the current task's pseudo-samples: ``(prompt, answer, task label)``
        self.pseudo: List[Tuple[str, str, int]] = []
        #: the prompt as the current task started (the model "before" it), or None
        self.previous: Optional[torch.Tensor] = None
        #: the last step's parts: task, lm and kd losses (floats)
        self.last: Dict[str, float] = {"task": 0.0, "lm": 0.0, "kd": 0.0}

    # ------------------------------------------------------------------ checkpoint state
    def state_dict(self) -> dict:
        return {"task_index": self.task_index, "pseudo": [list(item) for item in self.pseudo],
                "previous": None if self.previous is None else self.previous.detach().cpu().clone()}

    def load_state_dict(self, state: dict) -> None:
        self.task_index = int(state["task_index"])
        self.pseudo = [(str(p), str(a), int(t)) for p, a, t in state["pseudo"]]
        self.previous = None if state["previous"] is None else state["previous"].clone()

    # ------------------------------------------------------------------ task start
    @staticmethod
    def tasks_of(strategy) -> list:
        tasks = getattr(strategy.experience, "tasks", None)
        if not tasks:
            raise ValueError("LFPT5 needs a text stream whose experiences name their tasks (experience.tasks): "
                             "build the benchmark with moram_avalanche.benchmarks.text.stream")
        return list(tasks)

    def before_train_dataset_adaptation(self, strategy, **kwargs):
        model, tasks = strategy.model, self.tasks_of(strategy)
        if getattr(model, "prefix", None) is None or not hasattr(model.prefix, "weight"):
            raise ValueError("LFPT5Plugin needs a LanguageModel whose prefix is a soft prompt (TextLFPT5 builds it)")
        add_tokens(model.model, model.tokenizer, [ANSWER_TOKEN, *(generation_token(t.name) for t in tasks)])
        index = strategy.experience.current_experience
        if index == self.task_index:  # resumed inside this task: the stored samples and prompt
            return
        if index == 0 and self.task_index == -1 and self.label_rows:
            self.init_rows(model, tasks[0])
        self.previous = model.prefix.weight.detach().clone()
        self.pseudo = self.generate(strategy, tasks, index) if index > 0 and self.per_label > 0 else []
        self.task_index = index

    @staticmethod
    def init_rows(model, task) -> None:
        """The prompt's first rows: the mean embeddings of "sentence classification", the first
        task's name and each of its labels (official ``getpromptembedding``; as many as fit)."""
        texts = [PROMPT_INIT_WORDS, task.name, *task.label_words][: model.prefix.weight.shape[0]]
        rows = word_rows(model.model.get_input_embeddings(), model.tokenizer, texts)
        with torch.no_grad():
            model.prefix.weight[: len(rows)] = rows.to(model.prefix.weight.device, model.prefix.weight.dtype)

    def generate(self, strategy, tasks, index: int) -> List[Tuple[str, str, int]]:
        """The pseudo-samples of tasks ``0..index-1``: ``draws`` texts sampled after each task's
        generation token, parsed, ``per_label`` kept per label."""
        from tqdm.auto import tqdm

        model = strategy.model
        items: List[Tuple[str, str, int]] = []
        was_training = model.training
        model.eval()
        bar = tqdm(range(index), desc=f"LFPT5 pseudo-samples before task {index + 1}", unit="task",
                   disable=not getattr(strategy, "progress", False), leave=False)
        try:
            for earlier in bar:
                task = tasks[earlier]
                texts = self.sample(model, generation_token(task.name), seed=self.seed + 1000 * index + earlier,
                                    batch=max(1, int(getattr(strategy, "eval_mb_size", None) or self.draws)))
                parsed = [pair for pair in (parse_pseudo(text, task.label_words) for text in texts) if pair]
                rng = random.Random(self.seed + 1000 * index + earlier)
                kept = select_pseudo(parsed, self.per_label, rng)
                items += [(prompt, answer, earlier) for prompt, answer in kept]
                logger.info("LFPT5: task %r: %d of %d sampled texts parsed, %d kept", task.name, len(parsed),
                            len(texts), len(kept))
        finally:
            bar.close()
            model.train(was_training)
        return items

    def sample(self, model, token: str, *, seed: int, batch: int) -> List[str]:
        """``draws`` texts sampled after ``token``, ``batch`` at a time, from a generator seeded by
        ``seed`` (every global generator, each CUDA device's included, is put back afterwards:
        :func:`~moram_avalanche.utils.random_state.kept_rng_state`)."""
        texts: List[str] = []
        with kept_rng_state(), warnings.catch_warnings():
            # transformers warns that the penalty skips the prompt given as embeddings: LFPT5's T5 applies it
            # to the decoder's tokens only too (the prompt is the encoder's input)
            warnings.filterwarnings("ignore", message=".*repetition_penalty.*inputs_embeds.*")
            torch.manual_seed(seed)
            while len(texts) < self.draws:
                n = min(batch, self.draws - len(texts))
                texts += model.sample([token], n, self.max_tokens, top_k=self.top_k,
                                      repetition_penalty=self.repetition_penalty)[0]
        return texts

    def after_train_dataset_adaptation(self, strategy, **kwargs):
        if self.pseudo:
            strategy.adapted_dataset = ConcatDataset([strategy.adapted_dataset, PseudoSamples(self.pseudo)])

    # ------------------------------------------------------------------ losses
    def lm_loss(self, strategy) -> torch.Tensor:
        """The token loss of each row's example after its task's generation token."""
        tasks, model = self.tasks_of(strategy), strategy.model
        labels = strategy.mb_task_id.tolist()
        prompts = [generation_token(tasks[int(t)].name) for t in labels]
        targets = [lm_target(p, a) for p, a in zip(strategy.mb_x, strategy.mb_y)]
        with _target_length(model, self.lm_target_length):
            return model.loss(prompts, targets)

    def distillation(self, strategy) -> Optional[torch.Tensor]:
        """``L_kd`` on the minibatch's pseudo-samples (rows of an earlier task), None without any."""
        index = strategy.experience.current_experience
        rows = [i for i, t in enumerate(strategy.mb_task_id.tolist()) if int(t) < index]
        if not rows or self.previous is None:
            return None
        model = strategy.model
        prompts, answers = [strategy.mb_x[i] for i in rows], [strategy.mb_y[i] for i in rows]
        now = model.answer_logits(prompts, answers)
        with torch.no_grad(), _teacher_prompt(model, self.previous):
            before = model.answer_logits(prompts, answers)
        return kd_loss(now, before)

    def before_backward(self, strategy, **kwargs):
        task = strategy.loss
        lm = self.lm_loss(strategy)
        kd = self.distillation(strategy) if self.kd_lambda > 0 else None
        kd = torch.zeros((), device=lm.device) if kd is None else kd
        strategy.loss = combined_loss(task, lm, kd, self.lm_lambda, self.kd_lambda)
        self.last = {"task": float(task.detach()), "lm": float(lm.detach()), "kd": float(kd.detach())}


@contextlib.contextmanager
def _target_length(model, length: int):
    """``model.max_target_length`` set to ``length`` inside the block."""
    kept = model.max_target_length
    model.max_target_length = length
    try:
        yield
    finally:
        model.max_target_length = kept


@contextlib.contextmanager
def _teacher_prompt(model, weight: torch.Tensor):
    """``model.prefix`` replaced by a frozen copy holding ``weight`` inside the block (the trained
    prompt and its graph are left alone)."""
    student = model.prefix
    teacher = copy.deepcopy(student).requires_grad_(False)
    teacher.weight.data = weight.to(student.weight.device, student.weight.dtype)
    model.prefix = teacher
    try:
        yield
    finally:
        model.prefix = student


__all__ = ["LFPT5Plugin", "LFPT5PluginConfig", "LFPT5_PLUGIN_SETTING", "LM_TARGET_LENGTH", "PSEUDO_DRAWS", "PSEUDO_MAX_TOKENS", "PSEUDO_REPETITION_PENALTY",
           "PSEUDO_SEED", "PSEUDO_TOP_K", "PseudoSamples", "check_lfpt5_options"]
