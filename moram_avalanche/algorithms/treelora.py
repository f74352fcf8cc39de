"""TreeLoRA's gradient-similarity tree, its bandit search and its regulariser, framework-free.

TreeLoRA (Qian et al., ICML 2025, "TreeLoRA: Efficient Continual Learning via Layer-Wise LoRAs
Guided by a Hierarchical Gradient-Similarity Tree"; code ZinYY/TreeLoRA, built on TRACE). The
facts below are read from its code (``utils/kd_lora_tree.py``, ``model/Regular/Tree_LoRA.py``,
``training/main.py``); the MoRAM release ships the same two files (``TRACE/model/Regular/
Tree_LoRA.py``, ``TRACE/utils/kd_lora_tree.py``).

What the code calls a task's "gradient" is a matrix per LoRA module (a "depth": the ``L``
modules in the model's order, q and v of every layer): the LoRA down-projection ``A`` (peft's
``loranew_A``) read at every training step of the task's last epoch and averaged,
``L / T * sum_s A_s`` over the ``T`` minibatches of an epoch -- the code adds the whole stack once
per depth in a loop (``insert_grad``), hence the factor ``L``, kept here (it scales the L1
distances against the exploration bonus). These are parameters, not gradients; the code's names
are kept below where they help to read it side by side.

* **Tree** (:func:`build_tree`, after each task): over the tasks so far, each task's matrices
  minus the previous task's (the first kept as is); a node at depth ``d`` holding several tasks
  splits them by the dot product of their depth-``d`` rows with those rows' mean: at or above
  the median (``torch.median``, the lower one for an even count) to the left, below to the right,
  halves of the task list when one side would be empty; a node is a leaf at depth ``L`` or with
  one task. So the leaves partition the tasks.
* **Search** (:func:`lcb_scores`, :func:`tree_search`, every step of a later task): per
  ``(earlier task j, depth d)`` an arm whose running sum ``S[j, d]`` holds minus the L1 distance
  between the current accumulation and task j's matrix, added each time the arm is picked, and
  a count ``n[j, d]``. Score ``-(S / n - b(n))`` with ``b(n) = sqrt(log(2 T (t + 1) (t + 2))) /
  sqrt(2 n + 1e-5)`` at the epoch's step ``t`` (``S / n`` where ``n > 0``, ``S`` (0) otherwise),
  then ``+= min`` (the code's "shift"). A first task is drawn from ``softmax`` of the scores
  summed over depths; the tasks on the tree root's side that holds it have their scores
  multiplied by ``min(m, 1.5)``, ``m`` that child's median similarity (1 when the child is a
  leaf); the scores are divided by their range (``+ 1e-5``) and each depth draws its task from
  ``softmax`` over the tasks. The drawn arms' counts grow by one and their sums take the
  current distance. Read from the code: the score is the mean *distance* plus the bonus, so a
  more distant task is the likelier draw (the paper's text speaks of the most similar task);
  this follows the code.
* **Regulariser** (:func:`tree_loss`): ``R = -sum_d <A_d, G_{j_d, d}>`` with the drawn task
  ``j_d`` of each depth and the trainable ``A_d``; the training loss becomes ``loss - R /
  (R.detach() + 1e-5) * loss.detach() * reg_t``, ``reg_t = reg * t / T`` rising from 0 over each
  epoch (``reg`` 0.5, the TRACE script's ``--reg 0.5``). The term's value is ``reg_t * loss``
  (up to the 1e-5); its gradient on ``A_d`` is ``reg_t * loss / (R + 1e-5) * G_{j_d, d}``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import List, Optional, Sequence, Tuple

import torch

#: TreeLoRA's regularisation weight on TRACE (ZinYY/TreeLoRA ``scripts/lora_based_methods/Tree_LoRA.sh``: reg=0.5)
TREELORA_REG = 0.5
#: the code's constants: the count's offset in the bonus, the range's and the ratio's offsets,
#: the cap on the tree's group factor (``utils/kd_lora_tree.py``)
COUNT_EPS = 1e-5
RANGE_EPS = 1e-5
RATIO_EPS = 1e-5
MAX_GROUP_FACTOR = 1.5
#: how a task is chosen from the scores: drawn (the code) or the highest score (deterministic)
SEARCH_MODES = ("sample", "greedy")


@dataclass
class TreeNode:
    """A node of the task tree: its tasks, its depth, and for an inner node the mean of its
    tasks' depth rows, their median similarity and two children."""

    tasks: List[int]
    depth: int
    mean: Optional[torch.Tensor] = None
    median: Optional[float] = None
    left: Optional["TreeNode"] = field(default=None, repr=False)
    right: Optional["TreeNode"] = field(default=None, repr=False)

    @property
    def is_leaf(self) -> bool:
        return self.left is None


def task_differences(rows: Sequence[torch.Tensor]) -> List[torch.Tensor]:
    """Per depth, ``rows[d]`` ``[tasks, D_d]`` with every task's row minus the previous task's
    (the first task's kept): what the tree is built on (``end_task``)."""
    out = []
    for matrix in rows:
        diff = matrix.clone()
        diff[1:] = matrix[1:] - matrix[:-1]
        out.append(diff)
    return out


def build_tree(rows: Sequence[torch.Tensor], tasks: Optional[Sequence[int]] = None, depth: int = 0) -> TreeNode:
    """The tree over ``tasks`` (default: every row) of the per-depth matrices ``rows``
    (``[tasks, D_d]``, one per depth; row ``i`` is task ``i``); module docstring."""
    tasks = list(range(rows[0].shape[0])) if tasks is None else list(tasks)
    node = TreeNode(tasks, depth)
    if depth >= len(rows) or len(tasks) <= 1:
        return node
    current = rows[depth][tasks]
    node.mean = current.mean(dim=0)
    similarity = current.mv(node.mean)
    node.median = float(torch.median(similarity))
    left = [t for t, s in zip(tasks, similarity.tolist()) if s >= node.median]
    right = [t for t, s in zip(tasks, similarity.tolist()) if s < node.median]
    if not left or not right:
        half = len(tasks) // 2
        left, right = tasks[:half], tasks[half:]
    node.left, node.right = build_tree(rows, left, depth + 1), build_tree(rows, right, depth + 1)
    return node


def leaves(node: TreeNode) -> List[List[int]]:
    """The task lists of the tree's leaves, left to right."""
    return [node.tasks] if node.is_leaf else leaves(node.left) + leaves(node.right)


def exploration_bonus(counts: torch.Tensor, total: int, step: int) -> torch.Tensor:
    """``sqrt(log(2 T (t + 1) (t + 2))) / sqrt(2 n + 1e-5)`` for the counts ``n``, ``T`` steps per
    epoch and the epoch's step ``t`` (0 first)."""
    return 1.0 / torch.sqrt(2 * counts + COUNT_EPS) * math.sqrt(math.log(2 * total * (step + 1) * (step + 2)))


def lcb_scores(sums: torch.Tensor, counts: torch.Tensor, total: int, step: int) -> torch.Tensor:
    """The arms' scores ``[tasks, depths]`` before the tree acts: ``-(S / n - bonus)`` (``S`` where
    ``n`` is 0), plus its minimum (the code's shift)."""
    score = sums.clone()
    seen = counts > 0
    score[seen] = score[seen] / counts[seen]
    score = -(score - exploration_bonus(counts, total, step))
    return score + score.min()


def tree_search(scores: torch.Tensor, root: Optional[TreeNode], generator: Optional[torch.Generator] = None,
                mode: str = "sample") -> Tuple[torch.Tensor, int, torch.Tensor]:
    """One task per depth from the arms' ``scores`` ``[tasks, depths]`` (:func:`lcb_scores`) and the
    tree: ``(choice [depths], first task, probabilities [tasks, depths])``; module docstring.
    ``mode`` "sample" draws as the code does; "greedy" takes the most probable task each time."""
    if mode not in SEARCH_MODES:
        raise ValueError(f"search must be one of {SEARCH_MODES}, got {mode!r}")
    scores = scores.clone()
    first_p = torch.softmax(scores.sum(dim=1), dim=0)
    first = int(first_p.argmax()) if mode == "greedy" else int(torch.multinomial(first_p, 1, generator=generator))
    if root is not None and not root.is_leaf:
        group = root.left if first in root.left.tasks else root.right
        factor = group.median if group.median is not None else 1.0
        scores[group.tasks] *= min(factor, MAX_GROUP_FACTOR)
    scores = scores / (scores.max() - scores.min() + RANGE_EPS)
    probabilities = torch.softmax(scores, dim=0)
    if mode == "greedy":
        choice = probabilities.argmax(dim=0)
    else:
        choice = torch.multinomial(probabilities.t(), 1, replacement=True, generator=generator).reshape(-1)
    return choice, first, probabilities


def l1_distances(current: Sequence[torch.Tensor], stored: Sequence[torch.Tensor], choice: torch.Tensor) -> torch.Tensor:
    """``sum |current_d - stored_d[choice_d]|`` per depth ``d`` (float32, on the CPU: one copy from
    the device per call, where the code reads each depth's with ``.item()``)."""
    return torch.stack([(c.reshape(-1) - s[int(j)].reshape(-1)).abs().sum().float()
                        for c, s, j in zip(current, stored, choice)]).cpu()


def tree_loss(trainable: Sequence[torch.Tensor], stored: Sequence[torch.Tensor], choice: torch.Tensor,
              loss_value: torch.Tensor, coef: float) -> torch.Tensor:
    """TreeLoRA's term, to be SUBTRACTED from the loss: ``R / (R.detach() + 1e-5) * loss_value *
    coef`` with ``R = -sum_d <A_d, stored_d[choice_d]>`` over the trainable ``A_d`` (module docstring)."""
    r = None
    for a, rows, j in zip(trainable, stored, choice):
        term = -(a.reshape(-1) * rows[int(j)].reshape(-1).to(a.dtype)).sum()
        r = term if r is None else r + term
    return r / (r.detach() + RATIO_EPS) * loss_value.detach() * coef


__all__ = ["MAX_GROUP_FACTOR", "SEARCH_MODES", "TREELORA_REG", "TreeNode", "build_tree", "exploration_bonus", "l1_distances",
           "lcb_scores", "leaves", "task_differences", "tree_loss", "tree_search"]
