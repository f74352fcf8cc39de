"""What ``reproduce`` checks on disk: before anything runs, everything the plan reads, every missing
item named at once (:func:`check_needs`); in the plan, what of the data a data root holds
(:func:`data_status`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from ...utils.paths import folder_status
from .runs import PlannedRun


def check_needs(specs: Sequence[Any], settings, planned: Sequence[PlannedRun]) -> None:
    """Raise one ValueError naming everything ``planned`` needs that is not on disk (the data
    under ``--data-root``, the model's files: the settings' family says what); nothing has run."""
    if settings.data_root is None:
        raise ValueError(f"reproduce needs {settings.data_wanted}: give --data-root DIR ({settings.data_sources}or "
                         "--paper for the paper's numbers alone, --dry-run for the plan)")
    root = Path(settings.data_root).expanduser()
    if not root.is_dir():
        raise ValueError(f"--data-root {root} is not a folder")
    problems = list(dict.fromkeys(settings.problems(specs, planned)))
    if problems:
        raise ValueError(
            f"cannot reproduce {', '.join(s.name for s in specs)}: {len(problems)} thing(s) missing; "
            "nothing was run.\n  " + "\n  ".join(problems) + settings.needs_hint(specs, root))


def data_status(data_root: Optional[str], reports: Callable[[], Sequence[Any]], unit: str = "", hint: str = "") -> str:
    """What ``data_root`` holds, in words: ``MISSING, <why>`` when it is not a folder, ``not checked``
    without one, else how many of ``reports()`` (``check-data``'s, one per domain or task ``unit``)
    are usable, the missing ones named, then ``hint``."""
    problem = folder_status(data_root)
    if problem:
        return f"MISSING, {problem}"
    if data_root is None:
        return "not checked (no --data-root given)"
    found = list(reports())
    missing = [f"{r.name} ({r.status})" for r in found if not r.usable]
    return (f"{len(found) - len(missing)} of {len(found)} {unit}found"
            + (f"; MISSING: {', '.join(missing)}" if missing else "") + hint)


__all__ = ["check_needs", "data_status"]
