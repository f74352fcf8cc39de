"""seed_everything: Python's, NumPy's and torch's generators, seeded as the release seeds them."""

import random

import numpy as np
import pytest
import torch

from moram_avalanche.experiments.compare import Setup
from moram_avalanche.experiments.seeding import RELEASE_SEED, seed_everything


def draws():
    return random.random(), float(np.random.random()), float(torch.rand(1))


def test_all_three_generators_are_seeded():
    seed_everything(7)
    first = draws()
    random.seed(0), np.random.seed(0), torch.manual_seed(0)  # moved elsewhere
    seed_everything(7)
    assert draws() == first
    assert first == (random.Random(7).random(), np.random.RandomState(7).random_sample(),
                     float(torch.rand(1, generator=torch.Generator().manual_seed(7))))


def test_the_default_is_the_releases_and_bad_seeds_are_refused():
    assert RELEASE_SEED == 42 and Setup(make_model=None, make_benchmark=None).seed == 42
    for bad in (-1, 2 ** 32, 1.5, True, "42"):
        with pytest.raises(ValueError, match="seed must be an integer"):
            seed_everything(bad)
