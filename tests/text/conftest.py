"""The text room's command-line tests share one tiny T5 folder, written with ``save_pretrained``."""

import pytest

from text_processes import ORDER
from tiny_stream import FAMILIES, stream_tokenizer


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory):
    """A tiny T5 and its tokenizer written with ``save_pretrained`` (what users pass as --model)."""
    folder = tmp_path_factory.mktemp("tiny-t5")
    tokenizer = stream_tokenizer(ORDER)
    FAMILIES["t5"](tokenizer).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
