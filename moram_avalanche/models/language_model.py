"""A Hugging Face language model as an Avalanche model: token loss for training, generation for evaluation.

:class:`LanguageModel` wraps a seq2seq (T5) or causal (LLaMA, Gemma) model of ``transformers``
and its tokenizer, and owns the language-model family's scoring (one scoring per family, in
``models/``), for :class:`~moram_avalanche.strategies.text.loop.TextStrategy` and any other loop:

* :meth:`LanguageModel.loss` -- teacher-forced token cross-entropy of the answers given the
  prompts, padding ignored. Seq2seq: the answers are the decoder's labels. Causal: the model
  reads ``prompt + answer`` and only the answer's tokens (and the EOS that ends it) are
  scored; the prompt's positions are labelled ``-100`` (the convention of ``transformers``'
  loss, ``ignore_index=-100``). Every answer ends with the tokenizer's EOS token, added when
  the tokenizer does not add it itself, so the model learns where an answer stops. A causal
  model projects only the positions that predict answer tokens onto its vocabulary
  (:func:`causal_answer_logits`, ``transformers``' ``logits_to_keep``): the LM head's logits
  and their float32 copy for the loss are the largest tensors of a training step at a long
  context with a large vocabulary, and the prompt's positions are never scored. The loss is
  the same mean token cross-entropy as the model's own ``labels=`` loss (a test checks values
  and gradients). :attr:`LanguageModel.loss_reduction` ``"example-sum"`` makes it each answer's
  summed token cross-entropy (its negative log-likelihood) averaged over the answers, LoRI's
  loss (juzhengz/LoRI ``src/mask_trainers.py``: ``_get_batch_logps(average_log_prob=False)``,
  then ``losses.mean()``).
* :meth:`LanguageModel.answer_logits` -- the teacher-forced logits of exactly the positions
  :meth:`loss` scores (one row per answer token), for distillation between two models
  (LwF on text, :mod:`moram_avalanche.strategies.text.plugins.avalanche`).
* :meth:`LanguageModel.generate` -- greedy decoding (``do_sample=False``, one beam), answers
  decoded to strings; every process steps until all are done when the weights are sharded
  (``synced_gpus``, :attr:`LanguageModel.synced_generation`). Causal models read left-padded
  prompts (:func:`moram_avalanche.text.load.prepare_tokenizer`'s reason: every row continues
  from the same last column) and only the new tokens are decoded. :class:`Decoding` adds what
  the MoRAM release's inference passes to ``generate`` (``TRACE/inference/infer_part.py``:
  ``repetition_penalty=1.2``, ``no_repeat_ngram_size=3``, still greedy); its defaults (1.0, 0)
  are plain greedy decoding. Decoding follows a generation config built from scratch
  (:meth:`LanguageModel.base_generation_config`, the token ids, and :meth:`LanguageModel.greedy_settings`
  by name), never the model folder's ``generation_config.json``, whose repetition penalty,
  ``min_new_tokens``, ``top_k`` or suppressed tokens ``transformers`` would otherwise apply to every
  ``generate`` call (:func:`own_generation_config`); :meth:`LanguageModel.sample` likewise.

Compiled generation (``compile_generation``): a decode step runs one token per sequence through
every layer, so on a GPU it is bound by kernel launches, and MoRAM's layers add a few per
layer. With a static KV cache (``cache_implementation="static"``) ``transformers`` compiles the
decode step (``torch.compile``, mode ``reduce-overhead``: CUDA graphs, one launch per step);
MoRAM's layers are traced whole (no graph break; the GPU path never synchronises). ``"auto"``
(the default) does it on a CUDA device for a model that supports it (``_can_compile_fullgraph``:
LLaMA, Gemma, T5, ...) and not when the weights are sharded; the prompts of a batch are then
padded to a multiple of :data:`GENERATION_BUCKET` tokens, so one compiled graph serves every
batch of that length and batch size (padding is masked: the answers are those of the unpadded
prompts). If compiling fails, ``"auto"`` warns once and generates without it from then on;
``True`` forces the static cache anywhere (``transformers`` compiles on GPUs, or wherever
``compile_config`` says) and lets errors through; ``False`` never.

Soft prompts (:attr:`LanguageModel.prefix`, None by default: the model reads token ids, as
without it): a :class:`~moram_avalanche.text.soft_prompt.PromptPrefix` (L2P's prompt pool, LFPT5's
soft prompt) receives the embeddings and mask of the cut, padded prompts and puts its vectors in
front; the model is then called with ``inputs_embeds`` (a seq2seq model's encoder input). A causal
model's prefix reads the prompts alone: in training the answer follows each row's last prompt
token and the padding is moved to the end (the labels with it, the prefix's positions
``IGNORE_INDEX``); in generation the padding is moved back to the left of the prefix, and only
the new tokens come back (``transformers`` returns only those for ``inputs_embeds``). With a
prefix, a causal model's ``repetition_penalty`` and ``no_repeat_ngram_size`` see the generated
tokens only, not the prompt's (``transformers`` has no prompt ids to read with ``inputs_embeds``;
TRACE's own L2P inference, ``model/Dynamic_network/L2P.py``, generates from ``inputs_embeds`` too).

How a long prompt is cut (:class:`PromptCut`, one per prompt; :func:`prompt_cuts`):

* a **causal** model keeps the prompt's **end**, where its cue is ("Summary:",
  "Simplification:", the line to complete): the MoRAM release's tokenizer truncates on the left
  (``TRACE/utils/utils.py``, asserted in ``training/main.py``); in training the prompt and the
  answer are cut together to ``max_source_length + max_target_length`` tokens, the whole answer
  kept (``utils/data/data_collator.py``: ``limit_len = max_prompt_len + max_ans_len``), so a
  prompt gets what a short answer leaves; in evaluation it keeps ``max_source_length``;
* a **seq2seq** model keeps what its tokenizer keeps (T5's: the beginning, O-LoRA's setting);
* a task may keep the beginning up to a limit of its own (TRACE's MeetingBank: 4,096 tokens
  of the transcript's head, ``--meetingbank_max_prompt_len``), declared by its stream
  (:attr:`~moram_avalanche.benchmarks.text.stream.TextStreamTask.keep`, ``prompt_limit``).

Special tokens the tokenizer adds (LLaMA's BOS) survive the cut. Lengths follow O-LoRA's T5
settings (``scripts/order_1.sh``: source length 512, target and generation length 50;
reference ``language_models.md``). The wrapper holds no parameter of its own: adapters
injected into ``model`` are found through it (``find_layers``), and its ``state_dict`` is the
wrapped model's under the prefix ``model.``.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import sys
import warnings
from dataclasses import dataclass
from typing import Dict, List, NamedTuple, Optional, Sequence, Union

import torch
import torch.nn.functional as F
from torch import nn

from ..algorithms.data_parallel import world_size
from ..algorithms.fsdp import holds_sharded_weights

#: O-LoRA's T5 settings (``scripts/order_1.sh``): source length 512, target / generation length 50
MAX_SOURCE_LENGTH = 512
MAX_TARGET_LENGTH = 50
#: the label of positions the loss ignores (``transformers``' and torch's ``ignore_index``)
IGNORE_INDEX = -100
#: compiled generation pads a batch's prompts to a multiple of this many tokens (module docstring)
GENERATION_BUCKET = 64
#: :meth:`LanguageModel.sample`'s top-k when none is given: ``transformers``' own default
#: (``GenerationConfig``), set explicitly so that no model folder's ``generation_config.json`` changes it
SAMPLING_TOP_K = 50
#: how :meth:`LanguageModel.loss` reduces the answer tokens' cross-entropies: their mean over the
#: batch's answer tokens (``transformers``' ``labels=`` loss), or each answer's sum averaged over the
#: answers (LoRI's; module docstring)
LOSS_REDUCTIONS = ("token-mean", "example-sum")


def check_compile_generation(value) -> Union[bool, str]:
    """``value`` if it is ``"auto"``, True or False; else a ValueError saying what each means."""
    if isinstance(value, bool) or (isinstance(value, str) and value == "auto"):
        return value
    raise ValueError(f"compile_generation takes 'auto' (a static KV cache and a compiled decode step on a CUDA "
                     f"device), True (always a static cache) or False (never), got {value!r}")
#: which end of a long prompt is kept: its end ("tail") or its beginning ("head")
KEEP_SIDES = ("tail", "head")


class PromptCut(NamedTuple):
    """How one prompt is cut: at most ``limit`` tokens (None: the model's ``max_source_length``),
    keeping its ``keep`` end ("tail" or "head"; None: the model's way, module docstring); and how
    long and how its generated answer is: at most ``max_length`` tokens of prompt and answer together
    (``transformers``' ``max_length``, bigcode-evaluation-harness's ``max_length_generation``; None:
    ``max_new_tokens`` alone bounds it), stripped of surrounding spaces (``strip``; False: as decoded, a code
    completion's leading line break and indentation kept). Training reads ``limit`` and ``keep`` only."""

    limit: Optional[int] = None
    keep: Optional[str] = None
    max_length: Optional[int] = None
    strip: bool = True


def prompt_cuts(tasks, task_ids) -> Optional[List[PromptCut]]:
    """One :class:`PromptCut` per sample from its task's declaration (``tasks[task_id]``'s
    ``prompt_limit``, ``keep``, ``max_length`` and ``strip_answers``); None when no task declares one
    (the model's way for all)."""
    cuts = [PromptCut(getattr(task, "prompt_limit", None), getattr(task, "keep", None),
                      getattr(task, "max_length", None), getattr(task, "strip_answers", True))
            for task in (tasks[int(t)] for t in task_ids)]
    return cuts if any(cut != PromptCut() for cut in cuts) else None


def answer_budgets(sources: Sequence[Sequence[int]], cuts: Optional[Sequence[PromptCut]],
                   max_new_tokens: int) -> List[int]:
    """The most tokens each prompt's answer may have: ``max_new_tokens``, and what its cut's ``max_length``
    leaves after its ``sources`` ids (none left: an empty answer, as the harness returns the prompt alone)."""
    cuts = list(cuts) if cuts is not None else [PromptCut()] * len(sources)
    return [max_new_tokens if cut.max_length is None else max(0, min(max_new_tokens, cut.max_length - len(source)))
            for source, cut in zip(sources, cuts)]


@dataclass(frozen=True)
class Decoding:
    """Options of greedy decoding beyond ``max_new_tokens``: ``repetition_penalty`` (1: none;
    the release's TRACE inference: 1.2) and ``no_repeat_ngram_size`` (0: none; the release: 3),
    passed to ``transformers``' ``generate`` (``TRACE/inference/infer_part.py``)."""

    repetition_penalty: float = 1.0
    no_repeat_ngram_size: int = 0

    def __post_init__(self):
        penalty, size = self.repetition_penalty, self.no_repeat_ngram_size
        if isinstance(penalty, bool) or not isinstance(penalty, (int, float)) or not penalty > 0:
            raise ValueError(f"repetition_penalty must be a positive number (1: none; the release's TRACE "
                             f"inference: 1.2), got {penalty!r}")
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(f"no_repeat_ngram_size must be a non-negative int (0: none; the release's TRACE "
                             f"inference: 3), got {size!r}")

    def settings(self) -> Dict[str, object]:
        """Both options, as ``generate`` keywords (what a run's record holds)."""
        return {"repetition_penalty": float(self.repetition_penalty), "no_repeat_ngram_size": self.no_repeat_ngram_size}

    def generate_kwargs(self) -> Dict[str, object]:
        """What differs from plain greedy decoding, as ``generate`` keywords."""
        kwargs: Dict[str, object] = {}
        if self.repetition_penalty != 1.0:
            kwargs["repetition_penalty"] = float(self.repetition_penalty)
        if self.no_repeat_ngram_size:
            kwargs["no_repeat_ngram_size"] = self.no_repeat_ngram_size
        return kwargs


@contextlib.contextmanager
def own_generation_config(model: nn.Module, config):
    """``model.generation_config`` is ``config`` inside the block (the one it had after). ``transformers``
    fills every field a given ``generation_config`` leaves unset from the model's own (read from the
    folder's ``generation_config.json``), so a config built from scratch is the whole story only while
    it is the model's own too. A peft model's is its base model's (the one whose ``generate`` reads it)."""
    base = model.get_base_model() if callable(getattr(model, "get_base_model", None)) else model
    kept = base.generation_config
    base.generation_config = config
    try:
        yield config
    finally:
        base.generation_config = kept


class LanguageModel(nn.Module):
    """A seq2seq or causal language model and its tokenizer (module docstring).

    Args:
        model: a ``transformers`` model (``config.is_encoder_decoder`` tells seq2seq from causal).
        tokenizer: its tokenizer (a causal one should pad on the left:
            :func:`moram_avalanche.text.load.prepare_tokenizer`; generation pads on the left
            regardless).
        max_source_length: prompt tokens kept (longer prompts are truncated; O-LoRA: 512).
        max_target_length: answer tokens kept for the loss (O-LoRA: 50).
        compile_generation: ``"auto"``, True or False: a static KV cache, so that ``transformers``
            compiles the decode step (module docstring).
        compile_config: ``transformers.CompileConfig`` for that compilation (default:
            ``transformers``' own, mode ``reduce-overhead``).
    """

    def __init__(self, model: nn.Module, tokenizer, *, max_source_length: int = MAX_SOURCE_LENGTH,
                 max_target_length: int = MAX_TARGET_LENGTH, compile_generation: Union[bool, str] = "auto",
                 compile_config=None) -> None:
        super().__init__()
        config = getattr(model, "config", None)
        if config is None or not callable(getattr(model, "generate", None)):
            raise TypeError(f"LanguageModel wraps a transformers model with a config and generate(), "
                            f"got {type(model).__name__}")
        if tokenizer is None:
            raise ValueError("LanguageModel needs the model's tokenizer (load_language_model returns both)")
        for name, value in (("max_source_length", max_source_length), ("max_target_length", max_target_length)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        self.model = model
        self.tokenizer = tokenizer
        self.seq2seq = bool(getattr(config, "is_encoder_decoder", False))
        self.max_source_length = max_source_length
        self.max_target_length = max_target_length
        #: how a long prompt is cut when no task says otherwise (module docstring)
        self.keep = "tail" if not self.seq2seq or getattr(tokenizer, "truncation_side", "right") == "left" else "head"
        self.eos_id = _first_id(tokenizer.eos_token_id, getattr(config, "eos_token_id", None))
        self.pad_id = _first_id(tokenizer.pad_token_id, getattr(config, "pad_token_id", None), self.eos_id)
        if self.pad_id is None:
            raise ValueError(f"neither the tokenizer nor the config of {type(model).__name__} names a pad or "
                             "EOS token: set tokenizer.pad_token before training")
        self.compile_generation = check_compile_generation(compile_generation)
        self.compile_config = compile_config
        #: why compiled generation was turned off (``"auto"`` after a failure), or None
        self.compile_failure: Optional[str] = None
        #: how :meth:`loss` reduces the answer tokens' cross-entropies (one of :data:`LOSS_REDUCTIONS`)
        self.loss_reduction = LOSS_REDUCTIONS[0]
        #: prompt vectors put in front of every prompt's embeddings (a
        #: :class:`~moram_avalanche.text.soft_prompt.PromptPrefix`: L2P, LFPT5), or None (section
        #: "Soft prompts" of the module docstring); a module, so its weights are in ``state_dict``
        self.prefix: Optional[nn.Module] = None

    @property
    def config(self):
        """The wrapped model's config (what target tables read)."""
        return self.model.config

    def file_fingerprints(self) -> Dict[str, str]:
        """Short hashes of the model's ``config.json``, ``generation_config.json`` and tokenizer files
        (:func:`~moram_avalanche.text.model_files.language_model_files`), for a run's record."""
        from ..text.model_files import language_model_files

        return language_model_files(self.model, self.tokenizer)

    def token_settings(self) -> Dict[str, int]:
        """The token ids decoding needs: pad and EOS (the tokenizer's, as :meth:`generate` pads and
        stops), BOS and a seq2seq decoder's start token (the model's ``config.json``)."""
        config = self.model.config
        ids = {"pad_token_id": self.pad_id, "eos_token_id": self.eos_id,
               "bos_token_id": getattr(config, "bos_token_id", None),
               "decoder_start_token_id": getattr(config, "decoder_start_token_id", None) if self.seq2seq else None}
        return {name: int(value) for name, value in ids.items() if value is not None}

    def greedy_settings(self, decoding: Optional[Decoding] = None) -> Dict[str, object]:
        """What :meth:`generate` decodes with besides the number of new tokens: one beam, no sampling,
        ``decoding``'s options (:class:`Decoding`; default plain greedy) and :meth:`token_settings`
        (module docstring). Recorded in a run's record."""
        return {"do_sample": False, "num_beams": 1, **(decoding or Decoding()).settings(), **self.token_settings()}

    def base_generation_config(self):
        """A ``transformers.GenerationConfig`` built from scratch, :meth:`token_settings` and nothing
        else: the model's own while it generates (:func:`own_generation_config`), so that nothing of
        the model folder's ``generation_config.json`` reaches decoding; the settings themselves are
        passed to ``generate`` by name (:meth:`greedy_settings`)."""
        from transformers import GenerationConfig

        return GenerationConfig(**self.token_settings())

    @property
    def synced_generation(self) -> bool:
        """Whether :meth:`generate` must keep stepping until every process is done: the weights are
        sharded over several processes (``--fsdp``), so each forward call is a collective.
        ``transformers`` turns ``synced_gpus`` on by itself only for its own FSDP integration
        (``is_fsdp_managed_module``), not for a model sharded by ``fully_shard``."""
        return world_size() > 1 and holds_sharded_weights(self.model)

    @property
    def compiles_generation(self) -> bool:
        """Whether :meth:`generate` uses a static KV cache, the decode step compiled (module docstring)."""
        if self.compile_generation is False or self.compile_failure is not None:
            return False
        if self.compile_generation is True:
            return True
        base = self.model.get_base_model() if callable(getattr(self.model, "get_base_model", None)) else self.model
        return (self.device.type == "cuda" and bool(getattr(type(base), "_can_compile_fullgraph", False))
                and not self.synced_generation)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    # ------------------------------------------------------------------ tokens
    def _ids(self, texts: Sequence[str], limit: int, special: bool = True, keep: Optional[str] = None) -> List[List[int]]:
        """Token ids of ``texts``, at most ``limit`` each, keeping ``keep``'s end (None: the model's)."""
        texts = _strings(texts)
        return self._cut_ids(texts, [limit] * len(texts), [keep or self.keep] * len(texts), special)

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` as a prompt, the tokenizer's special tokens included, uncut."""
        return len(self._cut_ids(_strings(text), [10 ** 9], [self.keep])[0])

    def _cut_ids(self, texts: List[str], limits: Sequence[int], keeps: Sequence[str], special: bool = True):
        """Each text's ids, at most ``limits[i]`` tokens keeping its ``keeps[i]`` end; special tokens
        the tokenizer adds survive (``transformers`` truncates before adding them)."""
        groups: Dict[tuple, List[int]] = {}
        for index, key in enumerate(zip(limits, keeps)):
            groups.setdefault(key, []).append(index)
        rows: List[List[int]] = [[] for _ in texts]
        side = getattr(self.tokenizer, "truncation_side", "right")
        try:
            for (limit, keep), indices in groups.items():
                if keep not in KEEP_SIDES:
                    raise ValueError(f"keep must be one of {KEEP_SIDES}, got {keep!r}")
                self.tokenizer.truncation_side = "left" if keep == "tail" else "right"
                ids = self.tokenizer([texts[i] for i in indices], add_special_tokens=special, truncation=True,
                                     max_length=max(1, int(limit)))["input_ids"]
                for index, row in zip(indices, ids):
                    rows[index] = list(row)
        finally:
            self.tokenizer.truncation_side = side
        return rows

    def _prompt_ids(self, prompts: List[str], cuts: Optional[Sequence[PromptCut]],
                    room: Optional[Sequence[int]] = None) -> List[List[int]]:
        """The prompts' ids cut by ``cuts`` (module docstring); ``room[i]`` tokens are added to a
        prompt's limit (a causal model's training: what its answer leaves of ``max_target_length``)."""
        cuts = list(cuts) if cuts is not None else [PromptCut()] * len(prompts)
        if len(cuts) != len(prompts):
            raise ValueError(f"need one prompt cut per prompt, got {len(cuts)} for {len(prompts)} prompts")
        limits = [(cut.limit or self.max_source_length) + (room[i] if room is not None else 0)
                  for i, cut in enumerate(cuts)]
        return self._cut_ids(prompts, limits, [cut.keep or self.keep for cut in cuts])

    def _answer_ids(self, answers: Sequence[str]) -> List[List[int]]:
        """Answer tokens ending with EOS (added when the tokenizer did not), at most the target length."""
        rows = self._ids(answers, self.max_target_length, special=self.seq2seq, keep="head")  # an answer's start
        if self.eos_id is None:
            return rows
        return [row if row and row[-1] == self.eos_id else (row[: self.max_target_length - 1] + [self.eos_id])
                for row in rows]

    def _pad(self, rows: List[List[int]], value: int, left: bool = False, width: Optional[int] = None) -> torch.Tensor:
        width = max([len(row) for row in rows] + [width or 0])
        padded = [([value] * (width - len(row)) + row) if left else (row + [value] * (width - len(row)))
                  for row in rows]
        return torch.tensor(padded, dtype=torch.long, device=self.device)

    def _mask(self, rows: List[List[int]], left: bool = False, width: Optional[int] = None) -> torch.Tensor:
        return self._pad([[1] * len(row) for row in rows], 0, left, width)

    # ------------------------------------------------------------------ soft prompts
    def _embeds(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.model.get_input_embeddings()(input_ids)

    def _prefixed(self, inputs: dict, left: bool = False) -> dict:
        """``inputs`` (``input_ids``, ``attention_mask``) unchanged without a :attr:`prefix`; with
        one, ``inputs_embeds`` with its vectors in front of every prompt and the mask extended;
        ``left``: padding moved back to the left of the prompt vectors (a causal model's generation)."""
        if self.prefix is None:
            return inputs
        embeds, mask = self.prefix(self._embeds(inputs["input_ids"]), inputs["attention_mask"])
        if left:
            embeds, mask = _pack(embeds, mask, padding_first=True)
        return dict(inputs_embeds=embeds, attention_mask=mask)

    def _prefixed_causal(self, sources: List[List[int]], targets: List[List[int]]):
        """A causal model's teacher-forced inputs with the prefix: the prefix reads the prompts
        alone (right-padded), the answers follow each row's last prompt token, padding at the end."""
        prompt = self._prefixed(dict(input_ids=self._pad(sources, self.pad_id), attention_mask=self._mask(sources)))
        answer_ids = self._pad(targets, self.pad_id)
        embeds = torch.cat([prompt["inputs_embeds"], self._embeds(answer_ids).to(prompt["inputs_embeds"].dtype)], 1)
        mask = torch.cat([prompt["attention_mask"], self._mask(targets)], 1)
        labels = torch.cat([torch.full_like(prompt["attention_mask"], IGNORE_INDEX), self._pad(targets, IGNORE_INDEX)], 1)
        embeds, mask, labels = _pack(embeds, mask, labels, padding_first=False)
        return dict(inputs_embeds=embeds, attention_mask=mask), labels

    # ------------------------------------------------------------------ scoring
    def _teacher_forced(self, prompts: Sequence[str], answers: Sequence[str],
                        cuts: Optional[Sequence[PromptCut]] = None):
        """The model's inputs for teacher forcing and the ``[B, T]`` labels (``IGNORE_INDEX`` off the answers)."""
        prompts, answers = _strings(prompts), _strings(answers)
        if len(prompts) != len(answers) or not prompts:
            raise ValueError(f"loss needs one answer per prompt (and at least one), got {len(prompts)} prompts "
                             f"and {len(answers)} answers")
        targets = self._answer_ids(answers)
        # a causal model's prompt and answer are cut together: the prompt gets what the answer leaves
        room = None if self.seq2seq else [self.max_target_length - len(target) for target in targets]
        sources = self._prompt_ids(prompts, cuts, room)
        if self.seq2seq:
            inputs = dict(input_ids=self._pad(sources, self.pad_id), attention_mask=self._mask(sources))
            return self._prefixed(inputs), self._pad(targets, IGNORE_INDEX)
        if self.prefix is not None:
            return self._prefixed_causal(sources, targets)
        rows = [source + target for source, target in zip(sources, targets)]
        labels = [[IGNORE_INDEX] * len(source) + target for source, target in zip(sources, targets)]
        # right padding for the loss: every row's positions start at 0, the padded tail is masked
        return dict(input_ids=self._pad(rows, self.pad_id), attention_mask=self._mask(rows)), \
            self._pad(labels, IGNORE_INDEX)

    def teacher_forced(self, prompts: Sequence[str], answers: Sequence[str],
                       cuts: Optional[Sequence[PromptCut]] = None):
        """``(inputs, labels)``: the model's keyword inputs for teacher forcing (``input_ids``,
        ``attention_mask``) and the ``[B, T]`` labels, ``IGNORE_INDEX`` off the answers' tokens --
        what :meth:`loss` feeds the model (a seq2seq model also takes ``labels=``)."""
        return self._teacher_forced(prompts, answers, cuts)

    def loss(self, prompts: Sequence[str], answers: Sequence[str],
             cuts: Optional[Sequence[PromptCut]] = None) -> torch.Tensor:
        """Mean token cross-entropy of ``answers`` given ``prompts`` (teacher forcing, padding
        ignored); ``cuts``: how each long prompt is cut (None: the model's way). With
        :attr:`loss_reduction` ``"example-sum"``, each answer's summed token cross-entropy,
        averaged over the answers."""
        if self.loss_reduction not in LOSS_REDUCTIONS:
            raise ValueError(f"loss_reduction must be one of {LOSS_REDUCTIONS}, got {self.loss_reduction!r}")
        rows = None if self.loss_reduction == LOSS_REDUCTIONS[0] else len(_strings(answers))
        inputs, labels = self._teacher_forced(prompts, answers, cuts)
        if self.seq2seq:
            out = self.model(**inputs, labels=labels)
            if rows is None:
                return out.loss
            scored = labels != IGNORE_INDEX
            return token_loss(out.logits[scored], labels[scored], rows)
        return token_loss(*causal_answer_logits(self.model, inputs, labels), rows)

    def answer_logits(self, prompts: Sequence[str], answers: Sequence[str],
                      cuts: Optional[Sequence[PromptCut]] = None) -> torch.Tensor:
        """``[N, V]`` teacher-forced logits of the positions that predict the answers' tokens
        (the ``N`` tokens :meth:`loss` scores, in batch order): what distillation compares
        (e.g. LwF's old and new model on the same batch)."""
        inputs, labels = self._teacher_forced(prompts, answers, cuts)
        if self.seq2seq:  # the decoder reads the labels shifted right (T5 builds them from labels)
            logits = self.model(**inputs, labels=labels).logits
            return logits[labels != IGNORE_INDEX]
        return causal_answer_logits(self.model, inputs, labels)[0]

    def forward(self, prompts: Sequence[str], answers: Sequence[str],
                cuts: Optional[Sequence[PromptCut]] = None) -> torch.Tensor:
        """:meth:`loss` (what calling the model does, for loops that call it)."""
        return self.loss(prompts, answers, cuts)

    @torch.no_grad()
    def generate(self, prompts: Sequence[str], max_new_tokens: int = MAX_TARGET_LENGTH,
                 cuts: Optional[Sequence[PromptCut]] = None, decoding: Optional[Decoding] = None) -> List[str]:
        """Greedy answers to ``prompts``: decoded strings, special tokens and surrounding spaces
        removed; ``cuts``: how each long prompt is cut, how long its answer may be and whether it is
        stripped (:class:`PromptCut`); ``decoding``: :class:`Decoding`'s options.
        With :attr:`compiles_generation`, a static KV cache and the decode step compiled (``max_new_tokens``
        steps, one graph per prompt bucket; each answer then cut to its own length)."""
        prompts = _strings(prompts)
        if not prompts:
            return []
        sources = self._prompt_ids(prompts, cuts)
        budgets = self._answer_budgets(sources, cuts, max_new_tokens)
        left = not self.seq2seq
        compiled = self.compiles_generation
        width = -(-max(len(row) for row in sources) // GENERATION_BUCKET) * GENERATION_BUCKET if compiled else None
        input_ids = self._pad(sources, self.pad_id, left=left, width=width)
        steps = max_new_tokens if compiled else max(1, max(budgets))
        options = dict(max_new_tokens=steps, synced_gpus=self.synced_generation, **self.greedy_settings(decoding))
        if compiled:
            options["cache_implementation"] = "static"
            if self.compile_config is not None:
                options["compile_config"] = self.compile_config
        inputs = self._prefixed(dict(input_ids=input_ids, attention_mask=self._mask(sources, left=left, width=width)),
                                left=left)
        try:
            with warnings.catch_warnings():  # said once, in the module docstring (soft prompts)
                warnings.filterwarnings("ignore", message=r"Passing `\w+` with `inputs_embeds` and without `input_ids`")
                with own_generation_config(self.model, self.base_generation_config()):
                    out = self.model.generate(**inputs, **options)
        except Exception as error:
            if not compiled or self.compile_generation is True:
                raise
            self.compile_failure = f"{type(error).__name__}: {str(error).splitlines()[0][:300] if str(error) else ''}"
            warnings.warn(f"compiled generation failed ({self.compile_failure}); generating without a static "
                          "cache from now on (compile_generation=False skips the attempt)", RuntimeWarning,
                          stacklevel=2)
            return self.generate(prompts, max_new_tokens, cuts, decoding)
        strips = [True] * len(prompts) if cuts is None else [cut.strip for cut in cuts]
        return [text.strip() if strip else text
                for text, strip in zip(self._decoded(self._new_tokens(out, inputs), budgets), strips)]

    @torch.no_grad()
    def sample(self, prompts: Sequence[str], n: int, max_new_tokens: int = MAX_TARGET_LENGTH, *,
               temperature: float = 1.0, top_p: float = 1.0, top_k: Optional[int] = None,
               repetition_penalty: float = 1.0, cuts: Optional[Sequence[PromptCut]] = None,
               stop_sequences: Sequence[str] = ()) -> List[List[str]]:
        """``n`` sampled continuations of each prompt (nucleus sampling at ``temperature`` and
        ``top_p``; HumanEval's pass@k needs them), decoded with special tokens removed and
        **not stripped** (a code completion's first indentation is kept). Sampling draws from
        torch's generator: seed it for repeatable samples. ``top_k`` (None: ``transformers``'
        default, 50; 0: no cut) and ``repetition_penalty`` (1: none) as ``generate`` takes them (LFPT5's
        pseudo-samples: top-k 64, penalty 2.5). ``cuts``: how each prompt is cut and how long its answers may
        be (:class:`PromptCut`'s ``max_length``). ``stop_sequences``: a continuation stops being generated once
        its text holds one of them (bigcode-evaluation-harness's ``EndOfFunctionCriteria``, reading the new
        tokens only): time saved, nothing lost for a caller that cuts at the first of them."""
        prompts = _strings(prompts)
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n (samples per prompt) must be a positive integer, got {n!r}")
        if not (temperature > 0 and 0 < top_p <= 1):
            raise ValueError(f"sampling needs temperature > 0 and 0 < top_p <= 1, got {temperature!r} and {top_p!r}")
        extra: Dict[str, object] = {}
        if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0):
            raise ValueError(f"top_k must be a non-negative int (0: no cut), got {top_k!r}")
        extra.update(top_k=SAMPLING_TOP_K if top_k is None else top_k,
                     repetition_penalty=float(Decoding(repetition_penalty).repetition_penalty))
        if not prompts:
            return []
        sources = self._prompt_ids(prompts, cuts)
        budgets = self._answer_budgets(sources, cuts, max_new_tokens)
        left = not self.seq2seq
        input_ids = self._pad(sources, self.pad_id, left=left, width=None)
        inputs = self._prefixed(dict(input_ids=input_ids, attention_mask=self._mask(sources, left=left, width=None)),
                                left=left)
        if stop_sequences:
            start = inputs["input_ids"].shape[1] if "input_ids" in inputs and not self.seq2seq else 0
            extra["stopping_criteria"] = [_stop_at_sequences(self.tokenizer, start, tuple(stop_sequences))]
        with own_generation_config(self.model, self.base_generation_config()):
            out = self.model.generate(**inputs, max_new_tokens=max(1, max(budgets)), do_sample=True, num_beams=1,
                                      temperature=temperature, top_p=top_p, num_return_sequences=n,
                                      synced_gpus=self.synced_generation, **self.token_settings(), **extra)
        texts = self._decoded(self._new_tokens(out, inputs), [budget for budget in budgets for _ in range(n)])
        return [texts[i * n:(i + 1) * n] for i in range(len(prompts))]

    def _answer_budgets(self, sources, cuts, max_new_tokens: int) -> List[int]:
        """:func:`answer_budgets` of a causal model's prompts; a seq2seq model's ``max_length`` counts its
        answer alone (``transformers``' counts the decoder's tokens)."""
        return answer_budgets([[]] * len(sources) if self.seq2seq else sources, cuts, max_new_tokens)

    def _decoded(self, new: torch.Tensor, budgets: Sequence[int]) -> List[str]:
        """Each row of generated tokens up to its EOS and at most its budget, decoded without padding and
        special tokens (not stripped)."""
        texts = []
        for row, budget in zip(new.tolist(), budgets):
            if self.eos_id is not None and self.eos_id in row:
                row = row[: row.index(self.eos_id)]
            row = [token for token in row[:budget] if token != self.pad_id]
            texts.append(self.tokenizer.decode(row, skip_special_tokens=True))
        return texts

    def _new_tokens(self, out: torch.Tensor, inputs: dict) -> torch.Tensor:
        """The generated tokens of ``generate``'s output: a seq2seq model's after its start token; a
        causal model's after the prompt's ids (``transformers`` returns only the new tokens when
        it was given ``inputs_embeds``)."""
        if self.seq2seq:
            return out[:, 1:]
        return out if "input_ids" not in inputs else out[:, inputs["input_ids"].shape[1]:]


def _stop_at_sequences(tokenizer, start: int, stops: Sequence[str]):
    """A ``transformers`` stopping criterion: a row is done once the text of its tokens from ``start`` on
    holds one of ``stops`` (bigcode-evaluation-harness ``bigcode_eval/generation.py`` EndOfFunctionCriteria,
    row by row). Checked after every step, so only the last tokens can complete a stop: a stop of ``L``
    characters spans at most ``L`` tokens that each write a character, and only that many are decoded (not
    the whole continuation). A stop missed here (spread over tokens that write nothing) costs steps, never
    text: the caller's cut reads the whole continuation."""
    from transformers import StoppingCriteria

    window = max(len(stop) for stop in stops)

    class StopAtSequences(StoppingCriteria):
        def __call__(self, input_ids, scores, **kwargs):
            texts = tokenizer.batch_decode(input_ids[:, max(start, input_ids.shape[1] - window):],
                                           skip_special_tokens=True)
            return torch.tensor([any(stop in text for stop in stops) for text in texts], dtype=torch.bool,
                                device=input_ids.device)

    return StopAtSequences()


def causal_answer_logits(model: nn.Module, inputs: dict, labels: torch.Tensor):
    """``([N, V] logits, [N] targets)`` of the ``N`` positions of a causal model's input that
    predict an answer token (position ``i`` predicts token ``i + 1``; ``labels`` is
    ``IGNORE_INDEX`` off the answers), in batch order.

    When the model's forward takes ``logits_to_keep`` (``transformers``' causal LMs: LLaMA,
    Gemma, Qwen, Mistral ...), only those positions go through the LM head -- a boolean
    ``[B, T]`` mask, which ``transformers.modeling_utils.slice_logits_to_keep`` turns into the
    ``[N, hidden]`` rows, so anything the model does after its head (Gemma 2's logit
    soft-capping) still applies; otherwise the whole ``[B, T, V]`` logits are computed and the
    rows picked from them.
    """
    predicts = labels[:, 1:] != IGNORE_INDEX
    targets = labels[:, 1:][predicts]
    takes = _keeps_logits(model)
    if takes is None:
        return model(**inputs).logits[:, :-1][predicts], targets
    keep = F.pad(predicts, (0, 1), value=False)  # the last position predicts nothing
    if takes == "last":  # an older transformers: only the last positions, from the first that predicts
        columns = keep.any(0).nonzero()
        tail = keep.shape[1] - (int(columns[0]) if len(columns) else keep.shape[1] - 1)
        logits = model(**inputs, logits_to_keep=tail).logits
        return logits[keep[:, -tail:]], targets
    logits = model(**inputs, logits_to_keep=keep).logits
    if logits.shape[:-1] != targets.shape:
        raise RuntimeError(f"{type(model).__name__} took logits_to_keep but returned logits of shape "
                           f"{tuple(logits.shape)} for {targets.numel()} kept positions: its forward does not "
                           "slice with a boolean mask (transformers' slice_logits_to_keep)")
    return logits, targets


def token_loss(logits: torch.Tensor, targets: torch.Tensor, rows: Optional[int] = None) -> torch.Tensor:
    """Mean cross-entropy of ``[N, V]`` logits against ``[N]`` targets, in float32 (what
    ``transformers``' causal-LM loss computes over the non-ignored tokens); with ``rows``, their
    sum divided by ``rows`` (each row's summed cross-entropy, averaged over the rows)."""
    if rows is None:
        return F.cross_entropy(logits.float(), targets)
    return F.cross_entropy(logits.float(), targets, reduction="sum") / rows


def _keeps_logits(model: nn.Module) -> Optional[str]:
    """How ``model``'s forward (a peft model's base model's) takes ``logits_to_keep``: ``"mask"``
    (a boolean ``[B, T]`` mask too: its module slices with ``transformers``'
    ``slice_logits_to_keep``, transformers >= 5.2x), ``"last"`` (an int only: the last positions;
    older transformers, e.g. 5.17), or None (not at all)."""
    base = model.get_base_model() if callable(getattr(model, "get_base_model", None)) else model
    return _forward_takes_logits_to_keep(type(base))


@functools.lru_cache(maxsize=None)
def _forward_takes_logits_to_keep(cls: type) -> Optional[str]:
    """Read once per class (not at every training step)."""
    try:
        if "logits_to_keep" not in inspect.signature(cls.forward).parameters:
            return None
    except (TypeError, ValueError):  # a forward without a readable signature
        return None
    module = sys.modules.get(cls.__module__)
    return "mask" if hasattr(module, "slice_logits_to_keep") else "last"


def _pack(embeds: torch.Tensor, mask: torch.Tensor, *others: torch.Tensor, padding_first: bool):
    """Each row's positions reordered so its padding (``mask`` 0) comes first (``padding_first``)
    or last, the order of its other positions kept; ``others`` (``[B, T]``, e.g. labels) follow."""
    key = mask.ne(0) if padding_first else mask.eq(0)
    order = torch.sort(key.to(torch.uint8), dim=1, stable=True).indices
    moved = [embeds.gather(1, order.unsqueeze(-1).expand_as(embeds)), mask.gather(1, order)]
    return (*moved, *(other.gather(1, order) for other in others))


def _first_id(*candidates) -> Optional[int]:
    for candidate in candidates:
        if isinstance(candidate, (list, tuple)):
            candidate = candidate[0] if candidate else None
        if candidate is not None:
            return int(candidate)
    return None


def _strings(texts) -> List[str]:
    texts = [texts] if isinstance(texts, str) else list(texts)
    if not all(isinstance(text, str) for text in texts):
        raise TypeError(f"expected strings, got {sorted({type(t).__name__ for t in texts})}")
    return texts


__all__ = ["Decoding", "GENERATION_BUCKET", "IGNORE_INDEX", "LOSS_REDUCTIONS", "check_compile_generation", "KEEP_SIDES",
           "LanguageModel", "PromptCut", "answer_budgets", "prompt_cuts", "MAX_SOURCE_LENGTH", "MAX_TARGET_LENGTH",
           "SAMPLING_TOP_K", "causal_answer_logits", "own_generation_config", "token_loss"]
