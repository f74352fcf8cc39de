"""The hooks the run path calls on a strategy's plugins, declared once: :class:`RunHooks`.

Avalanche calls a plugin's callbacks inside ``train`` and ``eval`` (``before_training_exp``, ...:
``avalanche.core.BasePlugin``, whose methods are no-op defaults a plugin overrides). The run path
(:func:`~moram_avalanche.experiments.runner.run_stream`, :func:`~moram_avalanche.experiments.run.run_one`)
calls four more, around them, so that it knows no method: what a method prepares before a run
and what it adds to a run folder come from its plugin (MoRAM's routing kernel and
``atom_usage.png``: :class:`~.moram.MoRAMPlugin`; HumanEval's ``humaneval.json``).

* :class:`RunHooks` -- the hooks as a :class:`typing.Protocol`: each one's signature, when the run
  path calls it, with what, and what it must return. Its methods are the no-op defaults, so a
  plugin subclasses it (beside ``SupervisedPlugin``) and overrides the hooks it uses, as it does
  Avalanche's callbacks. As with Avalanche's ``Adaptable``, subclassing is not required: an
  object that defines some of the hooks conforms for those and gets the defaults for the rest.
* :class:`PluginRunHooks` -- one plugin's hooks as the run path calls them, checked: a hook of
  the wrong kind (``run_files`` as a string or a method, a ``run_pictures`` that is not callable)
  or a misspelt one (``run_report``, which the run path would never call) is an error when the
  run starts, before anything runs; each result is checked when a hook returns.
"""

from __future__ import annotations

import difflib
from pathlib import PurePath
from typing import Any, Dict, Mapping, Protocol, Tuple, runtime_checkable

#: the hooks' names, as :class:`RunHooks` declares them (a test keeps the two the same)
HOOKS = ("run_files", "prepare_run", "run_pictures", "run_reports")
#: how close a plugin's own name must be to a hook's to read as a misspelling of it
#: (``difflib``'s ratio: ``run_report`` 0.95, ``prepare_runs`` 0.96; ``prepare`` 0.78 is not one)
MISSPELLING_CUTOFF = 0.85


@runtime_checkable
class RunHooks(Protocol):
    """What the run path calls on each of a strategy's plugins (module docstring).

    Attributes:
        run_files: the names of the files this plugin adds to a run folder, read when a run
            starts (before anything is written): a run that starts over (``resume=False``,
            ``--no-resume``) removes them with the run's own files, so every file that
            :meth:`run_pictures` or :meth:`run_reports` returns must be listed here. Plain file
            names (no folders); a tuple (or list) of strings. Default: none.
    """

    run_files: Tuple[str, ...] = ()

    def prepare_run(self, strategy) -> None:
        """Called once per :func:`~moram_avalanche.experiments.runner.run_stream` call, with the
        strategy, after its checkpoint is loaded and before the first experience it trains (a
        resumed run calls it again), outside every timed step: build what the run needs once
        (MoRAM's CPU routing kernel), so that no experience's time includes it. Returns None.
        Default: nothing to prepare."""

    def run_pictures(self) -> Mapping[str, Mapping[str, Any]]:
        """Called once after the run's last experience (by the main process alone):
        ``{file name: keyword arguments of}`` :func:`~moram_avalanche.experiments.viz.heatmap`
        (``values``, ``row_labels``, ``col_labels``, ...), each drawn and written as a PNG in the
        run folder under its file name (one of :attr:`run_files`). Default: ``{}``, no picture."""
        return {}

    def run_reports(self) -> Mapping[str, Any]:
        """Called once after the run's last experience (by the main process alone):
        ``{file name: JSON-able content}``, each written to the run folder as indented JSON under
        its file name (one of :attr:`run_files`), atomically. Default: ``{}``, no report."""
        return {}


def _plugin_name(plugin) -> str:
    return type(plugin).__name__


def misspelt_hooks(plugin) -> Dict[str, str]:
    """``{name: the hook it is close to}`` for each public name of ``plugin`` that is not a hook
    but reads like a misspelling of one (:data:`MISSPELLING_CUTOFF`, case ignored)."""
    found = {}
    for name in dir(plugin):
        if name.startswith("_") or name in HOOKS:
            continue
        close = difflib.get_close_matches(name.lower(), HOOKS, n=1, cutoff=MISSPELLING_CUTOFF)
        if close:
            found[name] = close[0]
    return found


def checked_run_files(plugin) -> Tuple[str, ...]:
    """``plugin``'s :attr:`~RunHooks.run_files` as a tuple; a TypeError / ValueError that names
    the plugin, what it gave and the fix when it is not a tuple (or list) of plain file names."""
    files = getattr(plugin, "run_files", ())
    name = _plugin_name(plugin)
    if callable(files):
        raise TypeError(f"{name}.run_files is a method; it is an attribute, the tuple of the file names the plugin "
                        "adds to a run folder: run_files = ('name.json',)")
    if isinstance(files, (str, bytes)) or not isinstance(files, (tuple, list)):
        raise TypeError(f"{name}.run_files must be a tuple of file names, got {type(files).__name__} {files!r:.60}"
                        + (f"; write run_files = ({files!r},)" if isinstance(files, str) else ""))
    for file in files:
        if not isinstance(file, str) or not file or file in (".", "..") or PurePath(file).name != file \
                or "\\" in file:
            raise ValueError(f"{name}.run_files holds {file!r}: expected plain file names (no folder, not empty), "
                             "written in the run folder itself, e.g. run_files = ('atom_usage.png',)")
    return tuple(files)


class PluginRunHooks(RunHooks):
    """One plugin's :class:`RunHooks` as the run path calls them (a :class:`RunHooks` itself):
    the plugin's own hooks, the defaults for the ones it leaves out.

    Made when a run starts, it checks what the plugin declares (a ValueError / TypeError naming
    the plugin and the fix): :attr:`run_files` (:func:`checked_run_files`), the other hooks
    callable, and no name that misspells a hook (:func:`misspelt_hooks`: a ``run_report`` the run
    path would never call, silently). Each hook's result is checked when it returns: None from
    :meth:`prepare_run`; a mapping from :meth:`run_pictures` and :meth:`run_reports` whose file
    names the plugin lists in :attr:`run_files` (a file it does not list would survive a run that
    starts over) and, for pictures, mappings of keyword arguments.
    """

    def __init__(self, plugin) -> None:
        name = _plugin_name(plugin)
        misspelt = misspelt_hooks(plugin)
        if misspelt:
            wrong, meant = next(iter(misspelt.items()))
            raise TypeError(f"{name} defines {wrong!r}, which the run path never calls: did you mean {meant!r}? "
                            f"The run path's plugin hooks are {', '.join(HOOKS)} "
                            "(moram_avalanche.strategies.plugins.run_hooks.RunHooks)")
        self.plugin = plugin
        self.run_files = checked_run_files(plugin)
        for hook in HOOKS[1:]:
            value = getattr(plugin, hook, None)
            if value is not None and not callable(value):
                raise TypeError(f"{name}.{hook} is a {type(value).__name__}, not a method: define it as the "
                                f"method RunHooks.{hook} declares")

    def __repr__(self) -> str:
        return f"PluginRunHooks({_plugin_name(self.plugin)})"

    def prepare_run(self, strategy) -> None:
        """The plugin's :meth:`RunHooks.prepare_run` (nothing when it has none); it must return None."""
        prepare = getattr(self.plugin, "prepare_run", None)
        result = None if prepare is None else prepare(strategy)
        if result is not None:
            raise TypeError(f"{_plugin_name(self.plugin)}.prepare_run(strategy) returned {type(result).__name__}: the "
                            "run path ignores a value; keep what it prepares on the plugin and return None")

    def run_pictures(self) -> Dict[str, Mapping[str, Any]]:
        """The plugin's :meth:`RunHooks.run_pictures` (``{}`` when it has none), checked."""
        pictures = self._files_of("run_pictures", "{file name: keyword arguments of heatmap}")
        for file, picture in pictures.items():
            if not isinstance(picture, Mapping):
                raise TypeError(f"{_plugin_name(self.plugin)}.run_pictures() gave {type(picture).__name__} for "
                                f"{file!r}: expected the keyword arguments of heatmap (values, row_labels, col_labels, "
                                "...) as a dict")
        return pictures

    def run_reports(self) -> Dict[str, Any]:
        """The plugin's :meth:`RunHooks.run_reports` (``{}`` when it has none), checked."""
        return self._files_of("run_reports", "{file name: JSON-able content}")

    def _files_of(self, hook: str, expected: str) -> Dict[str, Any]:
        method = getattr(self.plugin, hook, None)
        result = {} if method is None else method()
        name = _plugin_name(self.plugin)
        if not isinstance(result, Mapping):
            raise TypeError(f"{name}.{hook}() returned {type(result).__name__}: expected {expected} ({{}}: nothing)")
        unlisted = [file for file in result if file not in self.run_files]
        if unlisted:
            raise ValueError(f"{name}.{hook}() writes {unlisted}, which {name}.run_files {self.run_files} does not "
                             f"list: add them to run_files, so that a run that starts over removes them")
        return dict(result)


def plugin_run_hooks(plugins) -> Tuple[PluginRunHooks, ...]:
    """The checked :class:`PluginRunHooks` of each of ``plugins`` (a strategy's ``plugins``), in order."""
    return tuple(PluginRunHooks(plugin) for plugin in plugins)


__all__ = ["HOOKS", "MISSPELLING_CUTOFF", "PluginRunHooks", "RunHooks", "checked_run_files", "misspelt_hooks",
           "plugin_run_hooks"]
