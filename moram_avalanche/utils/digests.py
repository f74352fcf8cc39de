"""One short hash of a sequence of parts: what every fingerprint of the package is made of (a
dataset's, :mod:`moram_avalanche.benchmarks.fingerprint`; a model's weights and files,
:mod:`moram_avalanche.experiments.fingerprints`)."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Iterable

#: characters of a recorded hash (hex of SHA-256: 64 bits, plenty to tell two data sets or models apart)
HASH_CHARS = 16


def digest(parts: Iterable[Any]) -> str:
    """A short hex SHA-256 of ``parts`` (JSON-able values, or bytes-like objects: bytes, a
    memoryview, a NumPy array's buffer), in order, each followed by a separator."""
    sha = hashlib.sha256()
    for part in parts:
        sha.update(part if isinstance(part, (bytes, bytearray, memoryview))
                   else json.dumps(part, ensure_ascii=False).encode("utf-8"))
        sha.update(b"\x1e")
    return sha.hexdigest()[:HASH_CHARS]


__all__ = ["HASH_CHARS", "digest"]
