"""Experiences carry the CLIP metadata; labels live in the declared label space."""

import pytest
import torch

from moram_avalanche.benchmarks import Domain, label_offsets


class Labelled(torch.utils.data.Dataset):
    """Blank images with the given labels."""

    def __init__(self, labels):
        self.targets = list(labels)

    def __len__(self):
        return len(self.targets)

    def __getitem__(self, index):
        return torch.zeros(3, 32, 32), self.targets[index]


def test_label_offsets_are_cumulative_class_counts():
    domains = [Domain("a", ("x", "y"), "{}"), Domain("b", ("p", "q", "r"), "{}"), Domain("c", ("z",), "{}")]
    assert label_offsets(domains) == [0, 2, 5]


def test_experiences_carry_metadata(make_stream):
    benchmark = make_stream("all")
    for stream in (benchmark.train_stream, benchmark.test_stream):
        assert [e.domain for e in stream] == ["alpha", "beta", "gamma"]
        assert [e.label_offset for e in stream] == [0, 2, 5]
        assert stream[1].classnames == ("red", "green", "blue")
        assert stream[1].template == "a {} from beta."
        assert stream[1].eval_templates == ("a {} from beta.",)
        assert all(e.label_space == "all" for e in stream)
        assert [e.task_label for e in stream] == [0, 1, 2]
    x, y, t = benchmark.test_stream[2].dataset[1]
    assert (y, t) == (5 + 1, 2)  # "all": local label 1 + the domain's offset 5; task = domain index
    assert sorted(benchmark.train_stream[1].dataset.targets.uniques) == [2, 3, 4]
    assert sorted(benchmark.train_stream[1].dataset.task_set[1].targets.uniques) == [2, 3, 4]


def test_domain_label_space_keeps_local_labels(make_stream):
    benchmark = make_stream("domain")
    x, y, t = benchmark.test_stream[2].dataset[1]
    assert (y, t) == (1, 2)
    assert sorted(benchmark.train_stream[1].dataset.targets.uniques) == [0, 1, 2]


def test_bad_inputs_are_reported(make_stream):
    with pytest.raises(ValueError, match="label_space"):
        make_stream("joint")
    with pytest.raises(ValueError, match="no '\\{\\}'"):
        Domain("a", ("x",), "a photo")
    from moram_avalanche.benchmarks import clip_benchmark

    with pytest.raises(ValueError, match="labels must be local"):
        clip_benchmark([Domain("a", ("x", "y"), "{}")], [Labelled([0, 3])], [Labelled([0, 1])],
                       label_space="all")
