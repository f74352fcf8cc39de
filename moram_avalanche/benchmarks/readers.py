"""Parsers for the on-disk formats of the X-TAIL and MTIL datasets, the one decoder of every
dataset reader's JSON and JSON lines (:func:`read_text`, :func:`read_json`, :func:`read_json_lines`),
and their one error type.

Every problem with a dataset on disk is a :class:`DataError` naming the domain, the file or
folder that was expected, the layout that is understood, and how to obtain what is missing;
``check-data`` prints the same messages that the stream builders raise.
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import numpy as np

COOP_DATASETS_MD = "https://github.com/KaiyangZhou/CoOp/blob/main/DATASETS.md"


class DataError(ValueError):
    """A domain's files are missing (``status="missing"``) or unreadable (``"malformed"``)."""

    def __init__(self, domain: str, problem: str, *, status: str = "missing", expected: str = "",
                 layout: str = "", fix: str = "") -> None:
        self.domain, self.problem, self.status = domain, problem, status
        self.expected, self.layout, self.fix = expected, layout, fix
        lines = [f"{domain}: {problem}"]
        lines += [f"  {label:<9} {text}" for label, text in
                  (("expected:", expected), ("layout:", layout), ("fix:", fix)) if text]
        super().__init__("\n".join(lines))


def malformed(where: dict, problem: str, **details) -> DataError:
    """A "malformed" :class:`DataError` for the domain / layout / fix in ``where``."""
    return DataError(where["domain"], problem, status="malformed", layout=where["layout"],
                     fix=where["fix"], **details)


class UnreadableJSON(ValueError):
    """A JSON file that cannot be read or parsed; the message names the file (and the line and
    column of a syntax error)."""


#: the first two bytes of gzip data (RFC 1952, section 2.3.1: ID1 ID2)
GZIP_MAGIC = b"\x1f\x8b"


def _first_byte(data: bytes) -> str:
    """The first byte of ``data`` in words: the character when it is printable ASCII, else its value."""
    if not data:
        return "nothing (the file is empty)"
    return repr(chr(data[0])) if 32 <= data[0] < 127 else f"the byte 0x{data[0]:02x}"


def read_text(path: Path) -> str:
    """The text of a UTF-8 data file, gunzipped when its name ends in ``.gz``; a UTF-8 byte order
    mark is allowed (``utf-8-sig``, as Windows editors write it). An :class:`UnreadableJSON` naming
    the file otherwise: unreadable, a ``.gz`` that is not gzip data (saying what it starts with) or
    is cut short, text that is not UTF-8. The one decoder of the dataset readers' JSON and JSON lines."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as error:
        raise UnreadableJSON(f"cannot read {path}: {error}") from None
    if path.name.endswith(".gz"):
        if not data.startswith(GZIP_MAGIC):
            raise UnreadableJSON(f"{path} is not gzip data: it starts with {_first_byte(data)}; rename it to "
                                 f"{path.name[:-3]} or gzip it")
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as error:
            raise UnreadableJSON(f"{path} is not whole gzip data ({error}): an interrupted copy? fetch it "
                                 "again") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise UnreadableJSON(f"{path} is not UTF-8 text ({error}): save it as UTF-8") from None


def read_json(path: Path):
    """The JSON value held by ``path`` (:func:`read_text`: a UTF-8 byte order mark is allowed, as
    Windows editors write it); an :class:`UnreadableJSON` naming the file otherwise: an unreadable
    file, a syntax error (with its line and column), nesting deeper than Python's reader allows, an
    integer longer than Python converts. The one JSON reader of the dataset readers."""
    text = read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise UnreadableJSON(f"bad JSON in {path} at line {error.lineno}, column {error.colno}: {error.msg}") from None
    except RecursionError:
        raise UnreadableJSON(f"bad JSON in {path}: nested deeper than Python's JSON reader allows") from None
    except ValueError as error:  # e.g. an integer of more than 4300 digits
        raise UnreadableJSON(f"bad JSON in {path}: {error}") from None


def read_json_lines(path: Path) -> List[Tuple[int, object]]:
    """``(line number, JSON value)`` of every non-blank line of a JSON-lines file (``.jsonl``, or
    ``.jsonl.gz``: :func:`read_text`, so a byte order mark is allowed and a ``.gz`` that is not gzip
    is named); an :class:`UnreadableJSON` naming the file and the line of a line that is not JSON.
    The one JSON-lines reader of the dataset readers."""
    values = []
    for number, line in enumerate(read_text(path).split("\n"), 1):  # not splitlines: U+2028 is JSON text
        if not line.strip():
            continue
        try:
            values.append((number, json.loads(line)))
        except (json.JSONDecodeError, RecursionError, ValueError) as error:
            raise UnreadableJSON(f"{path} line {number} is not JSON ({error}); expected one JSON value per "
                                 "line") from None
    return values


def find_dir(root: Path, candidates: Sequence[str], *, domain: str, layout: str, fix: str) -> Path:
    """The first of ``root/candidate`` that is a folder (the spellings the reference code and
    READMEs use for the same dataset); a "missing" :class:`DataError` listing all of them."""
    for candidate in candidates:
        if (root / candidate).is_dir():
            return root / candidate
    raise DataError(domain, f"no dataset folder under {root}", status="missing",
                    expected=" or ".join(str(root / c) for c in candidates), layout=layout, fix=fix)


def require(path: Path, *, domain: str, layout: str, fix: str, what: str = "file") -> Path:
    """``path`` if it exists, else a "malformed" :class:`DataError` (the folder was found)."""
    if not path.exists():
        raise DataError(domain, f"missing {what} {path}", status="malformed", expected=str(path),
                        layout=layout, fix=fix)
    return path


def read_coop_split(path: Path, *, domain: str, layout: str, fix: str
                    ) -> Tuple[Dict[str, List[Tuple[str, int]]], Tuple[str, ...]]:
    """A CoOp ``split_zhou_*.json``: ``{"train"|"val"|"test": [[relpath, label, classname], ...]}``.

    Returns ``({split: [(relpath, label), ...]}, classnames)`` with the class names taken from
    the train items, sorted by label [MoRAM XTAIL/scenario_datasets/utils.py read_split,
    get_lab2cname; CoOp datasets/oxford_pets.py save_split].
    """
    require(path, domain=domain, layout=layout, fix=fix, what="split file")

    def bad(problem):
        return DataError(domain, f"malformed split file {path}: {problem}", status="malformed",
                         expected='{"train": [[relpath, label, classname], ...], "val": [...], '
                                  '"test": [...]} with labels 0..C-1',
                         layout=layout, fix=fix)

    try:
        raw = read_json(path)
    except UnreadableJSON as error:
        raise bad(f"not readable JSON ({error})") from None
    if not isinstance(raw, dict) or not {"train", "test"} <= set(raw):
        raise bad(f"needs the keys 'train' and 'test', found {sorted(raw) if isinstance(raw, dict) else type(raw).__name__}")
    splits: Dict[str, List[Tuple[str, int]]] = {}
    names: Dict[int, str] = {}
    for split in ("train", "val", "test"):
        items = raw.get(split, [])
        if not isinstance(items, list):
            raise bad(f"'{split}' is a {type(items).__name__}, not a list")
        rows = []
        for i, item in enumerate(items):
            if (not isinstance(item, (list, tuple)) or len(item) != 3 or not isinstance(item[0], str)
                    or isinstance(item[1], bool) or not isinstance(item[1], int)
                    or not isinstance(item[2], str)):
                raise bad(f"item {i} of '{split}' is {str(item)[:80]}, not [relpath, label, classname]")
            rows.append((item[0], item[1]))
            if split == "train":
                if names.setdefault(item[1], item[2]) != item[2]:
                    raise bad(f"label {item[1]} is named both {names[item[1]]!r} and {item[2]!r}")
        splits[split] = rows
    if not splits["train"] or not splits["test"]:
        raise bad("'train' and 'test' must not be empty")
    if sorted(names) != list(range(len(names))):
        raise bad(f"train labels must be 0..C-1, found {sorted(names)[:5]}...")
    stray = {label for _, label in splits["test"]} - set(names)
    if stray:
        raise bad(f"test labels {sorted(stray)[:5]} do not occur in 'train'")
    return splits, tuple(names[i] for i in range(len(names)))


def read_lines(path: Path, *, domain: str, layout: str, fix: str) -> List[str]:
    """The non-empty lines of a text file (stripped)."""
    require(path, domain=domain, layout=layout, fix=fix)
    try:
        return [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, UnicodeDecodeError) as error:
        raise DataError(domain, f"cannot read {path}: {error}", status="malformed",
                        layout=layout, fix=fix) from None


def load_mat(path: Path, keys: Sequence[str], *, domain: str, layout: str, fix: str) -> dict:
    """A MATLAB ``.mat`` file (scipy) that must hold ``keys``."""
    from scipy.io import loadmat
    from scipy.io.matlab import MatReadError

    require(path, domain=domain, layout=layout, fix=fix)
    try:
        data = loadmat(str(path), squeeze_me=True)
    except (OSError, ValueError, TypeError, MatReadError) as error:
        raise DataError(domain, f"cannot read {path}: {error}", status="malformed",
                        layout=layout, fix=fix) from None
    missing = [k for k in keys if k not in data]
    if missing:
        raise DataError(domain, f"{path} lacks the field(s) {missing}", status="malformed",
                        expected=f"a .mat file with {list(keys)}", layout=layout, fix=fix)
    return data


_IDX_MAGIC = {2049: 1, 2051: 3}  # labels (1-D), images (3-D) [LeCun's MNIST page]


def read_idx(path: Path, *, domain: str, layout: str, fix: str) -> np.ndarray:
    """An uncompressed IDX file (MNIST) as a read-only ``numpy.memmap`` (nothing loaded)."""
    require(path, domain=domain, layout=layout, fix=fix)
    with open(path, "rb") as f:
        header = f.read(4)
        magic = int.from_bytes(header, "big") if len(header) == 4 else -1
        ndim = _IDX_MAGIC.get(magic)
        if ndim is None:
            raise DataError(domain, f"{path} is not an uncompressed IDX file (magic {magic})",
                            status="malformed", expected="magic 2049 (labels) or 2051 (images)",
                            layout=layout, fix=fix + " (gunzip the downloaded *.gz files)")
        shape = tuple(int.from_bytes(f.read(4), "big") for _ in range(ndim))
    offset = 4 + 4 * ndim
    if os.path.getsize(path) != offset + int(np.prod(shape)):
        raise DataError(domain, f"{path} is truncated: header says {shape}", status="malformed",
                        layout=layout, fix=fix)
    return np.memmap(path, dtype=np.uint8, mode="r", offset=offset, shape=shape)


def zscl_random_split(n: int, ratio: float = 0.8, seed: int = 42) -> Tuple[List[int], List[int]]:
    """The 80/20 train/test split ZSCL makes where a dataset has no official one (Caltech101,
    EuroSAT, SUN397): ``torch.utils.data.random_split(range(n), [int(0.8 n), n - int(0.8 n)],
    generator=torch.Generator().manual_seed(42))`` [ZSCL mtil/src/datasets/collections.py
    split_dataset], reproduced index for index."""
    import torch

    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist()
    cut = int(ratio * n)
    return order[:cut], order[cut:]


__all__ = ["COOP_DATASETS_MD", "DataError", "GZIP_MAGIC", "UnreadableJSON", "find_dir", "load_mat", "malformed",
           "read_coop_split", "read_idx", "read_json", "read_json_lines", "read_lines", "read_text", "require",
           "zscl_random_split"]
