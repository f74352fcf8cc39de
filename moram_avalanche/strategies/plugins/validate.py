"""``plugins=`` checked when a strategy is made, not when Avalanche first calls a hook.

Avalanche takes a list of plugin *instances*: objects with its callbacks
(``before_training_exp``, ``after_training_iteration``, ...), normally subclasses of
:class:`avalanche.core.BasePlugin` (``SupervisedPlugin``). Without this check ``plugins=[object()]``
trains with the object silently ignored, ``plugins="ewc"`` becomes three "plugins", and a plugin
class instead of an instance fails inside Avalanche at train time.
"""

from __future__ import annotations

import inspect
from typing import List

from avalanche.core import BasePlugin

#: the prefixes of Avalanche's callbacks; an object with one of them (callable) counts as a plugin
HOOK_PREFIXES = ("before_", "after_")


def _hooks(obj) -> List[str]:
    return [name for name in dir(obj) if name.startswith(HOOK_PREFIXES)
            and callable(getattr(obj, name, None))]


def _describe(obj) -> str:
    text = repr(obj)
    return f"{type(obj).__name__} {text[:60] + '...' if len(text) > 60 else text}"


def check_plugins(plugins, what: str = "plugins") -> list:
    """``plugins`` as a new list of Avalanche plugin instances (the caller's list is not changed).

    Accepted: None (no plugins), a list or a tuple whose items are instances of
    :class:`avalanche.core.BasePlugin` (``SupervisedPlugin``, Avalanche's own plugins and
    metrics) or objects with at least one of Avalanche's callbacks (``before_*`` / ``after_*``
    methods, duck-typed as Avalanche allows). Refused with a TypeError / ValueError naming the
    item and the fix:

    * a string (``plugins="ewc"``): name no plugin; pass instances, ``plugins=[EWCPlugin(...)]``;
    * a single plugin instead of a list (Avalanche iterates ``plugins``; not wrapped, so the
      call reads the same as Avalanche's): ``plugins=[plugin]``;
    * a set, dict or generator: the order of plugins is the order their hooks run; a list;
    * a plugin class instead of an instance: call it, ``plugins=[EWCPlugin(...)]``;
    * an object with no callbacks (``object()``, a model, a number);
    * the same instance twice (its hooks would run twice per event).
    """
    from ...utils.errors import OptionError

    if plugins is None:
        return []
    if isinstance(plugins, (str, bytes)):
        raise OptionError(f"{what} must be a list of plugin instances, got the string {plugins!r}; "
                          "strategies and plugins are not named by strings here: pass instances, "
                          "e.g. plugins=[EWCPlugin(ewc_lambda=1.0)]")
    if inspect.isclass(plugins):
        raise OptionError(f"{what} must be a list of plugin instances, got the class "
                          f"{plugins.__name__}; pass {what}=[{plugins.__name__}(...)]")
    if isinstance(plugins, BasePlugin) or (not isinstance(plugins, (list, tuple)) and _hooks(plugins)):
        raise OptionError(f"{what} must be a list of plugins, got one plugin ({_describe(plugins)}); "
                          f"wrap it: {what}=[plugin]")
    if not isinstance(plugins, (list, tuple)):
        raise OptionError(f"{what} must be a list (or tuple) of plugin instances, got "
                          f"{type(plugins).__name__}; plugins run in list order, so pass a list")
    checked, seen = [], set()
    for i, plugin in enumerate(plugins):
        if inspect.isclass(plugin):
            hint = f"{plugin.__name__}(...)"
            raise OptionError(f"{what}[{i}] is the class {plugin.__name__}, not an instance; call it: "
                              f"{what}=[..., {hint}, ...]")
        if isinstance(plugin, str):
            raise OptionError(f"{what}[{i}] is the string {plugin!r}, not a plugin; pass an instance, "
                              "e.g. EWCPlugin(ewc_lambda=1.0)")
        if not isinstance(plugin, BasePlugin) and not _hooks(plugin):
            raise OptionError(f"{what}[{i}] ({_describe(plugin)}) is not an Avalanche plugin: expected "
                              "an instance of avalanche.core.SupervisedPlugin (or an object with its "
                              "callbacks, before_training_exp, after_training_iteration, ...)")
        if id(plugin) in seen:
            raise ValueError(f"{what}[{i}] ({_describe(plugin)}) is listed twice: its hooks would "
                             "run twice per event; list each plugin once")
        seen.add(id(plugin))
        checked.append(plugin)
    return checked


__all__ = ["HOOK_PREFIXES", "check_plugins"]
