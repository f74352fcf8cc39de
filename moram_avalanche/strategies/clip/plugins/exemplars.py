"""ExemplarMemory: iCaRL's exemplar set over domains, chosen by herding, as the ZSCL MTIL code keeps it."""

from __future__ import annotations

from typing import List

import torch
import torch.nn.functional as F
from avalanche.core import SupervisedPlugin
from torch.utils.data import ConcatDataset, DataLoader, Dataset, Subset

from ....algorithms.herding import herding_order

#: exemplars in memory [Thunderbeee/ZSCL mtil/src/args.py ``--memory_size`` 10000]
MEMORY_SIZE = 10000
#: training samples of a domain read for the memory [mtil/src/dynamic_dataset.py ``getNewDataset``: 30000]
MAX_READ = 30000


class ExemplarMemory(SupervisedPlugin):
    """A memory of training images of past domains, updated after each experience.

    As ``DynamicDataset`` of the ZSCL MTIL code [Thunderbeee/ZSCL mtil/src/dynamic_dataset.py,
    mtil/src/models/icarl.py], with ``K = memory_size``:

    * the first domain stores its first ``K`` training samples, in dataset order (no herding);
    * every later domain (the ``t``-th, counting it) first cuts each stored domain to its first
      ``K // t`` exemplars, then adds ``K - K // t`` of its own (``balanced=False``, the code's
      count: the memory then holds more than ``K`` from the third domain on) or ``K // t``
      (``balanced=True``, a memory of at most ``K``), chosen by herding
      (:func:`~moram_avalanche.algorithms.herding.herding_order`) on the L2-normalised image
      features of the model just trained on it, over the whole domain (class-agnostic).

    Only the first ``max_read`` training samples of a domain are considered (30000). Images are
    read with the eval transform (the code stores ``test_preprocess`` tensors). The memory keeps
    indices, not images: ``entries`` lists ``(experience index, sample indices)`` and
    :meth:`dataset` rebuilds the image set from the stream (``experience.origin_stream``), so
    the state checkpoints in a few kilobytes.
    """

    def __init__(self, memory_size: int = MEMORY_SIZE, *, balanced: bool = False, max_read: int = MAX_READ,
                 batch_size: int = 128) -> None:
        super().__init__()
        for name, value in (("memory_size", memory_size), ("max_read", max_read), ("batch_size", batch_size)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        self.memory_size, self.balanced, self.max_read, self.batch_size = memory_size, balanced, max_read, batch_size
        self.entries: List[dict] = []

    def __len__(self) -> int:
        return sum(len(e["indices"]) for e in self.entries)

    def dataset(self, experience) -> Dataset:
        """The exemplar images (eval transform) of every stored domain, in domain then pick order."""
        stream = experience.origin_stream
        parts = [Subset(stream[e["experience"]].dataset.eval(), list(e["indices"])) for e in self.entries]
        return ConcatDataset(parts)

    # -- the update after each experience
    def after_training_exp(self, strategy, **kwargs):
        experience = strategy.experience
        images = experience.dataset.eval()
        readable = min(len(images), self.max_read)
        domains = len(self.entries) + 1
        if not self.entries:
            indices = list(range(min(self.memory_size, readable)))
        else:
            keep = self.memory_size // domains
            for entry in self.entries:
                entry["indices"] = entry["indices"][:keep]
            count = keep if self.balanced else self.memory_size - keep
            features = self.features(strategy, Subset(images, list(range(readable))))
            indices = herding_order(features, count).tolist()
        self.entries.append({"experience": int(experience.current_experience), "indices": indices})

    @torch.no_grad()
    def features(self, strategy, images: Dataset) -> torch.Tensor:
        """L2-normalised image features of ``images`` by the current model (eval mode), in order."""
        model = strategy.model
        was_training = model.training
        model.eval()
        loader = DataLoader(images, batch_size=self.batch_size, shuffle=False)
        chunks = []
        for batch in loader:
            x = batch[0] if isinstance(batch, (list, tuple)) else batch
            with strategy.autocast():
                chunks.append(F.normalize(model.encode_image(x.to(strategy.device)).float(), dim=-1).cpu())
        model.train(was_training)
        return torch.cat(chunks)

    # -- state (checkpoints)
    def state_dict(self) -> dict:
        return {"entries": [{"experience": e["experience"], "indices": list(e["indices"])} for e in self.entries]}

    def load_state_dict(self, state: dict) -> None:
        self.entries = [{"experience": int(e["experience"]), "indices": [int(i) for i in e["indices"]]}
                        for e in state["entries"]]


__all__ = ["MAX_READ", "MEMORY_SIZE", "ExemplarMemory"]
