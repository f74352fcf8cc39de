"""SAPTPlugin: SAPT's task growth and attentive reflection (Zhao et al., ACL 2024, Sec. 3;
facts from circle-hit/SAPT ``src/run_t5.py``, ``src/cl_trainer.py``, ``src/t5_prompt.py``).

* growth (:class:`~...plugins.growth.GrowthPlugin`): before each task every
  :class:`~moram_avalanche.layers.sapt.SAPTLoRALinear` appends the task's LoRA block and the
  :class:`~moram_avalanche.layers.sapt.SAPTRouter` its key, the earlier ones frozen; the
  router's query projection trains on every task (SAPT reloads it, ``trans_input.pt``);
* after each task (:meth:`SAPTPlugin.settle`): the task's reflection target, the mean of the
  attention weights over its prompts (SAPT: ``attention_weights.pkl``, the mean over the
  batches of the batch means on the task's ``dev`` split at the end of its training; here the
  task's training prompts, ``eval_mb_size`` per batch: this library does not read ``dev``);
* attentive reflection (:meth:`SAPTPlugin.before_backward`): from the second task on, every
  minibatch adds, for each earlier task ``i``, ``kl_ratio * KL(target_i || softmax(logits))`` of
  one batch of ``i``'s pseudo-samples (:mod:`moram_avalanche.benchmarks.text.superni_pseudo`; the
  batch as large as a training minibatch, drawn in a seeded order, reshuffled when spent;
  ``target_i`` zero on the tasks after ``i``). It trains the query projection and the current
  key only (the weights depend on nothing else). SAPT adds it after the loss's backward,
  unscaled by gradient accumulation, and only once the first optimizer step is done
  (``global_step > 0``): the same here (the term is multiplied by ``accumulation_steps``, which
  the loop divides every loss by, and left out of the first ``accumulation_steps`` minibatches).
"""

from __future__ import annotations

import random
from typing import Dict, List, Optional

import torch

from ....layers.sapt import SAPTRouter, reflection_loss
from ...plugins.growth import GrowthPlugin

#: SAPT's weight of the reflection term (``gen_script_superni_t5.py``: ``kl_ratio = 0.5``)
SAPT_KL_RATIO = 0.5


class PseudoBatches:
    """One earlier task's pseudo-sample prompts, drawn ``size`` at a time in a seeded order,
    reshuffled when spent (SAPT: a ``RandomSampler`` iterator, restarted when exhausted)."""

    def __init__(self, prompts: List[str], size: int, seed: int) -> None:
        self.prompts, self.size, self.draw = list(prompts), size, random.Random(seed)
        self.order: List[int] = []

    def next(self) -> List[str]:
        if not self.order:
            self.order = list(range(len(self.prompts)))
            self.draw.shuffle(self.order)
        batch, self.order = self.order[: self.size], self.order[self.size:]
        return [self.prompts[i] for i in batch]


def token_embeddings(model, prompts: List[str]) -> torch.Tensor:
    """``[batch, length, d]`` input embeddings of ``prompts``, padded to the longest and cut at the
    model's ``max_source_length`` (their beginning kept, SuperNI's), as the encoder sees them."""
    ids = model.tokenizer(list(prompts), truncation=True, max_length=model.max_source_length, padding=True,
                          return_tensors="pt")["input_ids"].to(model.device)
    return model.model.get_input_embeddings()(ids)


class SAPTPlugin(GrowthPlugin):
    """SAPT's growth, reflection targets and attentive reflection (module docstring).

    Args:
        router: the model's :class:`~moram_avalanche.layers.sapt.SAPTRouter`.
        pseudo_prompts: ``task name -> prompts`` of SAPT's pseudo-samples (read lazily, by name).
        kl_ratio: the reflection term's weight (SAPT: 0.5); 0 leaves reflection out.
        seed: of the pseudo-samples' draw.
    """

    def __init__(self, router: SAPTRouter, pseudo_prompts, kl_ratio: float = SAPT_KL_RATIO, seed: int = 0) -> None:
        super().__init__()
        self.router, self.pseudo_prompts, self.kl_ratio, self.seed = router, pseudo_prompts, float(kl_ratio), seed
        self.batches: Dict[int, PseudoBatches] = {}
        self.minibatches = 0
        #: the last reflection term added, per earlier task index (tests, logs)
        self.last: Dict[int, float] = {}

    # -- growth
    def grow(self, strategy) -> None:
        super().grow(strategy)
        stream, index = strategy.experience.origin_stream, strategy.experience.current_experience
        if self.router.num_tasks != index + 1:
            raise RuntimeError(f"SAPT's router holds {self.router.num_tasks} task keys at task {index + 1}: train the "
                               "stream's tasks in order, from its first")
        self.minibatches, self.batches, self.last = 0, {}, {}
        if self.kl_ratio == 0:
            return
        if index == 0:  # read every earlier task's pseudo-samples now: a missing file fails the run at once
            for earlier in range(len(stream) - 1):
                self.pseudo_prompts(stream[earlier].task_name)
        for earlier in range(index):
            prompts = self.pseudo_prompts(stream[earlier].task_name)
            self.batches[earlier] = PseudoBatches(prompts, strategy.train_mb_size,
                                                  self.seed * 1_000_003 + 1_009 * index + earlier)

    def settle(self, strategy) -> None:
        """Store the task's mean attention weights (its reflection target), then freeze."""
        self.router.settle(self.mean_weights(strategy))
        super().settle(strategy)

    def mean_weights(self, strategy) -> torch.Tensor:
        """The mean over batches of the batch-mean attention weights of the task's training prompts."""
        model = strategy.model
        prompts = [prompt for prompt, *_ in strategy.experience.dataset]
        size = int(getattr(strategy, "eval_mb_size", None) or len(prompts))
        means = []
        was_training = model.training
        model.eval()
        with torch.no_grad():
            for start in range(0, len(prompts), size):
                means.append(self.router.weights(token_embeddings(model, prompts[start:start + size])).mean(dim=0))
        model.train(was_training)
        return torch.stack(means).mean(dim=0)

    # -- reflection
    def reflection(self, model) -> Optional[torch.Tensor]:
        """The sum over earlier tasks of one pseudo-batch's reflection term (None before task 2)."""
        if not self.batches:
            return None
        total = None
        tasks = self.router.num_tasks
        for earlier, batches in self.batches.items():
            logits = self.router.logits(token_embeddings(model, batches.next()))
            term = reflection_loss(logits, self.router.target(earlier, tasks))
            self.last[earlier] = float(term.detach())
            total = term if total is None else total + term
        return total

    def before_backward(self, strategy, **kwargs):
        steps = int(getattr(strategy, "accumulation_steps", 1) or 1)
        self.minibatches += 1
        if self.kl_ratio == 0 or self.minibatches <= steps:  # SAPT: after the first optimizer step
            return
        term = self.reflection(strategy.model)
        if term is not None:
            strategy.loss = strategy.loss + self.kl_ratio * steps * term


__all__ = ["PseudoBatches", "SAPTPlugin", "SAPT_KL_RATIO", "token_embeddings"]
