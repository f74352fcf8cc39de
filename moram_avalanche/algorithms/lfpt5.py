"""LFPT5's pieces that need no model: pseudo-sample text, its parsing and selection, the losses.

LFPT5 (Qin & Joty, ICLR 2022, "LFPT5: A Unified Framework for Lifelong Few-shot Language Learning
Based on Prompt Tuning of T5") tunes one soft prompt of a frozen T5 through the whole stream and,
with the same prompt, teaches the model to *write* examples of each task: the input is the task's
generation token, the target the example itself, ``"<prompt> __ans__ <answer>"``. Before a new
task, the model samples pseudo-examples of every earlier task from that token; the parsed ones are
trained on beside the new task's data, and their outputs are distilled from the model as it was
before the task. Facts from the official code (qcwthu/Lifelong-Fewshot-Language-Learning,
``Classification/``: ``Classification.py``, ``model.py``, ``dataset.py``, ``Classification.sh``):

* the answer separator is the added token ``__ans__`` and an example's language-modelling target
  is ``text + " " + "__ans__" + " " + label`` (``dataset.py``);
* a sampled text is kept when it splits on ``__ans__`` into exactly two parts, the second,
  stripped, one of the task's labels; the first, stripped, is the prompt (``Classification.py``);
  per label at most ``2 * memnumforeveryclass`` = 4 are drawn at random, the first 2 train
  (:data:`PSEUDO_PER_LABEL`), the others are its validation set (not used here: no model
  selection in these loops);
* the loss: ``(L_task + lm_lambda * L_lm) * (1 - kd_lambda) + kd_lambda * L_kd`` with
  ``lm_lambda`` 0.25 and ``kd_lambda`` 0.01 (``Classification.sh``: ``--lm_lambda 0.25
  --kd_lamda 0.01``; :func:`combined_loss`); ``L_kd`` is ``kl_div(log p_now, p_before,
  reduction="sum")`` between the decoder's token distributions with the current prompt and with
  the prompt the task started from, on the pseudo-samples only (``model.py``: the rows whose
  ``ifmem`` is 0, which ``dataset.py`` sets for the earlier tasks' rows; :func:`kd_loss`).

The T5 tables follow the official code. TRACE's LFPT5 (BeyonderXX/TRACE ``model/Replay/LFPT5.py``
at 66a48b9, its last commit; the MoRAM release ships the same file) is another method: a 300-token
prompt before the input (``training/main.py:249-260``), and before each task every earlier task's
*test* prompts answered by the current model (``generate_pseudo_data``, LFPT5.py:93-118: sampled
at temperature 0.1) join its training data; no generation token, no LM loss, no distillation.
The "LM weight 0.1, 100 x 5 draws at temperature 0.7" once cited here are from its commit
0ba4b64, which 66a48b9 replaced.
"""

from __future__ import annotations

import random
from typing import Dict, List, Optional, Sequence, Tuple

import torch
import torch.nn.functional as F

#: the separator of a pseudo-example's prompt and answer (official ``answertoken``)
ANSWER_TOKEN = "__ans__"
#: the LM loss weight (official ``Classification.sh --lm_lambda 0.25``)
LM_LAMBDA = 0.25
#: the distillation weight (official ``Classification.sh --kd_lamda 0.01``)
KD_LAMBDA = 0.01
#: pseudo-samples trained on per label of each earlier task (official ``memnumforeveryclass = 2``)
PSEUDO_PER_LABEL = 2


def generation_token(task_name: str) -> str:
    """The token that asks for an example of ``task_name``: ``"__<name>__"`` with spaces as ``_``
    (the form of TRACE's superseded commit 0ba4b64; the official code's ``"classify<name>"`` tokens
    are likewise one added token per task)."""
    if not isinstance(task_name, str) or not task_name.strip():
        raise ValueError(f"a task name must be a non-empty string to name its generation token, got {task_name!r}")
    return "__" + "_".join(task_name.split()) + "__"


def lm_target(prompt: str, answer: str) -> str:
    """What the model learns to write after a task's generation token (official ``dataset.py``)."""
    return f"{prompt} {ANSWER_TOKEN} {answer}"


def parse_pseudo(text: str, labels: Sequence[str] = ()) -> Optional[Tuple[str, str]]:
    """``(prompt, answer)`` of a sampled ``text``, or None when it is unusable: not exactly one
    :data:`ANSWER_TOKEN`, an empty prompt, or (``labels`` given) an answer that is not a label."""
    parts = text.split(ANSWER_TOKEN)
    if len(parts) != 2:
        return None
    prompt, answer = parts[0].strip(" "), parts[1].strip(" ")
    if not prompt.strip() or not answer.strip():
        return None
    if labels and answer not in labels:
        return None
    return prompt, answer


def select_pseudo(pairs: Sequence[Tuple[str, str]], per_label: int, rng: random.Random) -> List[Tuple[str, str]]:
    """The pseudo-samples trained on: per answer (label), ``2 * per_label`` drawn at random when
    there are more (``rng``), of which the first ``per_label`` (official ``Classification.py``;
    with fewer than ``2 * per_label - 1`` drawn, only the first); answers in first-seen order."""
    by_label: Dict[str, List[str]] = {}
    for prompt, answer in pairs:
        by_label.setdefault(answer, []).append(prompt)
    chosen = []
    for answer, prompts in by_label.items():
        drawn = rng.sample(prompts, 2 * per_label) if len(prompts) > 2 * per_label else prompts
        keep = drawn[:per_label] if len(drawn) >= 2 * per_label - 1 else drawn[:1]
        chosen += [(prompt, answer) for prompt in keep]
    return chosen


def kd_loss(now: torch.Tensor, before: torch.Tensor) -> torch.Tensor:
    """``sum KL(p_before || p_now)`` over the rows of ``[N, V]`` logits (the token positions
    scored), in float32: official ``model.py``'s ``kl_div(softmax(now).log(), softmax(before),
    reduction="sum")`` (its ``+ float_info.min`` guards underflow only; log-softmax here)."""
    if now.shape != before.shape:
        raise ValueError(f"distillation compares logits of the same shape, got {tuple(now.shape)} and "
                         f"{tuple(before.shape)}")
    return F.kl_div(F.log_softmax(now.float(), -1), F.log_softmax(before.float(), -1), reduction="sum",
                    log_target=True)


def combined_loss(task: torch.Tensor, lm: torch.Tensor, kd: torch.Tensor, lm_lambda: float = LM_LAMBDA,
                  kd_lambda: float = KD_LAMBDA) -> torch.Tensor:
    """``(task + lm_lambda * lm) * (1 - kd_lambda) + kd_lambda * kd`` (official ``Classification.py``)."""
    return (task + lm_lambda * lm) * (1.0 - kd_lambda) + kd_lambda * kd


__all__ = ["ANSWER_TOKEN", "KD_LAMBDA", "LM_LAMBDA", "PSEUDO_PER_LABEL", "combined_loss", "generation_token",
           "kd_loss", "lm_target", "parse_pseudo", "select_pseudo"]
