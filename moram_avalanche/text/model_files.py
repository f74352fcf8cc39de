"""A language model's files besides its weights, as short hashes: ``config.json``, the tokenizer's
files and ``generation_config.json``, what a resumed run compares with what its record says it
read (:mod:`moram_avalanche.experiments.fingerprints`).

Each is the hash of the files' names and bytes (:func:`~moram_avalanche.utils.digests.digest`),
read from the folder ``from_pretrained`` was given or, for a Hub name, its snapshot in the
Hugging Face cache (:func:`~moram_avalanche.text.check.cached_folder`): an edited ``config.json``,
two ids swapped in ``tokenizer.json`` or a ``generation_config.json`` added, edited or removed
is seen. The bytes are hashed, not the objects ``transformers`` builds from them, so that another
version of ``transformers`` (which adds fields to a config object) finds the same folder the same.
A model built in memory (no folder) has no file hashes: its files are not compared.
"""

from __future__ import annotations

from pathlib import Path
from typing import Dict, Iterable, Optional

from ..utils.digests import digest

CONFIG_NAME = "config.json"
GENERATION_CONFIG_NAME = "generation_config.json"
#: the files a tokenizer of ``transformers`` reads besides those its class names
#: (``vocab_files_names``: T5's ``spiece.model``, LLaMA's ``tokenizer.model``, GPT-2's
#: ``vocab.json`` / ``merges.txt``)
TOKENIZER_NAMES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json",
                   "chat_template.jinja")
#: the hash recorded for files a folder does not hold (their absence is compared too)
ABSENT = "absent"


def source_folder(name_or_path) -> Optional[Path]:
    """The folder ``name_or_path`` was loaded from: itself when it is a folder, else the Hub
    name's snapshot in the local cache, else None."""
    if not name_or_path:
        return None
    path = Path(str(name_or_path)).expanduser()
    if path.is_dir():
        return path
    from .check import cached_folder

    return cached_folder(str(name_or_path))


def files_hash(folder: Path, names: Iterable[str]) -> str:
    """The hash of the files ``names`` of ``folder`` that exist (each file's name and bytes, in
    name order), or :data:`ABSENT` when none does."""
    found = [name for name in sorted(set(names)) if (folder / name).is_file()]
    if not found:
        return ABSENT
    return digest(part for name in found for part in (name, (folder / name).read_bytes()))


def tokenizer_names(tokenizer) -> tuple:
    """The file names ``tokenizer`` may have been read from (:data:`TOKENIZER_NAMES` and its class's)."""
    return (*TOKENIZER_NAMES, *dict(getattr(tokenizer, "vocab_files_names", None) or {}).values())


def language_model_files(model, tokenizer) -> Dict[str, str]:
    """``{"config": hash, "generation_config": hash, "tokenizer": hash}`` of the folders ``model``
    and ``tokenizer`` were loaded from (their ``name_or_path``; module docstring); a part whose
    folder is not known is left out (not compared)."""
    hashes = {}
    folder = source_folder(getattr(model, "name_or_path", None))
    if folder is not None:
        hashes["config"] = files_hash(folder, [CONFIG_NAME])
        hashes["generation_config"] = files_hash(folder, [GENERATION_CONFIG_NAME])
    folder = source_folder(getattr(tokenizer, "name_or_path", None))
    if folder is not None:
        hashes["tokenizer"] = files_hash(folder, tokenizer_names(tokenizer))
    return hashes


__all__ = ["ABSENT", "CONFIG_NAME", "GENERATION_CONFIG_NAME", "TOKENIZER_NAMES", "files_hash", "language_model_files",
           "source_folder", "tokenizer_names"]
