"""The two-process (gloo, CPU) check of the data-parallel pieces: the worker each spawned process runs
and what it computes (tests/strategies/test_data_parallel.py). Spawned processes import their
target by module name, so it lives here, on the tests' path, not in a test file."""

import os
import socket

import torch
import torch.distributed as dist

from moram_avalanche.algorithms.data_parallel import (
    ShardedBatches,
    average_gradients,
    gather,
    gather_with_grad,
    shard_bounds,
)
from moram_avalanche.algorithms.losses import image_to_text_loss, text_to_image_loss

BATCH, WIDTH, CLASSES = 7, 5, 3


def problem(seed=0):
    """A batch of features, a linear map to train, class embeddings, labels."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(BATCH, WIDTH, generator=gen)
    weight = torch.randn(WIDTH, WIDTH, generator=gen)
    text = torch.nn.functional.normalize(torch.randn(CLASSES, WIDTH, generator=gen), dim=-1)
    labels = torch.randint(0, CLASSES, (BATCH,), generator=gen)
    return x, weight, text, labels


def clip_like_loss(x, weight, text, labels, total, processes):
    """CLIPStrategy's data-parallel loss: a summed image->text share, text->image over the gathered batch."""
    image = torch.nn.functional.normalize(x @ weight, dim=-1)
    groups = torch.zeros_like(labels)
    share = image_to_text_loss(image, [text], groups, labels, torch.tensor(10.0), reduction="sum")
    return share * processes / total + text_to_image_loss(gather_with_grad(image), text, gather(labels),
                                                          torch.tensor(10.0))


def recorded_stats(x, reduce=False):
    """A MoRAM layer's recorded activation mass and hits on ``x`` (MoRAMPlugin's settle reduces them)."""
    from moram_avalanche.layers.moram.layer import MoRAMLinear
    from moram_avalanche.strategies.plugins.moram import reduce_recorded_stats

    torch.manual_seed(3)
    layer = MoRAMLinear(torch.nn.Linear(WIDTH, WIDTH), atoms_per_task=4, topk=2, temperature=1.0)
    layer.expand()
    layer.reset_stats()
    layer.start_recording()
    with torch.no_grad():
        layer(x)
    if reduce:
        reduce_recorded_stats([layer])
    return layer.atom_mass, layer.atom_hits


def worker(rank, world, port, out):
    # Avalanche creates a logger when imported, which it refuses on a rank > 0 of a process group
    import moram_avalanche.strategies.plugins.moram  # noqa: F401

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        x, weight, text, labels = problem()
        part = shard_bounds(BATCH, rank, world)
        weight.requires_grad_(True)
        clip_like_loss(x[part], weight, text, labels[part], BATCH, world).backward()
        average_gradients([weight])
        torch.manual_seed(5)
        batches = [list(b) for _ in range(2) for b in ShardedBatches(11, 4)]
        mass, hits = recorded_stats(x[part], reduce=True)
        torch.save({"grad": weight.grad, "batches": batches, "mass": mass, "hits": hits},
                   os.path.join(out, f"{rank}.pt"))
    finally:
        dist.destroy_process_group()


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
