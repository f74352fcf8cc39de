"""A tiny random-init open_clip CLIP's config and random-tensor domains: what the CLIP tests build on
(the fixtures in tests/conftest.py use them)."""

import torch

TINY_NAME = "moram-test-tiny"

TINY_CONFIG = {
    "embed_dim": 32,
    "vision_cfg": {"image_size": 32, "layers": 2, "width": 64, "patch_size": 8, "head_width": 32},
    "text_cfg": {"context_length": 16, "vocab_size": 49408, "width": 64, "heads": 2, "layers": 2},
}


class TensorDomain(torch.utils.data.Dataset):
    """Random images with local labels 0..classes-1 (a domain for fast strategy tests)."""

    def __init__(self, size, classes, seed):
        gen = torch.Generator().manual_seed(seed)
        self.images = torch.randn(size, 3, 32, 32, generator=gen)
        self.targets = [i % classes for i in range(size)]

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, index):
        return self.images[index], self.targets[index]


STREAM_CLASSES = {"alpha": ("cat", "dog"), "beta": ("red", "green", "blue"), "gamma": ("one", "two")}
