"""RunFolder: a run's folder, checked once, owned by one process, its record compared once.

Every way into a run -- ``run --log-dir``, each ``OUT/<strategy>`` of ``compare``, the demo and
``reproduce``, :func:`~moram_avalanche.experiments.runner.run_stream` from Python -- goes
through one :class:`RunFolder`:

* the path is checked when the object is made (:func:`~moram_avalanche.utils.paths.check_run_path`:
  writable, not a file, neither a data root nor inside or around one), under the name the user
  gave it (``--log-dir``, ``out_dir``);
* one process owns it while it runs (:meth:`RunFolder.owned`, a
  :class:`~moram_avalanche.utils.lock.RunFolderLock`; a second one is refused, naming the first);
* its record (:mod:`~moram_avalanche.experiments.record`) is compared with the run's when it
  holds results (:meth:`RunFolder.compare`): the parts known before the strategy is built, before
  anything is written (so a folder of another run is refused at once, before the lock file is
  made), and the whole record again once the folder is owned (what another process may have
  written meanwhile);
* a run that starts over removes the files a run writes (:data:`RUN_FILES`, and those the
  strategy's plugins add: their ``run_files``); what interrupted writes left is cleared.
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional

from ..utils.files import remove_temporaries
from ..utils.lock import RunFolderLock
from ..utils.paths import check_run_path
from .checkpoint import previous_path
from .record import CHECKED, LEGACY_SETTINGS_NAME, RECORD_NAME, check_record, write_record

logger = logging.getLogger(__name__)

CHECKPOINT_NAME = "checkpoint.pt"
BAD_IMAGES_NAME = "bad_images.jsonl"
#: what every run writes in its folder (removed when it starts over; a strategy's plugins add theirs)
RUN_FILES = (CHECKPOINT_NAME, "checkpoint.prev.pt", BAD_IMAGES_NAME, RECORD_NAME, LEGACY_SETTINGS_NAME, "results.json",
             "accuracy_matrix.csv", "accuracy_matrix.png", "memory.json", "time.json")
#: what a refused resume advises by default
RESUME_FIX = ("resume it with the settings it was made with, give another folder, or start it over "
              "(--no-resume, resume=False)")


def holds_results(out_dir) -> bool:
    """Whether ``out_dir`` holds a run's results (a checkpoint or ``results.json``)."""
    out_dir = Path(out_dir)
    return any((out_dir / name).exists() for name in
               (CHECKPOINT_NAME, previous_path(out_dir / CHECKPOINT_NAME).name, "results.json"))


class RunFolder:
    """A run's folder (module docstring).

    Args:
        path: the folder (created when the run starts).
        what: how the user named it, for messages (``"--log-dir"``, ``"out_dir"``).
        data_roots: folders that hold data, which the run folder may not be, hold or lie inside.
    """

    def __init__(self, path, what: str = "out_dir", *, data_roots: Iterable = ()) -> None:
        self.path: Path = check_run_path(path, what, data_roots=data_roots)
        self.what = what
        self._lock: Optional[RunFolderLock] = None

    def __fspath__(self) -> str:
        return str(self.path)

    def __truediv__(self, name) -> Path:
        return self.path / name

    def __repr__(self) -> str:
        return f"RunFolder({str(self.path)!r})"

    def holds_results(self) -> bool:
        return holds_results(self.path)

    def compare(self, record: Mapping[str, Any], keys: Iterable[str] = CHECKED, *, what: Optional[str] = None,
                fix: Optional[str] = None) -> None:
        """Refuse to resume when the folder holds a run whose record differs from ``record`` in the
        parts ``keys``: a ValueError listing the differences and the ways out (``fix``). A folder
        without results (nothing to lose) is never refused."""
        if self.holds_results():
            check_record(self.path, record, keys=keys, what=what or f"the run in {self.path}", fix=fix or RESUME_FIX)

    @contextlib.contextmanager
    def owned(self, main: bool = True):
        """Own the folder inside the block (the main process of a data-parallel run takes the lock;
        a block inside another of the same folder keeps the outer one's)."""
        if self._lock is not None or not main:
            yield self
            return
        self._lock = RunFolderLock(self.path, "the run folder").acquire()
        try:
            yield self
        finally:
            self._lock.release()
            self._lock = None

    def start(self, resume: bool, files: Iterable[str] = ()) -> None:
        """Make the folder, clear what interrupted writes left and, unless ``resume``, remove the
        files of the run it held (:data:`RUN_FILES` and ``files``, the plugins' own)."""
        self.path.mkdir(parents=True, exist_ok=True)
        removed = remove_temporaries(self.path)
        if removed:
            logger.info("removed %d temporary file(s) of interrupted writes in %s",
                                             len(removed), self.path)
        if not resume:
            for name in (*RUN_FILES, *files):
                (self.path / name).unlink(missing_ok=True)

    def write_record(self, record: Mapping[str, Any]) -> Path:
        """Write the folder's record (:func:`~moram_avalanche.experiments.record.write_record`)."""
        return write_record(self.path, record)


def run_folder(path, what: str = "out_dir") -> RunFolder:
    """``path`` as a :class:`RunFolder` (one already made is used as it is)."""
    return path if isinstance(path, RunFolder) else RunFolder(path, what)


__all__ = ["BAD_IMAGES_NAME", "CHECKPOINT_NAME", "RESUME_FIX", "RUN_FILES", "RunFolder", "holds_results", "run_folder"]
