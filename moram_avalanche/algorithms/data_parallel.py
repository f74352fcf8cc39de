"""Data-parallel pieces over ``torch.distributed``: shards, collectives, gradient averaging.

Framework-free (torch only, no Avalanche), used by the strategies, their
:class:`~moram_avalanche.strategies.plugins.data_parallel.DataParallel` plugin and the runner.
One process per device (``torchrun --nproc_per_node N``); every process holds the whole model
and a contiguous share of each global batch. Without an initialised process group every
function here is the single-process identity (world size 1), so the same code runs both ways.

Avalanche 0.6.0's own distributed support (``avalanche.distributed.DistributedHelper``) starts
the process group and seeds it (:mod:`moram_avalanche.experiments.distributed`); what it
leaves out is done here (integration guide, section 6): its ``DistributedDataParallel`` wrap is
not applied by the strategy templates, cannot see CLIP strategies' direct tower calls
(``encode_image`` / ``encode_text``) and silently lets adapters added after wrapping diverge,
so gradients are averaged explicitly (:func:`average_gradients`, one coalesced all-reduce per
device and dtype, as DDP's buckets); its distributed sampler pads a shard with repeated
samples and draws the same order every pass, so shards are cut here without padding
(:class:`ShardedBatches`, :func:`shard_indices`).
"""

from __future__ import annotations

from typing import Iterable, Iterator, List

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import Sampler


def world_size() -> int:
    """Processes in the group (1 without one)."""
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def rank() -> int:
    """This process's rank (0 without a group)."""
    return dist.get_rank() if dist.is_available() and dist.is_initialized() else 0


def is_main_process() -> bool:
    """Rank 0: the process that writes logs, results and checkpoints."""
    return rank() == 0


def barrier() -> None:
    """Wait for every process (nothing without a group)."""
    if world_size() > 1:
        dist.barrier()


def all_gather_objects(value) -> list:
    """Every process's ``value`` (any picklable object), in rank order, on every process;
    ``[value]`` without a group."""
    if world_size() == 1:
        return [value]
    every = [None] * world_size()
    dist.all_gather_object(every, value)
    return every


def shard_bounds(count: int, part: int, parts: int) -> slice:
    """The ``part``-th of ``parts`` contiguous, nearly equal shares of ``range(count)``."""
    return slice(count * part // parts, count * (part + 1) // parts)


def shard_indices(count: int) -> List[int]:
    """This process's contiguous share of ``range(count)``: every index exactly once over the
    group, no padding (shares differ by at most one)."""
    bounds = shard_bounds(count, rank(), world_size())
    return list(range(bounds.start, bounds.stop))


def broadcast_int(value: int, src: int = 0) -> int:
    """``value`` of process ``src`` on every process."""
    if world_size() == 1:
        return int(value)
    holder = [int(value)]
    dist.broadcast_object_list(holder, src=src)
    return int(holder[0])


def all_reduce_sum(tensor: torch.Tensor) -> torch.Tensor:
    """The sum of ``tensor`` over the group (a new tensor; ``tensor`` itself without a group)."""
    if world_size() == 1:
        return tensor
    total = tensor.detach().clone()
    dist.all_reduce(total)
    return total


class _GatherWithGrad(torch.autograd.Function):
    """All-gather along dim 0 (shares of any length); backward: the summed gradient of own rows."""

    @staticmethod
    def forward(ctx, tensor: torch.Tensor) -> torch.Tensor:
        sizes = [torch.zeros((), dtype=torch.long, device=tensor.device) for _ in range(world_size())]
        dist.all_gather(sizes, torch.tensor(tensor.shape[0], device=tensor.device))
        sizes = [int(size) for size in sizes]
        longest = max(sizes)
        padded = torch.cat([tensor, tensor.new_zeros(longest - tensor.shape[0], *tensor.shape[1:])])
        parts = [torch.empty_like(padded) for _ in sizes]
        dist.all_gather(parts, padded.contiguous())
        ctx.sizes, ctx.rank = sizes, rank()
        return torch.cat([part[:size] for part, size in zip(parts, sizes)])

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        total = grad.contiguous().clone()
        dist.all_reduce(total)  # every process's gradient of the gathered rows, summed
        start = sum(ctx.sizes[:ctx.rank])
        return total[start:start + ctx.sizes[ctx.rank]]


def gather_with_grad(tensor: torch.Tensor) -> torch.Tensor:
    """Every process's ``tensor`` concatenated along dim 0 in rank order, differentiable.

    Shares may differ in length. The backward pass sums, over the group, the gradients that
    reach each process's own rows, so a loss every process computes identically on the gathered
    batch gives, once :func:`average_gradients` averaged them, the gradient of that loss for one
    process holding the whole batch.
    """
    if world_size() == 1:
        return tensor
    return _GatherWithGrad.apply(tensor)


def gather(tensor: torch.Tensor) -> torch.Tensor:
    """As :func:`gather_with_grad`, without gradient (labels, indices)."""
    with torch.no_grad():
        return gather_with_grad(tensor.detach())


def average_gradients(parameters: Iterable[nn.Parameter]) -> None:
    """Replace the gradient of every parameter that requires grad by its mean over the group.

    A parameter without a gradient on this process counts as zero (every process must list the
    same parameters in the same order). One all-reduce per device and dtype (coalesced).
    """
    world = world_size()
    if world == 1:
        return
    params = [p for p in parameters if p.requires_grad]
    buckets = {}
    for p in params:
        buckets.setdefault((p.device, p.dtype), []).append(p)
    for group in buckets.values():
        flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1)
                          for p in group])
        dist.all_reduce(flat)
        flat /= world
        offset = 0
        for p in group:
            part = flat[offset:offset + p.numel()].view_as(p)
            offset += p.numel()
            if p.grad is None:
                p.grad = part.clone()
            else:
                p.grad.copy_(part)


def is_sharded(tensor: torch.Tensor) -> bool:
    """Whether ``tensor`` is a weight sharded over the processes (FSDP's ``DTensor``, :mod:`.fsdp`):
    each process holds its own share of it."""
    from torch.distributed.tensor import DTensor

    return isinstance(tensor, DTensor)


def broadcast_module(module: nn.Module, src: int = 0) -> None:
    """Copy every parameter and buffer of ``module`` from process ``src`` to the others.

    Sharded weights (:mod:`.fsdp`) are left alone: each process holds its own share of them."""
    if world_size() == 1:
        return
    with torch.no_grad():
        for tensor in [*module.parameters(), *module.buffers()]:
            if not is_sharded(tensor):
                dist.broadcast(tensor.data, src=src)


def check_same_parameters(module: nn.Module) -> None:
    """Every process trains the same parameters (names and sizes), none of them sharded; a clear
    error otherwise."""
    if world_size() == 1:
        return
    sharded = [name for name, p in module.named_parameters() if p.requires_grad and is_sharded(p)]
    if sharded:
        raise RuntimeError(f"sharded weights require grad ({sharded[:3]}): sharding (FSDP, --fsdp) is for frozen "
                           "weights only; train adapters on them, or train without --fsdp")
    mine = [(name, tuple(p.shape)) for name, p in module.named_parameters() if p.requires_grad]
    every = all_gather_objects(mine)
    differ = [r for r, theirs in enumerate(every) if theirs != mine]
    if differ:
        raise RuntimeError(
            f"data-parallel processes train different parameters (rank {rank()} vs ranks {differ}): "
            "every process must build the same model and grow it the same way")


class ShardedBatches(Sampler[List[int]]):
    """Global batches of ``batch_size`` indices, this process's contiguous share of each.

    Every process draws the same permutation: the seed comes from the global torch RNG exactly
    as ``torch.utils.data.RandomSampler`` draws it (one int64 per pass) and is then taken from
    rank 0, so one process yields the batches of ``DataLoader(..., shuffle=True)`` (Avalanche's
    training loader over one task) and ``N`` processes split those same batches between them.
    A global batch smaller than the number of processes (an epoch's tail of fewer samples than
    processes) is skipped by every process.
    """

    def __init__(self, size: int, batch_size: int, *, shuffle: bool = True,
                 drop_last: bool = False) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.size, self.batch_size = int(size), int(batch_size)
        self.shuffle, self.drop_last = shuffle, drop_last

    def global_batches(self) -> Iterator[List[int]]:
        if self.shuffle:
            seed = broadcast_int(int(torch.empty((), dtype=torch.int64).random_().item()))
            generator = torch.Generator()
            generator.manual_seed(seed)
            order = torch.randperm(self.size, generator=generator).tolist()
        else:
            order = list(range(self.size))
        for start in range(0, self.size, self.batch_size):
            batch = order[start:start + self.batch_size]
            if self.drop_last and len(batch) < self.batch_size:
                return
            yield batch

    def __iter__(self) -> Iterator[List[int]]:
        world, me = world_size(), rank()
        for batch in self.global_batches():
            if len(batch) < world:
                continue
            yield batch[shard_bounds(len(batch), me, world)]

    def __len__(self) -> int:
        full, tail = divmod(self.size, self.batch_size)
        return full + (1 if tail and not self.drop_last and tail >= world_size() else 0)


__all__ = ["ShardedBatches", "all_gather_objects", "all_reduce_sum", "average_gradients", "barrier", "broadcast_int",
           "broadcast_module", "check_same_parameters", "gather", "gather_with_grad",
           "is_main_process", "is_sharded", "rank", "shard_bounds", "shard_indices", "world_size"]
