"""OGDPlugin: Orthogonal Gradient Descent (Farajtabar et al., 2020) on the language-model loop.

OGD keeps an orthonormal basis ``u_1 .. u_k`` of gradient directions of the tasks already
learned and trains each new task with the part of its gradient orthogonal to all of them:
``g <- g - sum_i <g, u_i> u_i`` (paper Eq. 5), after every backward pass and before the
optimizer steps (``after_backward``). What TRACE's OGD baseline does (BeyonderXX/TRACE
``model/Regular/OGD.py``; the facts taken from it):

* the stored directions are gradients of the training loss (the token cross-entropy), not of
  the model's outputs (the paper's OGD-ALL / OGD-GTL); this plugin does the same
  (:func:`~moram_avalanche.strategies.text.plugins.avalanche.text_batch_loss`);
* over every parameter of the model (``model.parameters()``; TRACE's OGD row fine-tunes every
  weight, ``scripts/train_seq_cl.sh``); here over the parameters that require grad, which for
  that row are all of them (and for an adapter model, its adapters);
* orthonormalised by Gram-Schmidt (``orthonormalize``), each new vector minus its projection
  on those before it, then normalised; here each new vector is orthogonalised twice against
  the basis ("twice is enough": float32 loses orthogonality after one pass on long bases), and
  one whose remainder is below ``1e-6`` of its norm (already in the span) is not added;
* the projection is ``g - B B^T g`` (``project_vec``).

Where this plugin differs, and why: TRACE appends the gradient of *every* training minibatch
at the end of every epoch (so later epochs of a task are projected against the task's own
earlier gradients, too); for a 7B model each vector is 25 GiB in float32, which no device
holds thousands of. Here, as in the paper's Algorithm 1, the directions are stored once per
task, after it trains, at its final weights: the gradients of ``gradients_per_task``
minibatches of the task's training data (all of them when it holds fewer), ``train_mb_size``
examples each, drawn in a shuffled order seeded by the task's index, the model in eval mode
so dropout does not change them. ``gradients_per_task`` has no source for language models (TRACE stores them all);
its default of 1 is this library's choice, the smallest basis.

The basis lives on the training device in float32, ``(vectors, parameters)``, allocated once
before the first task trains for what it will hold before the stream's last task (``(tasks -
1) x gradients_per_task`` vectors: the last task stores none, as no task after it projects),
and filled in place; a basis that will not fit beside what a training step allocates for the
trainable weights (their gradients, AdamW's float32 moments, the step's float32 gradients:
:func:`~moram_avalanche.utils.memory.step_state_bytes`) is refused then, with the figures. It is plain
tensors on the plugin: whole-strategy checkpoints (the strategy's ``lean_checkpoints = False``)
carry it, so a resumed run projects against the basis the uninterrupted run had.
"""

from __future__ import annotations

from typing import List, Optional

import torch
from avalanche.core import SupervisedPlugin
from torch.utils.data import DataLoader

from ....utils.checks import check_positive_int
from ....utils.memory import step_state_bytes

#: stored gradients per task when none is given: this library's choice (module docstring)
OGD_GRADIENTS_PER_TASK = 1
#: a new vector whose remainder after projection is below this share of its norm is in the span
SPAN_TOLERANCE = 1e-6


def trainable(model) -> List[tuple]:
    """``(name, parameter)`` of every parameter that requires grad, in ``named_parameters`` order."""
    return [(name, p) for name, p in model.named_parameters() if p.requires_grad]


def flat_grad(params, device) -> torch.Tensor:
    """The gradients of ``params`` (zeros where none) as one float32 vector on ``device``."""
    return torch.cat([(p.grad.detach().reshape(-1) if p.grad is not None
                       else torch.zeros(p.numel(), device=device)).to(device=device, dtype=torch.float32)
                      for p in params])


def project_out(g: torch.Tensor, basis: Optional[torch.Tensor]) -> torch.Tensor:
    """``g - sum_i <g, u_i> u_i`` for the orthonormal rows ``u_i`` of ``basis`` (``g`` if none)."""
    if basis is None or basis.shape[0] == 0:
        return g
    return g - basis.t().mv(basis.mv(g))


def add_direction(store: torch.Tensor, count: int, vector: torch.Tensor) -> int:
    """Gram-Schmidt in place: ``vector`` orthogonalised twice against the orthonormal rows
    ``store[:count]``, normalised and written to ``store[count]``; the new count (unchanged when
    the vector is zero or already in their span)."""
    norm = float(vector.norm())
    if norm == 0.0:
        return count
    rows = store[:count]
    rest = project_out(project_out(vector, rows), rows)
    left = float(rest.norm())
    if left <= SPAN_TOLERANCE * norm:
        return count
    if count == store.shape[0]:
        raise ValueError(f"OGD's basis holds {count} directions, all it was sized for: the stream has more "
                         "tasks than it had when its first task started")
    store[count] = rest / left
    return count + 1


def extend_basis(basis: Optional[torch.Tensor], vectors: List[torch.Tensor]) -> torch.Tensor:
    """``basis`` (orthonormal rows) with ``vectors`` added by Gram-Schmidt (:func:`add_direction`),
    as a new tensor; a vector already in their span is left out."""
    if basis is None and not vectors:
        raise ValueError("extend_basis: no basis and no vectors to start one from")
    old = 0 if basis is None else basis.shape[0]
    width = (basis if basis is not None else vectors[0]).shape[-1]
    store = torch.empty(old + len(vectors), width, dtype=torch.float32,
                        device=(basis if basis is not None else vectors[0]).device)
    if old:
        store[:old] = basis
    count = old
    for vector in vectors:
        count = add_direction(store, count, vector)
    return store[:count].clone()


def basis_bytes(num_params: int, vectors: int) -> int:
    """Bytes of a float32 basis of ``vectors`` directions over ``num_params`` parameters, plus the
    flattened gradient being projected, its projection and their difference (three more vectors)."""
    return (vectors + 3) * num_params * 4


def check_basis_fits(num_params: int, past_tasks: int, per_task: int, device, available=None, *,
                     beside: int = 0) -> None:
    """Refuse, with the figures, a basis that will not fit on ``device`` before the last task,
    beside ``beside`` bytes the training step will allocate (its gradients and AdamW state,
    :func:`~moram_avalanche.utils.memory.step_state_bytes`)."""
    from ....utils.memory import check_fits, format_bytes

    if past_tasks < 1 or num_params < 1:
        return
    vectors = past_tasks * per_task
    what = (f"OGD's basis ({past_tasks} past tasks x {per_task} gradients x {num_params:,} parameters x 4 bytes "
            f"(float32), {format_bytes(num_params * 4)} each, plus the gradient being projected)"
            + (f" beside a training step's gradients and AdamW state ({format_bytes(beside)})" if beside else ""))
    check_fits(basis_bytes(num_params, vectors) + beside, device, what,
               fix="lower --set gradients_per_task, train adapters instead of every weight (a smaller vector), "
                   "use a smaller model or fewer tasks", available=available)


class OGDPlugin(SupervisedPlugin):
    """Projects every gradient orthogonally to the stored directions of earlier tasks (module docstring).

    Args:
        gradients_per_task: minibatch loss gradients stored after each task (default 1; fewer
            when the task's training data holds fewer minibatches).
    """

    def __init__(self, gradients_per_task: int = OGD_GRADIENTS_PER_TASK) -> None:
        super().__init__()
        self.gradients_per_task = check_positive_int("gradients_per_task", gradients_per_task)
        #: room for every direction the stream will store, allocated once before the first task
        #: (float32, on the training device; rows past :attr:`count` unused); None before
        self.store: Optional[torch.Tensor] = None
        #: how many rows of :attr:`store` hold directions
        self.count = 0
        #: names of the parameters the basis spans, in order (a change between tasks is refused)
        self.names: Optional[List[str]] = None
        #: how many directions each finished task added (its index's entry)
        self.added: List[int] = []

    @property
    def basis(self) -> Optional[torch.Tensor]:
        """The orthonormal directions so far, one per row (a view of :attr:`store`); None when none."""
        return None if self.store is None or self.count == 0 else self.store[:self.count]

    @basis.setter
    def basis(self, rows: Optional[torch.Tensor]) -> None:
        self.store = None if rows is None else rows.detach().to(torch.float32).clone()
        self.count = 0 if rows is None else rows.shape[0]

    def _params(self, model) -> list:
        named = trainable(model)
        names = [name for name, _ in named]
        if self.names is not None and names != self.names:
            raise ValueError(f"OGD's basis spans {len(self.names)} trainable parameters, the model now trains "
                             f"{len(names)} others: OGD needs the same trainable parameters on every task "
                             "(an adapter strategy that adds parameters per task does not compose with it)")
        return [p for _, p in named]

    def before_training_exp(self, strategy, **kwargs):
        """Before the first task: refuse a basis that will not fit before the stream's last task,
        else allocate it (the last task stores nothing: no task after it projects)."""
        if self.store is None:
            past = len(_stream_of(strategy)) - 1
            params = [p for _, p in trainable(strategy.model)]
            count = sum(p.numel() for p in params)
            step = step_state_bytes(count, params[0].element_size() if params else 4,
                                    master_weights=getattr(strategy, "master_weights", True))
            check_basis_fits(count, past, self.gradients_per_task, strategy.device, beside=step)
            if past > 0:
                self.store = torch.empty(past * self.gradients_per_task, count, dtype=torch.float32,
                                         device=strategy.device)
        elif self.store.device != torch.device(strategy.device):
            self.store = self.store.to(strategy.device)

    def after_backward(self, strategy, **kwargs):
        """The gradient minus its projection on the basis, written back before the optimizer steps."""
        if self.basis is None:
            return
        params = self._params(strategy.model)
        g = project_out(flat_grad(params, self.basis.device), self.basis)
        offset = 0
        for p in params:
            n = p.numel()
            if p.grad is not None:
                p.grad.copy_(g[offset:offset + n].view_as(p.grad).to(p.grad.dtype))
            offset += n

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
        if strategy.experience.current_experience >= len(_stream_of(strategy)) - 1:
            return
        before = self.count
        names = [name for name, _ in trainable(strategy.model)]
        for vector in self.task_gradients(strategy):
            self.count = add_direction(self.store, self.count, vector)
        if self.count == 0:
            raise ValueError("OGD stored no gradient direction: every gradient of the task was zero "
                             "(nothing trainable, or a zero loss); check the model's trainable parameters")
        self.names = names
        self.added.append(self.count - before)


def _stream_of(strategy):
    """The tasks of the stream the current experience belongs to."""
    experience = strategy.experience
    return getattr(experience, "tasks", None) or getattr(experience, "origin_stream", ())


__all__ = ["OGDPlugin", "OGD_GRADIENTS_PER_TASK", "add_direction", "basis_bytes", "check_basis_fits", "extend_basis",
           "flat_grad", "project_out"]
