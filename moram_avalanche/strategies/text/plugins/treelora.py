"""TreeLoRAPlugin: TreeLoRA's tree search and regulariser on a model with one LoRA per target linear.

The steps, as ZinYY/TreeLoRA's ``model/Regular/Tree_LoRA.py`` orders them for every training
minibatch (the math: :mod:`moram_avalanche.algorithms.treelora`):

1. the epoch's step ``t`` (0 first) and ``reg_t = reg * t / T``, ``T`` the epoch's minibatches;
2. after the forward: every LoRA's down-projection ``A_d`` (the model's order) is added to the
   epoch's accumulation, ``L / T * A_d``;
3. from the second task on: the tree search draws one earlier task per depth, the drawn arms'
   counts and distance sums are updated, and the loss becomes ``loss - tree_loss(...)``.

At the end of each task the accumulation (its last epoch's) is stored as the task's matrices and
the tree is rebuilt over every task so far. Each epoch restarts the accumulation, the arms' sums
and counts.

Where this differs from the code, and why:

* the draws use a generator seeded per step from ``(seed, task, epoch, step)`` (``seed``: the
  process's ``torch.initial_seed()`` when the plugin is made, i.e. the run's seed), not the
  device's global RNG: a resumed run draws what the uninterrupted one drew, and the draws do not
  shift the dropout masks;
* the code runs it under DeepSpeed (ZeRO-2, bf16) with 8 accumulation steps on 4 GPUs, and
  counts ``T`` and ``t`` in micro-batches of one prompt per GPU; here they count the loop's
  minibatches (``train_mb_size`` prompts), each one forward and one backward as there;
* the stored matrices, the tree, the sums and counts are float32 tensors on the plugin (the
  code's are on the GPU in the model's dtype); whole-strategy checkpoints carry them.
"""

from __future__ import annotations

from typing import List, Optional

import torch
from avalanche.core import SupervisedPlugin

from ....algorithms.treelora import (
    SEARCH_MODES,
    TREELORA_REG,
    TreeNode,
    build_tree,
    l1_distances,
    lcb_scores,
    task_differences,
    tree_loss,
    tree_search,
)
from ....layers.base import find_layers
from ....layers.lora import LoRALinear
from ....utils.checks import check_number

#: a large prime mixing the seed, task, epoch and step into one generator seed
_MIX = 1_000_003


def check_search(search) -> str:
    if search not in SEARCH_MODES:
        raise ValueError(f"search must be one of {SEARCH_MODES} (TreeLoRA's code draws: 'sample'), got {search!r}")
    return search


def check_reg(reg) -> float:
    return float(check_number("reg", reg, low=0, hint=f"TreeLoRA's TRACE script: --reg {TREELORA_REG}; 0: SeqLoRA"))


class TreeLoRAPlugin(SupervisedPlugin):
    """TreeLoRA's regulariser through the tree search (module docstring).

    Args:
        reg: the regularisation weight (0.5, TreeLoRA's TRACE script); 0 turns TreeLoRA off
            (plain SeqLoRA, as the code's ``if args.reg > 0``).
        search: "sample" (the code's draws) or "greedy" (the most probable task, deterministic).
        seed: the draws' seed; None: ``torch.initial_seed()`` now.
    """

    def __init__(self, reg: float = TREELORA_REG, search: str = "sample", seed: Optional[int] = None) -> None:
        super().__init__()
        self.reg = check_reg(reg)
        self.search = check_search(search)
        self.seed = int(torch.initial_seed() if seed is None else seed)
        #: per depth, the stored matrices of the finished tasks ``[tasks, r * d_in]`` (float32); None before
        self.stored: Optional[List[torch.Tensor]] = None
        #: the tree over the finished tasks (rebuilt after each); None before the first
        self.tree: Optional[TreeNode] = None
        # the epoch's state
        self.current: Optional[List[torch.Tensor]] = None
        self.sums: Optional[torch.Tensor] = None
        self.counts: Optional[torch.Tensor] = None
        self.step = -1
        self.total = 0
        self.epoch = -1
        #: the last step's search and term: ``{"choice", "first", "term"}``
        self.last: dict = {}

    @property
    def tasks_done(self) -> int:
        return 0 if self.stored is None else int(self.stored[0].shape[0])

    @staticmethod
    def downs(model) -> List[torch.Tensor]:
        """Every LoRA's down-projection ``A``, in the model's order (the code's depths)."""
        layers = list(find_layers(model, LoRALinear).values())
        if not layers:
            raise ValueError("TreeLoRA needs LoRA layers (LoRALinear) on the model: use the treelora strategy, which "
                             "puts them on the target linears")
        return [layer.down for layer in layers]

    def before_training_exp(self, strategy, **kwargs):
        self.epoch = -1

    def before_training_epoch(self, strategy, **kwargs):
        """A new epoch: the accumulation, the arms' sums and counts restart (``new_epoch_init``)."""
        self.epoch += 1
        self.current, self.sums, self.counts = None, None, None
        self.step, self.total = -1, 0

    def generator(self) -> torch.Generator:
        key = self.seed
        for part in (self.tasks_done, self.epoch, self.step):
            key = (key * _MIX + part) % (2 ** 63 - 1)
        return torch.Generator().manual_seed(key)

    def before_backward(self, strategy, **kwargs):
        if self.reg <= 0:
            return
        if self.step < 0:
            self.total = len(strategy.dataloader)
        self.step += 1
        coef = self.reg * self.step / self.total
        downs = self.downs(strategy.model)
        depth = len(downs)
        if self.stored is not None and len(self.stored) != depth:
            raise ValueError(f"TreeLoRA stored {len(self.stored)} LoRA modules per task, the model now has {depth}: "
                             "the LoRA layers must stay the same through the stream")
        with torch.no_grad():
            add = [depth * a.detach().reshape(-1).float() / self.total for a in downs]
            self.current = add if self.current is None else [c + x for c, x in zip(self.current, add)]
        if self.tasks_done == 0:
            return
        if self.sums is None:
            self.sums = torch.zeros(self.tasks_done, depth)
            self.counts = torch.zeros(self.tasks_done, depth)
        scores = lcb_scores(self.sums, self.counts, self.total, self.step)
        choice, first, _ = tree_search(scores, self.tree, self.generator(), self.search)
        columns = torch.arange(depth)
        self.counts[choice, columns] += 1
        self.sums[choice, columns] -= l1_distances(self.current, self.stored, choice)
        term = tree_loss(downs, self.stored, choice, strategy.loss, coef)
        strategy.loss = strategy.loss - term
        self.last = {"choice": choice.tolist(), "first": first, "term": float(term.detach())}

    def after_training_exp(self, strategy, **kwargs):
        """The task's matrices (its last epoch's accumulation) join the store; the tree is rebuilt."""
        if self.reg <= 0:
            return
        current = self.current
        if current is None:  # no step ran (iterations 0): the task's matrices are zero
            current = [torch.zeros(a.numel()) for a in self.downs(strategy.model)]
        rows = [c.detach().float().reshape(1, -1) for c in current]
        if self.stored is None:
            self.stored = rows
        else:
            self.stored = [torch.cat([s, r.to(s.device)]) for s, r in zip(self.stored, rows)]
        self.tree = build_tree(task_differences(self.stored))
        self.current = None


__all__ = ["TreeLoRAPlugin", "check_reg", "check_search"]
