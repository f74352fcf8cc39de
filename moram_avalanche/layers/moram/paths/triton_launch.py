"""A Triton kernel launched by the compiled kernel Triton's own launch chose for it, without redoing that choice.

Triton launches a ``@triton.jit`` kernel (``kernel[grid](*args, **constants)``, ``JITFunction.run``) by
working out, at every call, which compiled kernel the arguments need: the current device and
stream, each argument bound and specialised (a tensor by its dtype and whether its address is
16-byte aligned; an integer by its type -- int32, int64 or uint64 by its value --, whether it is 1
and whether it is divisible by 16), a cache key hashed from them and the options, the kernel's
globals checked, the launch's metadata built for the launch hooks; then it calls the compiled
kernel's launcher. On this project's CPU that is about 120 thousand instructions a launch, more
than the rest of a planned MoRAM eval call (``scripts/bench_call.py --launch dry --instructions``,
with and without ``MORAM_AVALANCHE_TRITON_LAUNCH=triton``), and a GPU's bf16 call of a 768-wide
layer is host-bound (issue "GPU path II", item 1). A kept launch costs about 14 thousand more than
none at all.

:class:`KeptLaunch` makes a kernel's first launch for a specialisation through Triton
(``JITFunction.run``, which compiles it if need be and returns it), keeps the compiled kernel,
and launches it at later calls whose arguments fall in the same class by calling its launcher
itself, with the arguments Triton's launch passes it -- as PyTorch Inductor's generated
launchers do. A call then costs the arguments' class (:func:`class_function`: a dtype and an
address a tensor, an integer's value), the current stream (and device, where the
process sees several GPUs: compiled kernels are a device's), and the launcher.
What it rests on:

* **The same compiled kernel.** The class (:func:`class_function`) is finer than Triton's rules (it
  tells apart every two arguments Triton does, and more): equal classes mean Triton's launch would pick
  the same compiled kernel (the launch's constants and options are the :class:`KeptLaunch`'s own,
  fixed). Arguments of a kind it does not know (a tuple, a tensor descriptor, ...) take Triton's
  launch at every call.
* **The same launch.** The launcher is called as ``JITFunction.run`` calls it in Triton 3.4 to 3.9
  (:data:`VERIFIED`, each compared call for call: ``run(grid_0, grid_1, grid_2, stream, function, packed_metadata,
  launch_metadata, enter_hook, exit_hook, *every parameter's value)``), with ``None`` for the
  metadata and both hooks: Triton passes its hook chains, which call nothing while no hook is
  registered (the launcher skips a ``None`` hook). While a launch hook is registered (a profiler such
  as Triton's proton), every call takes Triton's launch, which builds the metadata the hooks read.
  ``tests/layers/moram/triton_launch_check.py`` records both launches' arguments without a GPU
  (:mod:`moram_avalanche.utils.triton_dry`) and compares them.
* **Read at a specialisation's first launch only**, as Inductor's launchers read them: Triton's
  debug and instrumentation knobs (``TRITON_DEBUG``, ...), which take part in its cache key.
* **A direct launch that raises** (what no check here foresaw) is made again through Triton's own,
  and so is every later launch of the process, with one warning (:func:`_give_up`).

Where it is not used (:func:`kept_or_plain` gives Triton's own launch, ``kernel[grid]`` with the
constants bound): under ``torch.compile`` (the graph keeps a user-defined Triton kernel only as
``kernel[grid](...)``), under Triton's interpreter (``TRITON_INTERPRET=1``: no compiled kernel),
a Triton outside :data:`VERIFIED`, and where ``MORAM_AVALANCHE_TRITON_LAUNCH=triton`` is set
(read at import: every launch through Triton's own, for a comparison or a doubt).
"""

from __future__ import annotations

import functools
import os
import warnings
from typing import Callable, Optional, Tuple

import torch

#: the Triton versions (major, minor) whose launch :class:`KeptLaunch` reproduces: the launcher's
#: call read in each one's ``JITFunction.run``, and compared call for call with each one's own
#: launch (``tests/layers/moram/triton_launch_check.py`` under 3.4.0, 3.5.1, 3.6.0, 3.7.1, 3.8.0
#: and 3.9.0, each wheel installed into a folder put first on ``PYTHONPATH``; the test suite runs it
#: under the pinned one)
VERIFIED = ((3, 4), (3, 5), (3, 6), (3, 7), (3, 8), (3, 9))

#: the environment variable that, set to ``triton`` (read at import), makes every launch Triton's own
SWITCH = "MORAM_AVALANCHE_TRITON_LAUNCH"

_TENSOR = torch.Tensor
_KNOBS = None  # Triton's runtime knobs (its launch hooks), once a launch is kept


def enabled() -> bool:
    """Whether launches may be kept (module docstring): not switched off by :data:`SWITCH`."""
    return _ENABLED


_ENABLED = os.environ.get(SWITCH, "").strip().lower() != "triton"


@functools.lru_cache(maxsize=None)
def _runtime():
    """``(Triton's runtime knobs, its driver configuration)`` where its version is in :data:`VERIFIED`, else None."""
    import triton

    try:
        version = tuple(int(part) for part in triton.__version__.split(".")[:2])
    except ValueError:
        return None
    if version not in VERIFIED:
        return None
    from triton import knobs
    from triton.runtime import driver

    return knobs.runtime, driver


def _give_up(kernel, error: Exception) -> None:
    """After a direct launch raised ``error``: every launch of this process through Triton's own from
    now on (as :data:`SWITCH` makes them), said once in a warning that asks for a report. The launch
    is then made again through Triton (each kernel here writes its outputs whole, reading none of
    them), which raises what it raises if the error was not the kept launch's."""
    global _ENABLED
    if _ENABLED:
        _ENABLED = False
        warnings.warn(f"a kept Triton launch of {kernel!r} raised "
                      f"{type(error).__name__}: {error}; every launch now goes through Triton's own (as "
                      f"{SWITCH}=triton makes them). Please report it, with your Triton and torch versions",
                      RuntimeWarning, stacklevel=3)


def _one_device() -> bool:
    """Whether this process sees at most one CUDA device: its current device is then the one it
    had at a launcher's first launch kept, and no launch asks for it again (Triton's launch asks for it,
    ``torch.cuda.current_device``, at every call)."""
    return torch.cuda.device_count() <= 1


def _idle(hook) -> bool:
    """Whether a launch hook of Triton's calls nothing: None (Triton 3.4), or a hook chain without calls (3.5 on)."""
    return hook is None or not getattr(hook, "calls", True)


def layout_of(args: tuple) -> Optional[str]:
    """The kinds of ``args``, a letter a position: ``t`` a tensor, ``i`` an int, ``o`` a float, a bool or
    None; None where one is of a kind :func:`class_function` does not know (a tuple, a tensor
    descriptor, ...)."""
    kinds = []
    for arg in args:
        kind = type(arg)
        if kind is int:
            kinds.append("i")
        elif kind is float or kind is bool or arg is None:
            kinds.append("o")
        elif isinstance(arg, _TENSOR):
            kinds.append("t")
        else:
            return None
    return "".join(kinds)


@functools.lru_cache(maxsize=256)
def class_function(layout: str) -> Callable:
    """``classes(*args)``: the class of arguments of the kinds ``layout`` gives (:func:`layout_of`), a
    tuple finer than Triton's specialisation, which decides the compiled kernel its launch takes
    (module docstring); it raises AttributeError or TypeError for arguments of other kinds, or
    holds None or another type where an int or another kind was (no class of ``layout`` holds either).

    A tensor: its dtype and its address modulo 16 bytes (Triton: whether that is 0). An int: its
    value (Triton: whether it is 1, whether it is divisible by 16, and whether it fits int32, int64
    or uint64) -- the launches here pass the same sizes and strides call after call, and a value
    is cheaper to read than its class (about a tenth of the instructions); a new value costs one
    launch through Triton, which finds its compiled kernel in its own cache. A float, a bool, None:
    their type alone (Triton specialises none of them). Written out as one expression a position (no
    loop a call), as Triton writes its own binder."""
    parts = []
    for i, kind in enumerate(layout):
        a = f"a{i}"
        if kind == "t":
            parts.append(f"{a}.dtype, {a}.data_ptr() & 15")
        elif kind == "i":
            parts.append(f"({a} if type({a}) is int else None)")  # (a bool is equal to an int: told apart)
        else:
            parts.append(f"type({a})")
    names = ", ".join(f"a{i}" for i in range(len(layout)))
    namespace = {}
    exec(f"def classes({names}):\n    return ({', '.join(parts)}{',' if parts else ''})\n", namespace)
    return namespace["classes"]


def specialization(args: tuple) -> Optional[tuple]:
    """The class of ``args`` (:func:`class_function` of their :func:`layout_of`), or None where an
    argument is of a kind it does not know."""
    layout = layout_of(args)
    return None if layout is None else class_function(layout)(*args)


class KeptLaunch:
    """``kernel[grid](*args, **constants)``: launched by the compiled kernel Triton's launch chose for
    the arguments' class (:func:`specialization`), made through Triton at the class's first call
    (and at every call while a launch hook is registered), directly at the next (module docstring).

    ``grid``: one to three program counts (fixed: a launch rule's); ``constants``: the kernel's
    compile-time constants and Triton's launch options (``num_warps``, ...), by name. It takes
    the kernel's other parameters positionally, in order, as ``kernel[grid]`` would."""

    __slots__ = ("kernel", "grid", "constants", "grid_3", "compiled", "tail", "device", "stream", "layout", "classes")

    def __init__(self, kernel, grid: Tuple[int, ...], constants: dict):
        self.kernel, self.grid, self.constants = kernel, tuple(grid), dict(constants)
        self.grid_3 = (*self.grid, 1, 1)[:3]
        self.compiled = {}  # class of arguments ((device, class) with several GPUs) -> (compiled kernel, its
        #                     launcher, function, packed metadata)
        self.tail = None  # the values of the parameters after the positional ones (constants, defaults)
        self.device = self.stream = None  # the current device's index (one GPU) or Triton's driver's getter of
        #                                   it, and its getter of the current stream (at the first launch kept)
        self.layout = self.classes = None  # the kept arguments' kinds (layout_of) and their class_function

    def __call__(self, *args):
        classes = self.classes
        if (classes is not None and _ENABLED and _idle(_KNOBS.launch_enter_hook)
                and _idle(_KNOBS.launch_exit_hook)):
            try:
                key = classes(*args)
            except (AttributeError, TypeError):  # (arguments of other kinds than the kept ones: Triton's launch)
                key = None
            device = self.device  # (the device's index where this process sees one; else the driver's getter)
            if type(device) is not int:
                device = device()
                key = (device, key)
            found = self.compiled.get(key)
            if found is not None:
                _, launcher, function, metadata = found
                grid_0, grid_1, grid_2 = self.grid_3
                try:
                    launcher(grid_0, grid_1, grid_2, self.stream(device), function, metadata, None, None, None,
                             *args, *self.tail)
                except Exception as error:  # (a launch Triton's own would have made: it makes it, from now on)
                    _give_up(self.kernel, error)
                    return self.through_triton(args)
                return None
        return self.through_triton(args)

    def __copy__(self) -> "KeptLaunch":
        """A launcher of the same kernel, grid and constants that keeps nothing yet: a compiled
        kernel unloads its GPU module when it is freed, so no copy of one is ever made (nor pickled:
        :meth:`__reduce__`); the copy keeps its own at its first launches."""
        return KeptLaunch(self.kernel, self.grid, self.constants)

    def __deepcopy__(self, memo) -> "KeptLaunch":
        return self.__copy__()

    def __reduce__(self):
        return KeptLaunch, (self.kernel, self.grid, self.constants)

    def through_triton(self, args: tuple):
        """Triton's own launch (``JITFunction.run``), its compiled kernel kept for the arguments'
        class where a later call may take it directly: nothing hooked, a class known, the
        parameters' values all given."""
        compiled = self.kernel.run(*args, grid=self.grid, warmup=False, **self.constants)
        knobs, driver = _runtime()
        if not _ENABLED or not hasattr(compiled, "packed_metadata") or not (_idle(knobs.launch_enter_hook)
                                                            and _idle(knobs.launch_exit_hook)):
            return compiled  # (None: a compile hook took it; a future: compiled asynchronously, not kept)
        layout = layout_of(args)
        if layout is None or self.layout not in (None, layout) or self.tail_of(len(args)) is None:
            return compiled
        if self.classes is None:  # (the first kept: the arguments' kinds, the driver's device and stream)
            global _KNOBS
            _KNOBS = knobs
            current = driver.active.get_current_device
            self.device = current() if _one_device() else current
            self.stream = driver.active.get_current_stream
            self.layout, self.classes = layout, class_function(layout)
        if len(self.compiled) >= 64:  # (a kernel whose arguments' class keeps changing: start again)
            self.compiled.clear()
        key = self.classes(*args)
        if type(self.device) is not int:
            key = (self.device(), key)
        self.compiled[key] = (compiled, compiled.run, compiled.function, compiled.packed_metadata)
        return compiled

    def tail_of(self, given: int) -> Optional[tuple]:
        """The values ``JITFunction.run`` passes after ``given`` positional arguments: each later
        parameter's constant, or its default; None where one has neither (Triton's launch then
        raises, and nothing is kept)."""
        if self.tail is None:
            tail = []
            for param in self.kernel.params[given:]:
                name = param.name
                if name in self.constants:
                    tail.append(self.constants[name])
                elif param.has_default:
                    tail.append(param.default)
                else:
                    return None
            self.tail = tuple(tail)
        return self.tail


def keepable(kernel) -> bool:
    """Whether launches of ``kernel`` may be kept (module docstring): a Triton JIT function (not the
    interpreter's), a Triton of :data:`VERIFIED`, not switched off, not inside ``torch.compile``."""
    if not _ENABLED or torch.compiler.is_compiling():
        return False
    from triton.runtime.jit import JITFunction

    return isinstance(kernel, JITFunction) and _runtime() is not None


def kept_or_plain(kernel, grid: Tuple[int, ...], **constants) -> Callable:
    """The launcher of ``kernel`` on ``grid`` with ``constants`` bound: a :class:`KeptLaunch` where
    :func:`keepable`, else Triton's own (``functools.partial(kernel[grid], **constants)``)."""
    if keepable(kernel):
        return KeptLaunch(kernel, grid, constants)
    return functools.partial(kernel[grid], **constants)


__all__ = ["KeptLaunch", "SWITCH", "VERIFIED", "class_function", "enabled", "keepable", "kept_or_plain", "layout_of",
           "specialization"]
