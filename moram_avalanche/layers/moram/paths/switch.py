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

``with use_path("dense"): ...`` wins over the variable inside the block, in the thread (and the
``asyncio`` task) that entered it only: the forced setting is a :class:`~contextvars.ContextVar`.
Names are read case-blind, with ``_`` for ``-``.

Read once per choice, not per call: a layer keeps the path it chose (and its bank's rows) until
:func:`token` changes. The token is the block's own object inside ``use_path`` (each entry a new
one) and otherwise one object for the environment, replaced whenever Python code sets or unsets
:data:`PATH_VARIABLE` or :data:`KERNEL_VARIABLE` (``os.environ[...] = ...``, ``monkeypatch.setenv``:
an audit hook on ``os.putenv`` / ``os.unsetenv``, :pep:`578`) or calls :func:`changed` (the compiled
CPU kernel does, once built). The hot call compares one object; it never reads ``os.environ``.

Under ``torch.compile`` the setting is read from :data:`_forced_anywhere`, a plain global that each
``use_path`` block sets too (:func:`traced_token`, :func:`forced_now`): torch 2.11's Dynamo (the
GPU image's torch) cannot trace ``ContextVar.get`` ("Unsupported method call": a graph break, and an
error under ``fullgraph=True``; torch 2.15's can, the versions between are not checked), and every
Dynamo guards a global. A graph traced inside a block takes that block's setting, and is traced
again outside it. The one difference from eager: a trace in a thread outside every block while
another thread is inside one takes the other thread's setting (the innermost block entered last).

Until 0.8 the switch also reads 0.6's ``MORAM_AVALANCHE_KERNEL`` (:data:`KERNEL_VARIABLE`) when
``MORAM_AVALANCHE_PATH`` is not set, with a DeprecationWarning that names the setting to use
instead: ``off`` is ``no-cpu-kernel``, ``on`` is ``cpu-kernel``, ``auto`` is ``auto``. Where both
are set, ``MORAM_AVALANCHE_PATH`` wins and the old variable is ignored (with the same warning).

Python and ``torch.compiler.is_compiling``; nothing here imports the paths (they read the switch).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
import threading
import warnings
from typing import Iterator, Optional

import torch

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

_warned = set()  # (old value, ignored) pairs already warned about in this process


class Forced:
    """A setting forced by one entry of :func:`use_path` (each entry its own object): ``name``, one of
    :data:`SETTINGS`. (Not a ``str`` subclass: torch 2.11's Dynamo cannot trace ``str()`` of one.)"""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Forced({self.name!r})"


#: the setting use_path() forced in this thread / task (wins over the variables), or None
_forced: contextvars.ContextVar = contextvars.ContextVar("moram_avalanche_path", default=None)
#: the setting of the innermost use_path() block entered last in any thread, or None: what a
#: ``torch.compile`` trace reads (module docstring)
_forced_anywhere: Optional[Forced] = None
_open_blocks: list = []  # the use_path() blocks open in every thread, in the order entered
_blocks_lock = threading.Lock()


class Environment:
    """The token of the environment's setting (:func:`token`): a new object after each change."""

    __slots__ = ()


_environment = Environment()


def changed() -> None:
    """Say that what the chooser reads has changed (the variables, the compiled kernel's build):
    every layer chooses its path again at its next call."""
    global _environment
    _environment = Environment()


def token():
    """What a layer's cached choice was made under: the ``use_path`` block's object, else the
    environment's (module docstring). Cheap: no ``os.environ`` read. Eager only: a
    ``torch.compile`` trace reads :func:`traced_token`."""
    return _forced.get() or _environment


def traced_token():
    """:func:`token` for a ``torch.compile`` trace: the innermost ``use_path`` block's object entered
    last in any thread, else the environment's (a global, which Dynamo guards; module docstring)."""
    return _forced_anywhere or _environment


def forced_now() -> Optional[Forced]:
    """The setting ``use_path`` forces here, or None: this thread's block, or under ``torch.compile``
    the innermost block entered last in any thread (module docstring)."""
    return _forced_anywhere if torch.compiler.is_compiling() else _forced.get()


_WATCHED = frozenset(name.encode() for name in (PATH_VARIABLE, KERNEL_VARIABLE)) | {PATH_VARIABLE, KERNEL_VARIABLE}


def _audit(event: str, args) -> None:
    """Replace the environment's token when one of the switch's variables is set or unset."""
    if (event == "os.putenv" or event == "os.unsetenv") and args and args[0] in _WATCHED:
        changed()


sys.addaudithook(_audit)


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
    forced = forced_now()
    if forced is not None:
        return forced.name
    raw = os.environ.get(PATH_VARIABLE)
    old = os.environ.get(KERNEL_VARIABLE)
    if old is not None:
        return _read_kernel_variable(old, raw)
    return "auto" if raw is None else check_path(raw, PATH_VARIABLE)


def source() -> str:
    """Who asked for :func:`requested`'s setting, as an error names it: ``use_path('dense')``,
    ``MORAM_AVALANCHE_PATH=dense``, ``MORAM_AVALANCHE_KERNEL=on`` or the default."""
    forced = forced_now()
    if forced is not None:
        return f"use_path({forced.name!r})"
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
    ``auto`` restores the chooser's pick), whatever the environment says: in this thread (and
    ``asyncio`` task) only; other threads keep theirs. Layers choose again inside the block and
    after it."""
    forced = Forced(check_path(name))
    reset = _forced.set(forced)
    _open_block(forced)
    try:
        yield forced.name
    finally:
        try:
            _forced.reset(reset)
        finally:
            _close_block(forced)


def _open_block(forced: Forced) -> None:
    """Count ``forced`` among the open blocks of every thread; :data:`_forced_anywhere` is the last entered."""
    global _forced_anywhere
    with _blocks_lock:
        _open_blocks.append(forced)
        _forced_anywhere = forced


def _close_block(forced: Forced) -> None:
    """``forced``'s block has ended (found by identity: two blocks of one setting are two objects)."""
    global _forced_anywhere
    with _blocks_lock:
        for index in range(len(_open_blocks) - 1, -1, -1):
            if _open_blocks[index] is forced:
                del _open_blocks[index]
                break
        _forced_anywhere = _open_blocks[-1] if _open_blocks else None


__all__ = ["Environment", "Forced", "KERNEL_SETTINGS", "KERNEL_VARIABLE", "PATHS", "PATH_VARIABLE", "SETTINGS",
           "changed", "check_path", "forced_now", "requested", "source", "token", "traced_token", "use_path"]
