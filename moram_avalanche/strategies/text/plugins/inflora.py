"""TextInfLoRAPlugin: InfLoRA's per-task procedure on a language model's task LoRAs.

The CLIP plugin's method (:class:`~moram_avalanche.strategies.plugins.inflora.InfLoRAPlugin`:
the designed down-projection, the DualGPM memory, its threshold schedule and state), with the
official code's per-task branches instead of CLIP's merge [liangyanshuo/InfLoRA
models/vit_inflora.py: ``lora_A_k`` / ``lora_B_k`` lists, one entry per task, the earlier ones
frozen and summed]: each adapted linear is a
:class:`~moram_avalanche.layers.task_lora.TaskLoRALinear`.

* :meth:`grow` (before the task's optimizer): the covariance of every adapted linear's input
  over the task's training batches, padding left out
  (:func:`~moram_avalanche.models.token_covariance.token_input_covariances`), with the model as
  the earlier tasks left it; a new branch whose down-projection is the designed one
  (:func:`~moram_avalanche.algorithms.dualgpm.design_down_projection` of the covariance
  projected out of the old input space), frozen; its up-projection zero and the only part that
  trains; every earlier branch frozen.
* :meth:`settle` (after the task): the covariance pass again with the trained model, the DualGPM
  update with ``eps_t = lambda_b + (lambda_e - lambda_b) t / T``, and the branch frozen.

One memory per adapted linear (a group of one): T5's cross-attention ``k`` / ``v`` read the
encoder's output while its ``q`` reads the decoder's, so the CLIP plugin's "one group per
attention module" would mix inputs. The memories and the history are the plugin's checkpoint
state (:meth:`state_dict`); the branches are the model's.
"""

from __future__ import annotations

from typing import Dict, Mapping, Optional, Tuple

import torch
from torch.utils.data import DataLoader

from ....algorithms.dualgpm import LAMBDA_B, LAMBDA_E
from ....layers.task_lora import TaskLoRALinear
from ....models.language_model import prompt_cuts
from ....models.token_covariance import token_input_covariances
from ...plugins.inflora import InfLoRAPlugin


def memory_bytes(layers: int, dim: int) -> Tuple[int, int]:
    """``(held, pass)``: the most bytes the DualGPM bases of ``layers`` linears of input size ``dim``
    hold (float64, at most ``dim // 2`` columns each: a longer remove basis is stored as its
    complement), and what their float64 covariances take during a covariance pass."""
    return layers * dim * (dim // 2) * 8, layers * dim * dim * 8


class TextInfLoRAPlugin(InfLoRAPlugin):
    """InfLoRA on the ``TaskLoRALinear`` layers named in ``dims`` (module docstring).

    Args:
        dims: ``{dotted layer name: its input size}`` (names as ``find_layers`` gives them on the
            strategy's model).
        rank, num_tasks, lambda_b, lambda_e, memory: as :class:`InfLoRAPlugin`; ``num_tasks``
            None: the number of experiences of the training stream.
    """

    layer_type = TaskLoRALinear

    def __init__(self, dims: Mapping[str, int], *, rank: int, num_tasks: Optional[int] = None,
                 lambda_b: float = LAMBDA_B, lambda_e: float = LAMBDA_E, memory: str = "dual") -> None:
        groups = {name: {"layers": [name], "dim": int(dim)} for name, dim in dims.items()}
        super().__init__(groups, rank=rank, num_tasks=num_tasks, lambda_b=lambda_b, lambda_e=lambda_e,
                         memory=memory)

    def covariances(self, strategy, num_workers: int = 0) -> Dict[str, torch.Tensor]:
        """Every adapted linear's input covariance over the experience's training set (as the
        strategy adapted it), in order, in batches of ``eval_mb_size``, padding left out."""
        layers = self.layers(strategy.model)
        recorded = {name: layers[name] for name in self.groups}
        loader = DataLoader(strategy.adapted_dataset, batch_size=strategy.eval_mb_size, shuffle=False,
                            num_workers=num_workers, collate_fn=strategy.batch_collate)
        tasks = getattr(strategy.experience, "tasks", None)
        batches = ((prompts, answers, prompt_cuts(tasks, ids.tolist()) if tasks else None)
                   for prompts, answers, ids in loader)
        return token_input_covariances(strategy.model, recorded, batches)

    def install(self, layer: TaskLoRALinear, down: torch.Tensor) -> None:
        """A new branch: the earlier ones frozen, its down-projection ``down`` (frozen), its
        up-projection zero (the one trained)."""
        layer.expand()
        with torch.no_grad():
            layer.downs[-1].copy_(down.to(layer.downs[-1].dtype))
        layer.downs[-1].requires_grad_(False)
        layer.ups[-1].requires_grad_(True)

    def finish(self, layer: TaskLoRALinear) -> None:
        """Freeze the task's branch (kept, not merged: the official code's per-task branches)."""
        layer.freeze()

    @staticmethod
    def experience_name(experience) -> str:
        return str(getattr(experience, "task_name", "") or "")

    @staticmethod
    def stream_tasks(experience) -> int:
        """``T`` when ``num_tasks`` is None: the experiences of the stream the experience came from."""
        stream = getattr(experience, "origin_stream", None)
        return len(stream) if stream is not None else 0


__all__ = ["TextInfLoRAPlugin", "memory_bytes"]
