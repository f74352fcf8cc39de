"""Avalanche's plugins that run forward passes of their own, on text batches.

Four of Avalanche 0.6.0's plugins score the model outside the training step, on tensors:
``EWCPlugin.compute_importances`` (a pass over the experience's data), ``GEMPlugin`` and
``AGEMPlugin.before_training_iteration`` (gradients on memory samples) each run
``avalanche_forward(model, x, t)`` then ``strategy._criterion(out, y)`` after ``x.to(device)``;
``LwFPlugin.before_backward`` distils ``strategy.mb_output`` (class logits) against the
previous model's. On the language-model loop
(:class:`~moram_avalanche.strategies.text.loop.TextStrategy`) a batch is
``[prompts, answers, task labels]`` of strings, and the model's training output is the token
loss, so each gets a text counterpart here that overrides exactly the method touching a batch:

* :class:`TextEWCPlugin` -- the importances are the mean squared gradients of the token
  cross-entropy (``LanguageModel.loss``) over the experience's training data, in minibatches of
  ``train_mb_size`` with the model in eval mode (Avalanche's ``compute_importances``, line for
  line, on text); the penalty (``before_backward``) is Avalanche's;
* :class:`TextGEMPlugin` -- the memory holds ``patterns_per_experience`` prompts and answers
  per experience (the first of a shuffled pass, as Avalanche's ``update_memory``), and the
  reference gradient of each experience is that of their token loss; the projection
  (``after_backward``, quadprog through qpsolvers) is Avalanche's. GEM keeps one gradient of
  every parameter per past task, on the device, and copies them to the host as float64 to
  project: before the first task trains it works out what the stream's last task will need
  (:func:`~moram_avalanche.utils.memory.gem_memory_bytes`; a 7B model in bf16 after 7 tasks:
  ~113 GiB on the GPU, ~577 GiB on the host), adds what a training step allocates for the
  trainable weights (their gradients, AdamW's float32 moments and the step's float32 gradients:
  ~88 GiB more for that model, :func:`~moram_avalanche.utils.memory.step_state_bytes`) and
  refuses, with the figures, what does not fit;
* :class:`TextAGEMPlugin` -- the reference gradient is the token loss's on a memory sample
  drawn group-balanced as Avalanche's loader draws it, from state that pickles (Avalanche's
  running loader iterator is a generator, which broke every whole-strategy checkpoint); memory
  and projection are Avalanche's;
* :class:`TextLwFPlugin` -- LwF (Li & Hoiem, 2017) on the token distribution: the KL
  divergence, at ``temperature``, between the previous model's and the current model's
  teacher-forced next-token distributions over the answer tokens
  (``LanguageModel.answer_logits``), ``batchmean`` over those tokens, times ``alpha``
  (Avalanche's ``LearningWithoutForgetting._distillation_loss``, whose classes are here the
  vocabulary; every token is a "previously active unit" since the vocabulary is shared). The
  previous model is a frozen copy taken after each experience (Avalanche's ``post_adapt``).

Every forward of a counterpart cuts long prompts as the loop does (each task's declaration,
``experience.tasks``; :func:`~moram_avalanche.models.language_model.prompt_cuts`). The
counterparts add no state of their own: :func:`text_plugins` re-classes the instances an
Avalanche strategy built itself (``EWC.__init__`` makes its ``EWCPlugin``) or a user passed,
keeping every argument. The text loop calls it on its plugins, so ``plugins=[EWCPlugin(...)]``
composes with any language-model strategy (``moram``, ``o-lora``) too.
"""

from __future__ import annotations

import copy
from typing import Dict, Iterable, List

import torch
import torch.nn.functional as F
from avalanche.training.plugins import AGEMPlugin, EWCPlugin, GEMPlugin, LwFPlugin
from avalanche.training.utils import zerolike_params_dict
from torch.utils.data import DataLoader

from ...plugins.agem import CheckpointableAGEMPlugin


def batch_cuts(tasks, task_ids):
    """How each prompt of a batch is cut, from the stream's ``tasks`` and the batch's task labels
    (None without tasks: the model's way)."""
    from ....models.language_model import prompt_cuts

    return prompt_cuts(tasks, [int(t) for t in task_ids]) if tasks else None


def text_batch_loss(model, batch, tasks=None) -> torch.Tensor:
    """The token loss of a ``[prompts, answers, task labels]`` batch (tuples or lists of strings)."""
    return model.loss(list(batch[0]), list(batch[1]), batch_cuts(tasks, batch[-1]))


def flat_gradient(model, device) -> torch.Tensor:
    """Every parameter's gradient (zeros where none), flattened in ``parameters()`` order (Avalanche's)."""
    return torch.cat([p.grad.flatten() if p.grad is not None else torch.zeros(p.numel(), device=device)
                      for p in model.parameters()])


def collate_pairs(items):
    """``[prompts, answers, task labels]`` of ``(prompt, answer, task)`` items."""
    from ....benchmarks.text.stream import collate_text

    return collate_text(items)


class TextEWCPlugin(EWCPlugin):
    """EWC whose importances come from the token loss (module docstring)."""

    def after_training_exp(self, strategy, **kwargs):
        self.stream_tasks = getattr(strategy.experience, "tasks", None)  # how its prompts are cut
        super().after_training_exp(strategy, **kwargs)

    def compute_importances(self, model, criterion, optimizer, dataset, device, batch_size, num_workers=0):
        model.eval()
        importances = zerolike_params_dict(model)
        loader = DataLoader(dataset, batch_size=batch_size, collate_fn=collate_pairs, num_workers=num_workers)
        for batch in loader:
            model.zero_grad(set_to_none=True)
            loss = text_batch_loss(model, batch, getattr(self, "stream_tasks", None))
            if loss.requires_grad:  # nothing trainable left (e.g. after MoRAM froze its atoms): zeros
                loss.backward()
            for (name, p), (same, imp) in zip(model.named_parameters(), importances.items()):
                assert name == same
                if p.grad is not None:
                    imp.data += p.grad.data.clone().pow(2)
        for imp in importances.values():
            imp.data /= float(len(loader))
        model.zero_grad(set_to_none=True)
        model.train()
        return importances


def check_gem_fits(model, past_tasks: int, device, available=None, *, master_weights: bool = True) -> None:
    """Refuse, with the figures, a GEM run whose gradient store will not fit beside what a training
    step allocates for the trainable weights (module docstring; ``master_weights``: the loop's)."""
    from ....utils.memory import check_fits, format_bytes, gem_memory_bytes, step_state_bytes

    parameters = list(model.parameters())
    if not parameters or past_tasks < 1:
        return
    count = sum(p.numel() for p in parameters)
    grad_bytes = parameters[0].element_size()
    on_device, on_host = gem_memory_bytes(count, past_tasks, grad_bytes)
    trainable = [p for p in parameters if p.requires_grad]
    step = step_state_bytes(sum(p.numel() for p in trainable), trainable[0].element_size() if trainable else 4,
                            master_weights=master_weights)
    on_device += step
    what = (f"GEM's gradient store ({past_tasks} past tasks x {count:,} parameters x {grad_bytes} bytes, one full "
            f"gradient per past task, {format_bytes(count * grad_bytes)} each) beside a training step's gradients "
            f"and AdamW state ({format_bytes(step)}: utils/memory.py training_state_bytes)")
    fix = ("use A-GEM (avalanche.agem: one reference gradient), EWC, or an adapter strategy, or fewer tasks; "
           "GEM keeps a gradient of every parameter of the model per past task")
    kind = str(device).partition(":")[0]
    if kind == "cpu":  # the store and the projection's copies share the host
        check_fits(on_device + on_host, device, what + " and its float64 copies for quadprog", fix=fix,
                   available=available)
        return
    check_fits(on_device, device, what, fix=fix, available=available)
    check_fits(on_host, "cpu", f"GEM's projection (quadprog on the host: the store copied as float64, "
                               f"{past_tasks} x {format_bytes(count * 8)})", fix=fix)


class TextGEMPlugin(GEMPlugin):
    """GEM whose memory holds prompts and answers and whose reference gradients are the token loss's."""

    def before_training_exp(self, strategy, **kwargs):
        """Before the first task: refuse a stream whose last task's gradient store will not fit."""
        if strategy.clock.train_exp_counter == 0:
            tasks = getattr(strategy.experience, "tasks", None) or getattr(strategy.experience, "origin_stream", ())
            check_gem_fits(strategy.model, len(tasks) - 1, strategy.device,
                           master_weights=getattr(strategy, "master_weights", True))

    def before_training_iteration(self, strategy, **kwargs):
        if strategy.clock.train_exp_counter == 0:
            return
        gradients = []
        strategy.model.train()
        tasks = getattr(strategy.experience, "tasks", None)
        for t in range(strategy.clock.train_exp_counter):
            strategy.model.zero_grad(set_to_none=True)
            strategy.model.loss(self.memory_x[t], self.memory_y[t], batch_cuts(tasks, self.memory_tid[t])).backward()
            gradients.append(flat_gradient(strategy.model, strategy.device))
        strategy.model.zero_grad(set_to_none=True)
        self.G = torch.stack(gradients)  # (experiences, parameters)

    @torch.no_grad()
    def update_memory(self, dataset, t, batch_size):
        loader = DataLoader(dataset, batch_size=batch_size, collate_fn=collate_pairs, shuffle=True)
        prompts: List[str] = []
        answers: List[str] = []
        tasks: List[torch.Tensor] = []
        for batch in loader:
            room = self.patterns_per_experience - len(prompts)
            prompts += batch[0][:room]
            answers += batch[1][:room]
            tasks.append(batch[-1][:room])
            if len(prompts) >= self.patterns_per_experience:
                break
        self.memory_x[t], self.memory_y[t], self.memory_tid[t] = prompts, answers, torch.cat(tasks)


class TextAGEMPlugin(CheckpointableAGEMPlugin):
    """A-GEM whose reference gradient is the token loss's on a memory sample, drawn from state
    that pickles (:class:`~moram_avalanche.strategies.plugins.agem.CheckpointableAGEMPlugin`:
    Avalanche's running loader iterator broke every whole-strategy checkpoint) and collated as
    text; a run resumed from a checkpoint draws the memory samples the uninterrupted run draws.
    """

    def collate(self, items):
        return collate_pairs(items)

    def before_training_iteration(self, strategy, **kwargs):
        if not self.buffers:
            return
        strategy.model.train()
        strategy.model.zero_grad(set_to_none=True)
        text_batch_loss(strategy.model, self.sample_from_memory(), getattr(strategy.experience, "tasks", None)).backward()
        self.reference_gradients = torch.cat([
            p.grad.view(-1) if p.grad is not None else torch.zeros(p.numel(), device=strategy.device)
            for _, p in strategy.model.named_parameters()])
        strategy.model.zero_grad(set_to_none=True)


class TextLwFPlugin(LwFPlugin):
    """LwF on the next-token distributions of the answers (module docstring)."""

    def before_backward(self, strategy, **kwargs):
        lwf = self.lwf
        if lwf.prev_model is None:
            return
        alpha = lwf.alpha[lwf.expcount] if isinstance(lwf.alpha, (list, tuple)) else lwf.alpha
        strategy.loss += alpha * self.distillation(strategy.model, strategy.mb_x, strategy.mb_y,
                                                   getattr(strategy, "mb_prompt_cuts", None))

    def distillation(self, model, prompts, answers, cuts=None) -> torch.Tensor:
        """KL(previous || current) of the answer tokens' distributions at ``temperature``, mean over tokens."""
        temperature = self.lwf.temperature
        with torch.no_grad():
            previous = self.lwf.prev_model.answer_logits(prompts, answers, cuts)
        current = model.answer_logits(prompts, answers, cuts)
        return F.kl_div(torch.log_softmax(current / temperature, dim=-1),
                        torch.softmax(previous / temperature, dim=-1), reduction="batchmean")

    def after_training_exp(self, strategy, **kwargs):
        """A frozen copy of the model after each experience (the teacher of the next ones)."""
        self.lwf.expcount += 1
        self.lwf.prev_model = copy.deepcopy(strategy.model).eval().requires_grad_(False)


#: Avalanche's plugin -> its text counterpart (module docstring)
TEXT_COUNTERPARTS: Dict[type, type] = {EWCPlugin: TextEWCPlugin, GEMPlugin: TextGEMPlugin,
                                       AGEMPlugin: TextAGEMPlugin, LwFPlugin: TextLwFPlugin}


def text_plugins(plugins: Iterable) -> list:
    """``plugins``, each of Avalanche's that runs its own forward re-classed as its text
    counterpart (same instance, same arguments; subclasses of those are left alone: they may
    override what the counterpart overrides)."""
    plugins = list(plugins)
    for plugin in plugins:
        counterpart = TEXT_COUNTERPARTS.get(type(plugin))
        if counterpart is not None:
            plugin.__class__ = counterpart
    return plugins


__all__ = ["TEXT_COUNTERPARTS", "TextAGEMPlugin", "TextEWCPlugin", "TextGEMPlugin", "TextLwFPlugin",
           "batch_cuts", "check_gem_fits", "text_batch_loss", "text_plugins"]
