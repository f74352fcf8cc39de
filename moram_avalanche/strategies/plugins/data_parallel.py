"""DataParallel: data-parallel training over ``torch.distributed`` processes, for any strategy."""

from __future__ import annotations

from avalanche.core import SupervisedPlugin
from torch.utils.data import DataLoader, Subset

from ...algorithms.data_parallel import (average_gradients, broadcast_module, check_same_parameters,
                                         shard_indices, world_size)


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
      the processes (:class:`~moram_avalanche.experiments.metrics.AccuracyMatrix`) are exact.

    Training data is sharded by the strategy's loader: :class:`~moram_avalanche.strategies.base.CLIPStrategy`
    splits every global batch (:class:`~moram_avalanche.algorithms.data_parallel.ShardedBatches`);
    Avalanche's strategies use Avalanche's distributed sampler. Without a process group
    (one process) the plugin does nothing.
    """

    def before_training_exp(self, strategy, **kwargs):
        if world_size() == 1:
            return
        check_same_parameters(strategy.model)
        broadcast_module(strategy.model)

    def before_update(self, strategy, **kwargs):
        average_gradients(strategy.model.parameters())

    def before_eval_exp(self, strategy, **kwargs):
        if world_size() == 1:
            return
        data = strategy.adapted_dataset
        strategy.dataloader = DataLoader(
            Subset(data, shard_indices(len(data))), batch_size=strategy.eval_mb_size, shuffle=False,
            num_workers=int(kwargs.get("num_workers", 0)),
            collate_fn=getattr(strategy, "batch_collate", None) or getattr(data, "collate_fn", None),
            pin_memory=strategy.device.type == "cuda")


__all__ = ["DataParallel"]
