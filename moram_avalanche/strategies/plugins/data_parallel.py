"""DataParallel: data-parallel training over ``torch.distributed`` processes, for any strategy."""

from __future__ import annotations

from typing import List, Optional, Tuple

from avalanche.core import SupervisedPlugin
from torch.utils.data import DataLoader, Subset

from ...algorithms.data_parallel import (
    average_gradients,
    broadcast_module,
    check_same_parameters,
    shard_bounds,
    shard_indices,
    world_size,
)
from ...algorithms.fsdp import holds_sharded_weights


class DataParallel(SupervisedPlugin, supports_distributed=True):
    """What ``DistributedDataParallel`` does, as an Avalanche plugin (one process per device).

    * before each training experience -- after adapters grew and the optimizer was built --
      every process checks it trains the same parameters, and takes rank 0's parameters and
      buffers (growth draws random numbers; a strategy whose forward draws them per sample,
      such as dropout, can leave the processes' generators apart);
    * before every optimizer step (``before_update``, after every plugin's ``after_backward``,
      e.g. gradient projections) the gradients are averaged over the processes;
    * before each evaluation experience the evaluation data loader is replaced by this
      process's contiguous share of the experience, each sample in exactly one process (no
      padding, unlike ``torch.utils.data.DistributedSampler``), so metrics that sum counts over
      the processes (:class:`~moram_avalanche.experiments.metrics.AccuracyMatrix`) are exact;
      with sharded weights (``--fsdp``, :mod:`~moram_avalanche.algorithms.fsdp`) every call of
      the model is a collective, so the processes with fewer batches get padding batches
      (:func:`padded_eval_batches`) whose output and minibatch are emptied after the forward
      pass, before any metric reads them.

    Training data is sharded by the strategy's loader: :class:`~moram_avalanche.strategies.clip.loop.CLIPStrategy`
    splits every global batch (:class:`~moram_avalanche.algorithms.data_parallel.ShardedBatches`);
    Avalanche's strategies use Avalanche's distributed sampler. Without a process group
    (one process) the plugin does nothing.
    """

    def __init__(self) -> None:
        super().__init__()
        #: the evaluation batch from which this process's batches are padding (None: no padding)
        self.padding_from: Optional[int] = None
        self.eval_batches = 0

    def before_training_exp(self, strategy, **kwargs):
        if world_size() == 1:
            return
        check_same_parameters(strategy.model)
        broadcast_module(strategy.model)

    def before_update(self, strategy, **kwargs):
        average_gradients(strategy.model.parameters())

    def before_eval_exp(self, strategy, **kwargs):
        self.padding_from = None
        if world_size() == 1:
            return
        data = strategy.adapted_dataset
        collate = getattr(strategy, "batch_collate", None) or getattr(data, "collate_fn", None)
        common = dict(num_workers=int(kwargs.get("num_workers", 0)), collate_fn=collate,
                      pin_memory=strategy.device.type == "cuda")
        if not holds_sharded_weights(strategy.model):
            strategy.dataloader = DataLoader(Subset(data, shard_indices(len(data))),
                                             batch_size=strategy.eval_mb_size, shuffle=False, **common)
            return
        batches, self.padding_from = padded_eval_batches(len(data), strategy.eval_mb_size)
        self.eval_batches = 0
        strategy.dataloader = DataLoader(data, batch_sampler=batches, **common)

    def after_eval_forward(self, strategy, **kwargs):
        """A padding batch's results are thrown away: its output and minibatch become empty."""
        if self.padding_from is None:
            return
        if self.eval_batches >= self.padding_from:
            strategy.mb_output = strategy.mb_output[:0]
            strategy.mbatch = [part[:0] for part in strategy.mbatch]
        self.eval_batches += 1


def padded_eval_batches(count: int, batch_size: int) -> Tuple[List[List[int]], int]:
    """``(batches, real)``: this process's evaluation batches of ``range(count)`` -- its
    contiguous share (:func:`~moram_avalanche.algorithms.data_parallel.shard_indices`) in batches
    of ``batch_size``, the first ``real`` of them -- then padding batches (sample 0 alone) until
    it has as many batches as the process with the most.

    With sharded weights every forward call is a collective, so every process must make as many
    calls (the shares differ by one sample at most, and a share can be empty); every process
    knows every share's size, so no message is needed.
    """
    mine = shard_indices(count)
    batches = [mine[i:i + batch_size] for i in range(0, len(mine), batch_size)]
    sizes = [bounds.stop - bounds.start for bounds in (shard_bounds(count, r, world_size())
                                                       for r in range(world_size()))]
    most = max(-(-size // batch_size) for size in sizes)
    return batches + [[0]] * (most - len(batches)), len(batches)


__all__ = ["DataParallel", "padded_eval_batches"]
