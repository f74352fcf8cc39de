"""Fully sharded frozen weights over ``torch.distributed`` (FSDP2), for a model that does not fit one device.

:func:`shard_frozen_weights` freezes a model and applies ``torch.distributed.fsdp.fully_shard``
to each of its blocks and to the model itself, on a one-dimensional mesh of every process of
the group: each process keeps a ``1 / world`` share (dim 0) of every pre-trained weight, a
block's weights are gathered just before the block runs and freed after it (again in the
backward pass), so one process holds its shares plus about one block at a time. Buffers are
not sharded (FSDP2 moves them to the device, whole).

Only the frozen weights are sharded. Adapters are injected, and grown task by task, *after*
sharding: a parameter registered on a sharded module afterwards stays a plain tensor that FSDP
does not manage (replicated on every process, its gradient computed as usual), so the
data-parallel pieces (:mod:`.data_parallel`: gradient averaging, the broadcast of rank 0's
adapters) train it as they train any adapter. Nothing is reduce-scattered: no sharded weight
gets a gradient. This is why the sharding needs no optimizer of its own and checkpoints keep
holding the adapters only.

FSDP2 (``torch.distributed.fsdp.fully_shard``, PyTorch's own; checked here with torch 2.15)
gathers with collectives inside every forward call, so every process must call a sharded model
the same number of times: training shards every global batch so that the processes step
together, evaluation pads the shorter shares (the DataParallel plugin) and generation keeps
stepping until every process is done (``generate(synced_gpus=True)``,
:func:`holds_sharded_weights`).

Framework-free: torch only (which modules are a model's blocks is the model family's business,
e.g. :func:`moram_avalanche.text.blocks.transformer_blocks`).
"""

from __future__ import annotations

from typing import Iterable, Sequence, Tuple

import torch
from torch import nn

from .data_parallel import all_reduce_sum, is_sharded, world_size


def local_tensor(tensor: torch.Tensor) -> torch.Tensor:
    """This process's share of a sharded tensor; any other tensor as it is."""
    return tensor.to_local() if is_sharded(tensor) else tensor


def holds_sharded_weights(module: nn.Module) -> bool:
    """Whether ``module`` or a module inside it was sharded by ``fully_shard`` (its calls are
    collectives: every process must make them)."""
    from torch.distributed.fsdp import FSDPModule

    return any(isinstance(m, FSDPModule) for m in module.modules())


def shard_frozen_weights(model: nn.Module, blocks: Sequence[nn.Module], device,
                         forward_methods: Sequence[str] = ()) -> nn.Module:
    """Freeze ``model`` and shard its weights over every process of the group (module docstring).

    Args:
        model: the whole model, loaded the same on every process (e.g. on the CPU: each block
            goes to ``device`` whole, then only its share stays).
        blocks: its repeated blocks (transformer layers), each gathered as one unit; the
            weights outside them (embeddings, final norm, head) form the model's own unit.
        device: this process's device (``cuda:<LOCAL_RANK>``, or ``cpu`` with gloo).
        forward_methods: the model's methods besides ``forward`` that run its parts directly
            (a Hugging Face seq2seq model's ``generate`` calls its encoder, not ``forward``):
            each gathers the model's own weights first, as ``forward`` does
            (``torch.distributed.fsdp.register_fsdp_forward_method``).

    Returns ``model``, sharded in place. A ValueError without a process group or blocks.
    """
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard, register_fsdp_forward_method

    if not (dist.is_available() and dist.is_initialized()):
        raise ValueError("sharding the weights (FSDP) needs a torch.distributed process group: start the run "
                         "with torchrun --nproc_per_node N")
    blocks = list(blocks)
    if not blocks:
        raise ValueError(f"no blocks given to shard {type(model).__name__} by: FSDP gathers one block at a time")
    inside = {id(m) for m in model.modules()}
    strays = [type(b).__name__ for b in blocks if id(b) not in inside]
    if strays:
        raise ValueError(f"blocks {strays} are not modules of {type(model).__name__}")
    model.requires_grad_(False)  # only frozen weights are sharded (no gradient to reduce-scatter)
    mesh = init_device_mesh(torch.device(device).type, (world_size(),))
    order = {id(m): i for i, m in enumerate(model.modules())}
    for block in sorted(blocks, key=lambda b: -order[id(b)]):  # inner blocks before the ones holding them
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    for name in forward_methods:
        register_fsdp_forward_method(model, name)
    return model


def weight_bytes(module: nn.Module) -> Tuple[int, int]:
    """``(bytes this process holds, bytes of the whole model)`` of ``module``'s parameters: a
    sharded weight counts its local share, any other parameter whole (in both)."""
    local = total = 0
    for p in module.parameters():
        size = p.element_size()
        local += local_tensor(p).numel() * size
        total += p.numel() * size  # a DTensor's numel is the whole tensor's
    return local, total


def sharded_sum(tensors: Iterable[torch.Tensor], reduce) -> float:
    """``sum(reduce(t))`` over ``tensors`` (``reduce``: tensor -> 0-d float64 tensor) where each
    sharded tensor counts once over the group: its shares' values are summed over the processes.
    A collective when any tensor is sharded (every process must call it)."""
    whole, shares, any_sharded = 0.0, None, False
    for t in tensors:
        if is_sharded(t):
            part = reduce(local_tensor(t))
            shares = part if shares is None else shares + part.to(shares.device)
            any_sharded = True
        else:
            whole += float(reduce(t))
    if not any_sharded:
        return whole
    return whole + float(all_reduce_sum(shares))


__all__ = ["holds_sharded_weights", "local_tensor", "shard_frozen_weights", "sharded_sum",
           "weight_bytes"]
