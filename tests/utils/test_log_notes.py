"""DropNote: a host library's note dropped by its opening words, every other record kept."""

import logging

import pytest

from moram_avalanche.utils.log_notes import DropNote, drop_note, note_dropped


class Kept(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@pytest.fixture
def logger():
    """A fresh logger with a handler that keeps what passes its filters."""
    name = "tests.log_notes"
    target = logging.getLogger(name)
    kept = Kept()
    target.addHandler(kept)
    target.propagate = False
    yield name, target, kept
    target.removeHandler(kept)
    target.filters.clear()


def test_drop_note_drops_only_records_that_open_with_the_words(logger):
    name, target, kept = logger
    drop_note(name, "Failed to load CPU")
    target.warning("Failed to load CPU gemm_4bit_forward from kernels-community: %s.", "No module named 'kernels'")
    target.warning("a real warning: Failed to load CPU")  # the words, but not at the opening
    target.error("Failed to load the GPU kernel")
    assert kept.messages == ["a real warning: Failed to load CPU", "Failed to load the GPU kernel"]


def test_drop_note_twice_adds_one_filter(logger):
    name, target, _ = logger
    drop_note(name, "note")
    drop_note(name, "note")
    drop_note(name, "other note")
    assert [f.opening for f in target.filters] == ["note", "other note"]


def test_note_dropped_only_inside_the_block(logger):
    name, target, kept = logger
    with note_dropped(name, "note"):
        target.warning("note inside")
    target.warning("note after")
    assert kept.messages == ["note after"] and not target.filters


def test_an_empty_opening_is_refused():
    with pytest.raises(ValueError, match="would drop every record"):
        DropNote("")
