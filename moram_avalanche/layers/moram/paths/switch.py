"""The one switch over MoRAM's paths: ``MORAM_AVALANCHE_PATH``, or :func:`use_path` in Python.

It takes one setting (:data:`SETTINGS`):

* ``auto`` (the default) -- the chooser picks the path per device
  (:func:`~moram_avalanche.layers.moram.paths.choice.path_name`); on the CPU it takes the compiled
  kernel once :func:`~moram_avalanche.layers.moram.paths.cpu_kernel.load` has built it;
* ``no-cpu-kernel`` -- ``auto`` without the compiled CPU kernel: :func:`~.cpu_kernel.load` never
  builds it and a kernel already built is not used (the CPU takes ``reference``; a GPU its own path);
* a path of :data:`PATHS` -- that path, forced, on every device. A forced path that cannot run
  on the tensors it meets is an error that says why, never a silent substitute; ``cpu-kernel``
  also makes :func:`~.cpu_kernel.load` raise when the kernel cannot be built.

``with use_path("dense"): ...`` wins over the variable inside the block. Names are read case-blind,
with ``_`` for ``-``.

Until 0.8 the switch also reads 0.6's ``MORAM_AVALANCHE_KERNEL`` (:data:`KERNEL_VARIABLE`) when
``MORAM_AVALANCHE_PATH`` is not set, with a DeprecationWarning that names the setting to use
instead: ``off`` is ``no-cpu-kernel``, ``on`` is ``cpu-kernel``, ``auto`` is ``auto``. Where both
are set, ``MORAM_AVALANCHE_PATH`` wins and the old variable is ignored (with the same warning).

Pure Python; nothing here imports the paths (they read the switch).
"""

from __future__ import annotations

import contextlib
import os
import warnings
from typing import Iterator, Optional

from ....utils.moved import REMOVED_IN

#: the environment variable of the switch
PATH_VARIABLE = "MORAM_AVALANCHE_PATH"
#: the paths of MoRAM's layer (:mod:`moram_avalanche.layers.moram.paths` describes each)
PATHS = ("reference", "cpu-kernel", "dense", "triton")
#: what the switch takes: ``auto``, ``auto`` without the compiled CPU kernel, or a forced path
SETTINGS = ("auto", "no-cpu-kernel") + PATHS
#: 0.6's variable for the compiled CPU kernel (``auto`` / ``on`` / ``off``), read until 0.8
KERNEL_VARIABLE = "MORAM_AVALANCHE_KERNEL"
#: each value of :data:`KERNEL_VARIABLE` -> the setting of :data:`PATH_VARIABLE` that replaces it
KERNEL_SETTINGS = {"auto": "auto", "on": "cpu-kernel", "off": "no-cpu-kernel"}
_KERNEL_SPELLINGS = {"": "auto", "1": "on", "true": "on", "0": "off", "false": "off"}  # 0.6 took these too

_forced: Optional[str] = None  # set by use_path(); wins over the variables
_warned = set()  # (old value, ignored) pairs already warned about in this process


def check_path(name: str, source: str = "use_path()") -> str:
    """``name`` normalised (lower case, ``_`` as ``-``; empty is ``auto``) if it is one of
    :data:`SETTINGS`; ``source`` says where it was set, for the error."""
    normal = str(name).strip().lower().replace("_", "-") or "auto"
    if normal not in SETTINGS:
        raise ValueError(f"{source}: unknown MoRAM path {name!r}, expected auto or one of {', '.join(PATHS)}, "
                         "or no-cpu-kernel (auto without the compiled CPU kernel)")
    return normal


def requested() -> str:
    """The setting asked for (one of :data:`SETTINGS`): :func:`use_path`'s, else
    :data:`PATH_VARIABLE`'s, else 0.6's :data:`KERNEL_VARIABLE`'s (deprecated), else ``auto``."""
    if _forced is not None:
        return _forced
    raw = os.environ.get(PATH_VARIABLE)
    old = os.environ.get(KERNEL_VARIABLE)
    if old is not None:
        return _read_kernel_variable(old, raw)
    return "auto" if raw is None else check_path(raw, PATH_VARIABLE)


def source() -> str:
    """Who asked for :func:`requested`'s setting, as an error names it: ``use_path('dense')``,
    ``MORAM_AVALANCHE_PATH=dense``, ``MORAM_AVALANCHE_KERNEL=on`` or the default."""
    if _forced is not None:
        return f"use_path({_forced!r})"
    raw = os.environ.get(PATH_VARIABLE)
    if raw is not None and raw.strip():
        return f"{PATH_VARIABLE}={raw}"
    old = os.environ.get(KERNEL_VARIABLE)
    if old is not None:
        return f"{KERNEL_VARIABLE}={old}"
    return f"the default ({PATH_VARIABLE} unset: auto)"


def _read_kernel_variable(old: str, raw: Optional[str]) -> str:
    """The setting when 0.6's :data:`KERNEL_VARIABLE` is ``old`` and :data:`PATH_VARIABLE` is
    ``raw`` (None: unset; when set, it wins), with one DeprecationWarning per value and process."""
    value = old.strip().lower()
    value = _KERNEL_SPELLINGS.get(value, value)
    if value not in KERNEL_SETTINGS:
        raise ValueError(f"{KERNEL_VARIABLE}={old!r}: expected auto, on or off (deprecated: set "
                         f"{PATH_VARIABLE}=auto, cpu-kernel or no-cpu-kernel instead)")
    ignored = raw is not None and bool(raw.strip())
    if (value, ignored) not in _warned:
        _warned.add((value, ignored))
        warnings.warn(f"{KERNEL_VARIABLE} is deprecated and goes in {REMOVED_IN}: {KERNEL_VARIABLE}={value} is "
                      f"{PATH_VARIABLE}={KERNEL_SETTINGS[value]}"
                      + (f"; {PATH_VARIABLE} is set too and wins, so {KERNEL_VARIABLE} is ignored" if ignored else ""),
                      DeprecationWarning, stacklevel=3)
    return check_path(raw, PATH_VARIABLE) if ignored else KERNEL_SETTINGS[value]


@contextlib.contextmanager
def use_path(name: str) -> Iterator[str]:
    """Run every MoRAM layer inside the block with the setting ``name`` (one of :data:`SETTINGS`;
    ``auto`` restores the chooser's pick), whatever the environment says."""
    global _forced
    before, _forced = _forced, check_path(name)
    try:
        yield _forced
    finally:
        _forced = before


__all__ = ["KERNEL_SETTINGS", "KERNEL_VARIABLE", "PATHS", "PATH_VARIABLE", "SETTINGS", "check_path", "requested",
           "source", "use_path"]
