"""The weights' fingerprint (issue 46): every tensor's name, dtype, shape and bytes, in name order,
one function for CLIP and language models."""

import hashlib
import json

import numpy as np
import pytest
import torch
from torch import nn


def by_hand(entries):
    """The fingerprint written out: each entry's ``[name, dtype, shape]`` as JSON and its bytes,
    each followed by the separator 0x1e, SHA-256, first 16 hex digits."""
    sha = hashlib.sha256()
    for name, dtype, shape, data in sorted(entries):
        sha.update(json.dumps([name, dtype, shape]).encode() + b"\x1e")
        sha.update(data + b"\x1e")
    return sha.hexdigest()[:16]


class Two(nn.Module):
    def __init__(self):
        super().__init__()
        self.b = nn.Parameter(torch.tensor([1.0, -2.0]))
        self.register_buffer("a", torch.tensor([[3]], dtype=torch.int64))


def test_the_fingerprint_is_the_hash_of_names_dtypes_shapes_and_bytes():
    from moram_avalanche.experiments.fingerprints import weights_fingerprint

    expected = by_hand([("b", "float32", [2], np.array([1.0, -2.0], np.float32).tobytes()),
                        ("a", "int64", [1, 1], np.array([[3]], np.int64).tobytes())])
    assert weights_fingerprint(Two()) == expected


@pytest.mark.parametrize("edit", [
    lambda m: m.b.data.neg_(),
    lambda m: m.b.data.copy_(m.b.data.flip(0)),
    lambda m: setattr(m, "b", nn.Parameter(m.b.data.to(torch.bfloat16))),
    lambda m: setattr(m, "b", nn.Parameter(m.b.data.reshape(2, 1))),
], ids=["sign", "order", "dtype", "shape"])
def test_what_the_sum_of_abs_cannot_see_changes_the_fingerprint(edit):
    from moram_avalanche.experiments.fingerprints import weights_fingerprint

    model = Two()
    before = weights_fingerprint(model)
    edit(model)
    assert weights_fingerprint(model) != before


def test_a_tied_weight_counts_once_under_its_first_name():
    from moram_avalanche.experiments.fingerprints import weights_fingerprint

    model = nn.Module()
    model.first = nn.Linear(2, 2, bias=False)
    model.second = nn.Linear(2, 2, bias=False)
    model.second.weight = model.first.weight
    data = model.first.weight.detach().numpy().tobytes()
    assert weights_fingerprint(model) == by_hand([("first.weight", "float32", [2, 2], data)])


def test_a_clip_model_loaded_twice_is_the_same_and_another_seed_is_not():
    from moram_avalanche.clip.load import load_clip
    from moram_avalanche.experiments.fingerprints import model_fingerprints

    def load(seed):
        torch.manual_seed(seed)
        return load_clip("moram-synthetic-tiny", pretrained=None)[0]

    first = model_fingerprints(load(0))
    assert set(first) == {"weights"}  # CLIP has no model files of its own
    assert model_fingerprints(load(0)) == first
    assert model_fingerprints(load(1)) != first
