"""Run a function once a module has been imported, whenever that happens (before or after this call).

Used by the package's ``__init__`` to register MoRAM with peft as soon as both are imported, in
either order: peft keeps its methods in plain dictionaries and has no plugin registry, so a saved
MoRAM adapter loads through ``PeftModel.from_pretrained`` only once ``"MORAM"`` is in them.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
import warnings
from typing import Callable


class _ThenRun(importlib.abc.Loader):
    """A module's own loader, then ``then(module)``; everything else is the loader's."""

    def __init__(self, loader, then: Callable) -> None:
        self.loader = loader
        self.then = then

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        self.loader.exec_module(module)
        self.then(module)

    def __getattr__(self, name):  # is_package, get_data, get_resource_reader, ...
        return getattr(self.loader, name)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Finds ``name`` as the other finders do, with a loader that calls ``then`` after it ran; once."""

    def __init__(self, name: str, then: Callable) -> None:
        self.name = name
        self.then = then

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name:
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)  # once; and the search below must not find this finder again
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            spec.loader = _ThenRun(spec.loader, _quietly(self.then, self.name))
        return spec


def _quietly(then: Callable, name: str) -> Callable:
    def run(module) -> None:
        try:
            then(module)
        except Exception as error:  # never break the user's import of the module
            warnings.warn(f"after importing {name}: {type(error).__name__}: {error}", RuntimeWarning, stacklevel=2)

    return run


def after_import(name: str, then: Callable) -> None:
    """Call ``then(module)`` once top-level module ``name`` is imported: now if it already is, else
    right after its import finishes. An error of ``then`` is a warning, never a failed import."""
    if name in sys.modules:
        _quietly(then, name)(sys.modules[name])
    elif not any(isinstance(f, _AfterImport) and f.name == name and f.then is then for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport(name, then))  # before the path finder, which would find it


__all__ = ["after_import"]
