"""Small helpers: name checks and endless loaders."""

import pytest

from moram_avalanche.utils import check_names, check_positive_int, cycle, lookup


def test_check_names_takes_one_name_or_several_and_lists_the_valid_ones():
    assert check_names("visual", ("visual", "text"), "encoder") == ("visual",)
    assert check_names(["text", "visual"], ("visual", "text"), "encoder") == ("text", "visual")
    with pytest.raises(ValueError, match=r"unknown encoder\(s\) \['vision'\].*\('visual', 'text'\)"):
        check_names(("vision",), ("visual", "text"), "encoder")
    with pytest.raises(ValueError, match="non-empty"):
        check_names((), ("visual", "text"), "encoder")


def test_lookup_and_positive_ints():
    assert lookup({"moram": 1}, "MoRAM", "strategy") == 1
    with pytest.raises(ValueError, match="unknown strategy 'x'; available: a, b"):
        lookup({"b": 1, "a": 2}, "x", "strategy")
    assert check_positive_int("rank", 3) == 3
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match="rank must be a positive int"):
            check_positive_int("rank", bad)


def test_cycle_reiterates_without_caching_and_refuses_an_empty_loader():
    class Counting:
        passes = 0

        def __iter__(self):
            Counting.passes += 1
            return iter([Counting.passes] * 2)

    items = cycle(Counting(), "the toy loader")
    assert [next(items) for _ in range(5)] == [1, 1, 2, 2, 3]  # each pass draws anew
    with pytest.raises(ValueError, match="the training data is empty"):
        next(cycle([], "the training data"))
