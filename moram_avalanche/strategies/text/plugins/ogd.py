"""OGDPlugin: Orthogonal Gradient Descent (Farajtabar et al., 2020) on the language-model loop, as
TRACE's OGD row runs it.

TRACE's code (BeyonderXX/TRACE ``model/Regular/OGD.py``; the MoRAM release ships the same file as
``TRACE/model/Regular/OGD.py``), the facts taken from it, and what this plugin does:

* **what trains**: a LoRA (``training/main.py:275-284``: ``LoraConfig(r=8, lora_alpha=32,
  lora_dropout=0.1)``, every parameter named ``lora`` trainable), built by the strategy
  (:class:`~moram_avalanche.strategies.text.ogd.TextOGD`); the basis spans those parameters
  (``grad_dims``, OGD.py:42-44), here every parameter that requires grad, which for that model
  are the LoRA's;
* **the stored directions** are gradients of the training loss (the token cross-entropy), not of
  the model's outputs (the paper's OGD-ALL / OGD-GTL);
* **the projection** (``projection="per-parameter"``, the default): a hook on each LoRA parameter
  (OGD.py:169-171) replaces its gradient ``g_p``, as each backward pass produces it, by
  ``g_p - B_p^T B_p g_p`` with ``B_p`` that parameter's own columns of the basis (``project_vec``,
  OGD.py:53-71; :func:`~moram_avalanche.algorithms.ogd.project_each`); with gradient accumulation
  each minibatch's share is projected, as there. ``projection="whole"`` projects the whole
  gradient at once, after the backward pass: the paper's Eq. 5 (0.6's behaviour);
* **what each task adds** (``directions="last-steps"``, ``gradients_per_task=1``, the defaults):
  TRACE copies every step's (projected) gradient into one buffer (``cur_grads``, OGD.py:128-135)
  and appends that buffer -- the same tensor, not a copy -- to its list at each step of the
  task's last epoch (OGD.py:141-142). When the task ends, the list holds as many references to
  the last step's gradient, and Gram-Schmidt keeps one direction of them: the code, as it runs,
  adds the gradient of the task's last training step. This plugin follows the code: it keeps the
  gradients of the task's last ``gradients_per_task`` backward passes (each as it was applied,
  after the projection; with accumulation, the gradient summed so far in its step) and adds
  them, oldest first. What the code meant -- every step's gradient of the last epoch -- is not
  offered: a TRACE task of 5,000 examples at the paper's batch 4 would add 1,250 directions,
  39 GiB of float32 for LLaMA-2-7B's q, k, v, o LoRA, per task. ``directions="after-task"``
  stores instead, as OGD's Algorithm 1 does (and 0.6 did), the gradients of ``gradients_per_task``
  minibatches of the task's training data at its final weights: ``train_mb_size`` examples
  each, drawn in a shuffled order seeded by the task's index, the model in eval mode so dropout
  does not change them, unprojected;
* **the basis** is orthonormalised by Gram-Schmidt (``orthonormalize``;
  :func:`~moram_avalanche.algorithms.ogd.add_direction`): in float32 (TRACE: bfloat16), each new
  vector orthogonalised twice, one already in the span left out (TRACE divides its rounding
  residue by its own norm: :mod:`moram_avalanche.algorithms.ogd`).

Where else this differs: a hook knows its parameter by closure (TRACE's counts down from the last
parameter, OGD.py:55-58, assuming the backward pass reaches them in reverse order); the
projection is computed in float32 and cast back to the gradient's dtype.

The basis lives on the training device in float32, ``(vectors, parameters)``, allocated once
before the first task trains for what it will hold before the stream's last task (``(tasks - 1)
x gradients_per_task`` vectors: the last task stores none, as no task after it projects), and
filled in place; a basis that will not fit beside what a training step allocates for the
trainable weights (their gradients, AdamW's float32 moments, the step's float32 gradients:
:func:`~moram_avalanche.utils.memory.step_state_bytes`) is refused then, with the figures. It is
the plugin's checkpoint state (:meth:`OGDPlugin.state_dict`), so a resumed run projects against
the basis the uninterrupted run had.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import List, Optional

import torch
from avalanche.core import SupervisedPlugin
from torch.utils.data import DataLoader

from ....algorithms.ogd import add_direction, basis_bytes, extend_basis, project_out
from ....utils.checks import check_choice, check_positive_int
from ....utils.memory import step_state_bytes

logger = logging.getLogger(__name__)

#: directions each task adds: TRACE's code as it runs (one buffer appended at every step:
#: OGD.py:141-142, so one direction per task; module docstring)
OGD_GRADIENTS_PER_TASK = 1
#: where a task's directions come from: its last training steps (TRACE's code) or fresh gradients
#: at its final weights (OGD's Algorithm 1; 0.6)
DIRECTIONS = ("last-steps", "after-task")
#: how a gradient is projected: each LoRA parameter on its own columns of the basis (TRACE's
#: ``project_vec``) or the whole gradient at once (OGD's Eq. 5; 0.6)
PROJECTIONS = ("per-parameter", "whole")


@dataclass(frozen=True)
class OGDConfig:
    """OGD's options (defaults TRACE's code, module docstring).

    Attributes:
        gradients_per_task: the gradients each task adds to the basis (1).
        directions: one of :data:`DIRECTIONS` ("last-steps").
        projection: one of :data:`PROJECTIONS` ("per-parameter").

    Checked once, when it is made: a ValueError naming the option, what was given and TRACE's value.
    """

    gradients_per_task: int = OGD_GRADIENTS_PER_TASK
    directions: str = DIRECTIONS[0]
    projection: str = PROJECTIONS[0]

    def __post_init__(self) -> None:
        check_positive_int("gradients_per_task", self.gradients_per_task)
        check_choice("directions", self.directions, DIRECTIONS,
                     hint=f"TRACE's model/Regular/OGD.py: {DIRECTIONS[0]!r}")
        check_choice("projection", self.projection, PROJECTIONS,
                     hint=f"TRACE's model/Regular/OGD.py project_vec: {PROJECTIONS[0]!r}")


#: TRACE's OGD (module docstring): the defaults of :class:`OGDConfig`
TRACE_OGD_SETTING = OGDConfig()


def trainable(model) -> List[tuple]:
    """``(name, parameter)`` of every parameter that requires grad, in ``named_parameters`` order."""
    return [(name, p) for name, p in model.named_parameters() if p.requires_grad]


def flat_grad(params, device) -> torch.Tensor:
    """The gradients of ``params`` (zeros where none) as one float32 vector on ``device``."""
    return torch.cat([(p.grad.detach().reshape(-1) if p.grad is not None
                       else torch.zeros(p.numel(), device=device)).to(device=device, dtype=torch.float32)
                      for p in params])


def check_basis_fits(num_params: int, past_tasks: int, per_task: int, device, available=None, held: int = 0, *,
                     beside: int = 0) -> None:
    """Refuse, with the figures, a basis that will not fit on ``device`` before the last task
    (``held``: vectors kept beside it while a task trains, the ``last-steps`` gradients), beside
    ``beside`` bytes the training step will allocate (its gradients and AdamW state,
    :func:`~moram_avalanche.utils.memory.step_state_bytes`)."""
    from ....utils.memory import check_fits, format_bytes

    if past_tasks < 1 or num_params < 1:
        return
    vectors = past_tasks * per_task + held
    kept = f" and the task's last {held} gradients" if held else ""
    what = (f"OGD's basis ({past_tasks} past tasks x {per_task} gradients x {num_params:,} parameters x 4 bytes "
            f"(float32), {format_bytes(num_params * 4)} each, plus the gradient being projected{kept})"
            + (f" beside a training step's gradients and AdamW state ({format_bytes(beside)})" if beside else ""))
    check_fits(basis_bytes(num_params, vectors) + beside, device, what,
               fix="lower --set gradients_per_task, train a smaller LoRA (--set rank, --set target_modules), use "
                   "a smaller model or fewer tasks", available=available)


class OGDPlugin(SupervisedPlugin):
    """Projects the gradients against the stored directions of earlier tasks and stores each
    finished task's (module docstring).

    Args (:class:`OGDConfig`, defaults TRACE's):
        gradients_per_task: gradients each task adds (fewer when its training gives fewer).
        directions: ``"last-steps"`` (the task's last training gradients: TRACE) or
            ``"after-task"`` (minibatch gradients at its final weights: OGD's Algorithm 1).
        projection: ``"per-parameter"`` (TRACE's ``project_vec``) or ``"whole"`` (OGD's Eq. 5).
    """

    def __init__(self, gradients_per_task: int = OGD_GRADIENTS_PER_TASK, directions: str = DIRECTIONS[0],
                 projection: str = PROJECTIONS[0]) -> None:
        super().__init__()
        #: the options, checked once
        self.config = OGDConfig(gradients_per_task, directions, projection)
        self.gradients_per_task = self.config.gradients_per_task
        #: room for every direction the stream will store, allocated once before the first task
        #: (float32, on the training device; rows past :attr:`count` unused); None before
        self.store: Optional[torch.Tensor] = None
        #: how many rows of :attr:`store` hold directions
        self.count = 0
        #: names of the parameters the basis spans, in order (a change between tasks is refused)
        self.names: Optional[List[str]] = None
        #: how many directions each finished task added (its index's entry)
        self.added: List[int] = []
        #: the current task's last gradients (``"last-steps"``), a ring of ``gradients_per_task`` rows
        self.recent: Optional[torch.Tensor] = None
        #: backward passes written into :attr:`recent` in the current task
        self.recent_seen = 0
        #: whether the parameter hooks project (while a task trains; not while it stores directions)
        self.projecting = False
        self._hooks: list = []

    # ------------------------------------------------------------------ the basis
    @property
    def basis(self) -> Optional[torch.Tensor]:
        """The orthonormal directions so far, one per row (a view of :attr:`store`); None when none."""
        return None if self.store is None or self.count == 0 else self.store[:self.count]

    @basis.setter
    def basis(self, rows: Optional[torch.Tensor]) -> None:
        self.store = None if rows is None else rows.detach().to(torch.float32).clone()
        self.count = 0 if rows is None else rows.shape[0]

    def state_dict(self) -> dict:
        """What a run checkpoint keeps: the basis (with its unused rows), its count, the parameter
        names and the directions each task added."""
        return {"store": None if self.store is None else self.store.detach().cpu().clone(), "count": self.count,
                "names": None if self.names is None else list(self.names), "added": list(self.added)}

    def load_state_dict(self, state: dict) -> None:
        self.store = state["store"]  # moved to the training device when the next task starts
        self.count, self.added = int(state["count"]), [int(n) for n in state["added"]]
        self.names = None if state["names"] is None else [str(n) for n in state["names"]]

    def _params(self, model) -> list:
        named = trainable(model)
        names = [name for name, _ in named]
        if self.names is not None and names != self.names:
            raise ValueError(f"OGD's basis spans {len(self.names)} trainable parameters, the model now trains "
                             f"{len(names)} others: OGD needs the same trainable parameters on every task "
                             "(an adapter strategy that adds parameters per task does not compose with it)")
        return [p for _, p in named]

    # ------------------------------------------------------------------ a task starts
    def before_training_exp(self, strategy, **kwargs):
        """Before the first task: refuse a basis that will not fit before the stream's last task,
        else allocate it (the last task stores nothing: no task after it projects). Before every
        task: the hooks of the per-parameter projection, and the ring of the last gradients."""
        params = self._params(strategy.model)
        size = sum(p.numel() for p in params)
        past = len(_stream_of(strategy)) - 1
        last_steps = self.config.directions == DIRECTIONS[0]
        if self.store is None:
            step = step_state_bytes(size, params[0].element_size() if params else 4,
                                    master_weights=getattr(strategy, "master_weights", True))
            check_basis_fits(size, past, self.gradients_per_task, strategy.device,
                             held=self.gradients_per_task if last_steps else 0, beside=step)
            if past > 0:
                self.store = torch.zeros(past * self.gradients_per_task, size, dtype=torch.float32,
                                         device=strategy.device)
        elif self.store.device != torch.device(strategy.device):
            self.store = self.store.to(strategy.device)
        if self.config.projection == PROJECTIONS[0] and not self._hooks:
            self._hook(params)
        stores = self.store is not None and strategy.experience.current_experience < past
        self.recent = (torch.zeros(self.gradients_per_task, size, dtype=torch.float32, device=strategy.device)
                       if last_steps and stores else None)
        self.recent_seen = 0
        self.projecting = True

    def _hook(self, params) -> None:
        """A hook on each parameter: its gradient projected on its own columns of the basis."""
        offset = 0
        for p in params:
            self._hooks.append(p.register_hook(functools.partial(self._project_slice, offset, p.numel())))
            offset += p.numel()

    def _project_slice(self, offset: int, size: int, grad: torch.Tensor) -> torch.Tensor:
        if not self.projecting or self.count == 0:
            return grad
        rows = self.store[:self.count, offset:offset + size]
        flat = grad.reshape(-1).to(device=rows.device, dtype=torch.float32)
        return project_out(flat, rows).reshape(grad.shape).to(device=grad.device, dtype=grad.dtype)

    # ------------------------------------------------------------------ each step
    def after_backward(self, strategy, **kwargs):
        """``projection="whole"``: the gradient minus its projection on the basis, written back
        before the optimizer steps. ``directions="last-steps"``: the gradient kept in the ring."""
        params = self._params(strategy.model)
        if self.config.projection == PROJECTIONS[1] and self.basis is not None:
            g = project_out(flat_grad(params, self.basis.device), self.basis)
            offset = 0
            for p in params:
                n = p.numel()
                if p.grad is not None:
                    p.grad.copy_(g[offset:offset + n].view_as(p.grad).to(p.grad.dtype))
                offset += n
        if self.recent is not None:
            self.recent[self.recent_seen % self.recent.shape[0]] = flat_grad(params, self.recent.device)
            self.recent_seen += 1

    # ------------------------------------------------------------------ a task ends
    def last_gradients(self) -> List[torch.Tensor]:
        """The task's last ``gradients_per_task`` gradients (:attr:`recent`), oldest first."""
        if self.recent is None or self.recent_seen == 0:
            return []
        rows, seen = self.recent.shape[0], self.recent_seen
        order = range(seen) if seen <= rows else [(seen + i) % rows for i in range(rows)]
        return [self.recent[i] for i in order]

    def task_gradients(self, strategy):
        """The loss gradients of ``gradients_per_task`` minibatches of the task's training data,
        one at a time (a generator: only the one being added is held besides the basis)."""
        from .avalanche import collate_pairs, text_batch_loss

        model, params = strategy.model, self._params(strategy.model)
        generator = torch.Generator().manual_seed(strategy.clock.train_exp_counter)
        loader = DataLoader(strategy.experience.dataset, batch_size=strategy.train_mb_size, shuffle=True,
                            collate_fn=collate_pairs, generator=generator)
        tasks = getattr(strategy.experience, "tasks", None)
        was_training = model.training
        model.eval()
        try:
            for done, batch in enumerate(loader):
                if done == self.gradients_per_task:
                    break
                model.zero_grad(set_to_none=True)
                loss = text_batch_loss(model, batch, tasks)
                if loss.requires_grad:
                    loss.backward()
                yield flat_grad(params, self.store.device)
        finally:
            model.zero_grad(set_to_none=True)
            model.train(was_training)

    def after_training_exp(self, strategy, **kwargs):
        """Store the finished task's directions (Gram-Schmidt against the basis so far); the
        stream's last task stores none (no task after it would project against them)."""
        self.projecting = False  # from here on, gradients (this plugin's, other plugins') are left as they are
        if strategy.experience.current_experience >= len(_stream_of(strategy)) - 1:
            self.recent = None
            return
        before, offered = self.count, 0
        names = [name for name, _ in trainable(strategy.model)]
        vectors = self.last_gradients() if self.config.directions == DIRECTIONS[0] else self.task_gradients(strategy)
        for vector in vectors:
            offered += 1
            self.count = add_direction(self.store, self.count, vector)
        self.recent = None
        if self.count == 0 and offered:
            raise ValueError("OGD stored no gradient direction: every gradient of the task was zero "
                             "(nothing trainable, or a zero loss); check the model's trainable parameters")
        if not offered:
            logger.info("OGD: task %d trained no step, so it adds no direction", strategy.experience.current_experience)
        self.names = names
        self.added.append(self.count - before)


def _stream_of(strategy):
    """The tasks of the stream the current experience belongs to."""
    experience = strategy.experience
    return getattr(experience, "tasks", None) or getattr(experience, "origin_stream", ())


__all__ = ["DIRECTIONS", "OGDConfig", "OGDPlugin", "OGD_GRADIENTS_PER_TASK", "PROJECTIONS", "TRACE_OGD_SETTING",
           "add_direction", "basis_bytes", "check_basis_fits", "extend_basis", "flat_grad", "project_out",
           "trainable"]
