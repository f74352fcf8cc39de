"""The versions at which a stream's prompts or metric changed, and the gate they make: a run
folder whose record an older version wrote does not resume under the new prompts or scores.

A record's data hashes (``contents``, since 0.6.0) see a changed prompt, not a changed metric, and
a record made before 0.6.0 has none: so the one table :data:`STREAM_CHANGES` (read from
CHANGELOG.md) says when each stream last changed what it asks or how it scores, and
:func:`check_stream_version` refuses a resume of a record older than that. A record says which
version wrote it (``version``, since 0.7.1); one without says less (:func:`record_version`): it
holds data hashes, so 0.6.0 or 0.7.0 wrote it, or none, so a version before 0.6.0 did. A gate
refuses only a record certainly older than it.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, NamedTuple, Optional, Tuple


class StreamChange(NamedTuple):
    """One release that changed a stream's prompts or metric (a line of CHANGELOG.md)."""

    stream: str  # the benchmark's registry name (``--benchmark``)
    version: str
    what: str


#: every change of a stream's prompts or metric, oldest first (CHANGELOG.md)
STREAM_CHANGES: Tuple[StreamChange, ...] = (
    StreamChange("lm-cl", "0.6.0", "O-LoRA's prompts (its Task / Dataset prefix, COPA's own prompt) and its exact "
                                   "match, which keeps the articles"),
    StreamChange("trace", "0.6.0", "the release's scoring (ScienceQA's answer letter, C-STANCE's and FOMC's option "
                                   "letters, NumGLUE's numbers, MeetingBank's ROUGE-L, Py150's similarity, SARI) and "
                                   "its prompt cuts (a causal model keeps a prompt's end)"),
    StreamChange("codealpaca", "0.7.0", "HumanEval's prompts, stop sequences and sampling as bigcode-evaluation-harness "
                                        "has them, and MMLU's prompts as lm-eval writes them"),
)
#: the last version whose records say not which version wrote them
LAST_UNVERSIONED = "0.7.0"
#: the version whose records first hold data hashes (``contents``)
FIRST_WITH_CONTENTS = "0.6.0"


def parse_version(text: str) -> Tuple[int, ...]:
    """``"0.6.0"`` (or ``"0.6"``) as ``(0, 6, 0)`` (a suffix such as ``.dev1`` or ``rc1`` ends the numbers)."""
    numbers = []
    for part in str(text).split("."):
        match = re.match(r"\d+", part)
        if match is None:
            break
        numbers.append(int(match.group()))
        if match.end() < len(part):
            break
    return tuple(numbers + [0] * (3 - len(numbers)))


def record_version(record: Mapping[str, Any]) -> Tuple[Tuple[float, ...], str]:
    """``(newest version that can have written record, how a message names it)`` (module docstring)."""
    version = record.get("version")
    if isinstance(version, str) and version:
        return parse_version(version), version
    if record.get("contents") is not None:
        return parse_version(LAST_UNVERSIONED), f"{LAST_UNVERSIONED} or before"
    return (*parse_version(FIRST_WITH_CONTENTS)[:-1], -1), f"a version before {FIRST_WITH_CONTENTS} (it holds no data hashes)"


def last_change(stream: Optional[str]) -> Optional[StreamChange]:
    """The stream's newest :class:`StreamChange`, or None when none is known."""
    changes = [change for change in STREAM_CHANGES if change.stream == stream]
    return max(changes, key=lambda change: parse_version(change.version)) if changes else None


def check_stream_version(stored: Mapping[str, Any], what: str) -> None:
    """Refuse, in one line, a record an older version wrote than its stream's last change
    (:data:`STREAM_CHANGES`; the stream is the record's ``run.benchmark``)."""
    change = last_change((stored.get("run") or {}).get("benchmark"))
    if change is None:
        return
    written, label = record_version(stored)
    if written < parse_version(change.version):
        raise ValueError(f"{what} was made by moram-avalanche {label}, and --benchmark {change.stream} changed in "
                         f"{change.version} ({change.what}): resumed, its results would mix two versions' prompts "
                         f"or scores; start it again in a new folder (another --log-dir / --out), or over "
                         f"(--no-resume, resume=False)")


__all__ = ["FIRST_WITH_CONTENTS", "LAST_UNVERSIONED", "STREAM_CHANGES", "StreamChange", "check_stream_version",
           "last_change", "parse_version", "record_version"]
