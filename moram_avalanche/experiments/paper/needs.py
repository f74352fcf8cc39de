"""What ``reproduce`` checks before anything runs: everything the plan reads, every missing item
named at once (:func:`check_needs`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

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


__all__ = ["check_needs"]
