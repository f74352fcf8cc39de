"""A-GEM whose memory sampling pickles: Avalanche's ``AGEMPlugin`` for any family's run checkpoints.

Avalanche's ``AGEMPlugin`` keeps the running iterator of a ``GroupBalancedInfiniteDataLoader``
(a generator) to draw its memory samples, so a whole-strategy checkpoint of ``AGEM`` -- what a
run of ``avalanche.agem`` writes after every experience, on CLIP and on the text loop alike --
failed with ``cannot pickle 'generator' object`` at the end of the first experience.
:class:`CheckpointableAGEMPlugin` draws the same group-balanced samples -- ``sample_size //
len(buffers)`` items of every experience's buffer, each buffer read in a fresh random order once
it is used up -- from plain state (each buffer's order, the position in it, the plugin's own
``torch.Generator``), so a run resumed from a checkpoint draws the memory samples the
uninterrupted run draws. Memory and projection are Avalanche's.

:func:`checkpointable_agem` re-classes the ``AGEMPlugin`` an ``AGEM`` strategy built for itself
(the same instance and arguments); the text loop's
:class:`~moram_avalanche.strategies.text.plugins.avalanche.TextAGEMPlugin` derives from it.
"""

from __future__ import annotations

import random
from typing import Iterable

import torch
from avalanche.training.plugins import AGEMPlugin
from torch.utils.data import default_collate


class CheckpointableAGEMPlugin(AGEMPlugin):
    """A-GEM with memory samples drawn from picklable state (module docstring)."""

    @torch.no_grad()
    def update_memory(self, dataset, num_workers=0, **kwargs):
        """Keep ``patterns_per_experience`` random items of the experience (Avalanche's
        ``update_memory``: Python's ``random.shuffle``) as a new buffer."""
        if len(dataset) > self.patterns_per_experience:
            indices = list(range(len(dataset)))
            random.shuffle(indices)
            dataset = dataset.subset(indices[: self.patterns_per_experience])
        self.buffers.append(dataset)
        if getattr(self, "sampler", None) is None:  # seeded from the run's torch RNG: reproducible
            self.sampler = torch.Generator().manual_seed(int(torch.randint(2 ** 62, (1,))))
        self.orders = getattr(self, "orders", []) + [[]]
        self.buffer_dataloader, self.buffer_dliter = None, iter(())  # nothing unpicklable is kept

    def sample_from_memory(self):
        """A minibatch of ``max(1, sample_size // len(buffers))`` items of every buffer, each
        buffer read in random orders drawn by :attr:`sampler`, collated by :meth:`collate`."""
        per_buffer = max(1, self.sample_size // len(self.buffers))
        items = []
        for index, buffer in enumerate(self.buffers):
            for _ in range(min(per_buffer, len(buffer))):
                if not self.orders[index]:
                    self.orders[index] = torch.randperm(len(buffer), generator=self.sampler).tolist()
                items.append(buffer[self.orders[index].pop()])
        return self.collate(items)

    def collate(self, items):
        """The items as one minibatch: the buffers' own ``collate_fn`` (Avalanche's datasets
        carry one), else torch's default."""
        collate = getattr(self.buffers[0], "collate_fn", None) if self.buffers else None
        return (collate or default_collate)(items)


def checkpointable_agem(plugins: Iterable) -> list:
    """``plugins``, each plain ``AGEMPlugin`` re-classed as :class:`CheckpointableAGEMPlugin` (same
    instance, same arguments; a subclass of Avalanche's is left alone: it may sample its own way)."""
    plugins = list(plugins)
    for plugin in plugins:
        if type(plugin) is AGEMPlugin:
            plugin.__class__ = CheckpointableAGEMPlugin
    return plugins


__all__ = ["CheckpointableAGEMPlugin", "checkpointable_agem"]
