"""A strategy's configuration, and the one check of given options against it.

A strategy's configuration is declared once, on the strategy class:

* its options, their types and their defaults: the keyword parameters of the ``__init__`` of
  every class in its method resolution order (the strategy, its bases,
  :class:`~moram_avalanche.strategies.clip.loop.CLIPStrategy`), read with :mod:`inspect` -- the
  most derived declaration wins; a default that is a paper's value is read from where that
  paper's setting is written (MoRAM's: :data:`~moram_avalanche.strategies.moram_setting.MORAM`);
* the ranges of its own options: its ``check_values`` (a static method taking the given
  options), and those of the classes it derives from.

:func:`check_strategy_options` is the only check of options, one pass before anything is
built: every name is one the strategy takes (else an
:class:`~moram_avalanche.utils.errors.OptionError`, a ``TypeError``, with the closest names);
every value has the type its parameter is annotated with (unannotated: the type of its
default); the shared loop's ranges (:func:`check_shared_options`) and the strategy's own
(:func:`strategy_checks`) hold. ``CLIPStrategy.__new__`` calls it (a strategy built from Python
refuses bad options before it touches the model); the command line (:mod:`moram_avalanche.arguments`)
and ``compare`` call it before the first model load. The type test is a small ``isinstance``
over :func:`typing.get_type_hints` (:func:`matches`): no dependency covers the duck typing we
need (a list is a dataset; a string is a command-line slip where a number is expected).
"""

from __future__ import annotations

import collections.abc
import difflib
import inspect
import numbers
import re
import types
import typing
from typing import Any, Collection, Dict, Mapping

from ..utils.checks import check_nonnegative_int, check_number, check_positive_int
from ..utils.errors import OptionError

#: parameters a strategy's caller never passes as options (CLIPStrategy sets them itself)
FIXED = frozenset({"self", "optimizer", "train_epochs"})


def strategy_parameters(cls) -> Dict[str, inspect.Parameter]:
    """``{name: parameter}`` of every keyword option ``cls`` takes, the most derived class's
    declaration first (its default and annotation win)."""
    found: Dict[str, inspect.Parameter] = {}
    for klass in cls.__mro__:
        init = vars(klass).get("__init__")
        if init is None:
            continue
        for name, parameter in inspect.signature(init).parameters.items():
            if parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY):
                found.setdefault(name, parameter)
    for name in FIXED:
        found.pop(name, None)
    return found


def strategy_annotations(cls) -> Dict[str, Any]:
    """``{name: annotation}`` of the options of ``cls`` (the most derived declaration wins);
    a class whose annotations cannot be resolved contributes none (they go unchecked)."""
    found: Dict[str, Any] = {}
    for klass in cls.__mro__:
        init = vars(klass).get("__init__")
        if init is None:
            continue
        declared = inspect.signature(init).parameters
        try:
            hints = typing.get_type_hints(init)
        except Exception:  # a forward reference this module cannot see: leave these unchecked
            hints = {}
        for name in declared:
            found.setdefault(name, hints.get(name))
    return found


def _is_number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def matches(value, annotation) -> bool:
    """Whether ``value`` fits ``annotation`` (a type, ``Optional``/``Union``, ``Sequence[X]``,
    ``Tuple``, ``Callable``, ``Literal``); anything else is not checked (True).

    An int fits ``float``; a bool fits only ``bool``; a string fits ``Sequence[str]`` (names
    are given one or several). Another class (a module, a dataset) takes any object but a
    string or a number: objects are duck-typed (a list is a dataset), literals are the slips
    of a command line (``--set feature_extractor=alexnet``).
    """
    if annotation is None or annotation is typing.Any:
        return True
    if annotation is type(None):
        return value is None
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Union or origin is types.UnionType:
        return any(matches(value, arg) for arg in args)
    if origin is typing.Literal:
        return value in args
    if annotation is bool:
        return isinstance(value, bool)
    if annotation is int:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if annotation is float:
        return _is_number(value)
    if annotation is str:
        return isinstance(value, str)
    if origin is not None:
        if origin is collections.abc.Callable:
            return callable(value)
        if not isinstance(origin, type):
            return True
        if not isinstance(value, origin):
            return False
        inner = args[0] if len(args) == 1 or (len(args) == 2 and args[-1] is Ellipsis) else None
        if isinstance(value, (list, tuple)) and inner in (int, float, str, bool):
            return all(matches(item, inner) for item in value)
        return True
    if isinstance(annotation, type):
        # objects are duck-typed (a list is a dataset); a literal is not an object of a class
        return isinstance(value, annotation) or not isinstance(value, (str, numbers.Number))
    return True


def _fits_default(value, default) -> bool:
    """The unannotated case: a value of the kind of the default (None and objects: anything)."""
    if default is inspect.Parameter.empty or default is None or value is None:
        return True
    if isinstance(default, bool):
        return isinstance(value, bool)
    if _is_number(default):
        return _is_number(value)
    if isinstance(default, str):
        return isinstance(value, str)
    if isinstance(default, (tuple, list)):
        names = all(isinstance(item, str) for item in default)
        return isinstance(value, (tuple, list)) or (names and isinstance(value, str))
    return True


def _kind(annotation, default) -> str:
    """What a parameter takes, readably: ``float | DomainLR``, ``Optional[int]``."""
    if annotation is None:
        return type(default).__name__
    if isinstance(annotation, type):
        return annotation.__name__
    return re.sub(r"\b(?:[A-Za-z_][A-Za-z0-9_]*\.)+([A-Za-z_][A-Za-z0-9_]*)", r"\1", str(annotation))


def by_name_only(cls) -> bool:
    """Whether ``cls`` is one of Avalanche's strategies by name
    (:class:`~moram_avalanche.strategies.clip.builtins.BuiltinStrategy`): not a class, it checks its
    options itself (``check_options``: names and the shared loop's ranges)."""
    return not isinstance(cls, type) and hasattr(cls, "check_options")


def check_strategy_options(cls, options: Mapping[str, Any], *, unbuilt: Collection[str] = ()) -> None:
    """Check ``options`` (keyword arguments for strategy class ``cls``) without building anything.

    ``unbuilt`` names options whose values only describe what will be passed (the command
    line's ``--ref-images`` folder before the dataset is read): their types are not checked.

    Raises :class:`~moram_avalanche.utils.errors.OptionError` (a ``TypeError``) for an
    unknown name or a value of the wrong type (:func:`check_option_types`), ``ValueError``
    for a value out of range (:func:`check_option_values`); each message names the option,
    what was given and what is allowed.
    """
    check_option_types(cls, options, unbuilt=unbuilt)
    check_option_values(cls, options)


def check_option_types(cls, options: Mapping[str, Any], *, unbuilt: Collection[str] = ()) -> None:
    """Names and types of ``options`` for strategy class ``cls`` (see :func:`check_strategy_options`)."""
    if by_name_only(cls):
        cls.check_options(options)
        return
    parameters, annotations = strategy_parameters(cls), strategy_annotations(cls)
    strategy = cls.__name__
    for name, value in options.items():
        if name not in parameters:
            close = difflib.get_close_matches(name, list(parameters), n=3, cutoff=0.6)
            hint = f"did you mean {' or '.join(close)}? " if close else ""
            raise OptionError(f"{strategy} takes no option {name!r}: {hint}its options are "
                              f"{', '.join(sorted(n for n in parameters if n not in ('model', 'tokenizer')))}")
        parameter = parameters[name]
        if name in unbuilt:
            continue
        annotation = annotations.get(name)
        fits = matches(value, annotation) if annotation is not None else _fits_default(value, parameter.default)
        if not fits:
            default = ("" if parameter.default is inspect.Parameter.empty
                       else f" (default {parameter.default!r})")
            raise OptionError(f"{strategy} option {name} takes {_kind(annotation, parameter.default)}"
                              f"{default}, got {type(value).__name__} {value!r}")


def check_option_values(cls, options: Mapping[str, Any]) -> None:
    """The ranges of the shared loop's options and the strategy's own checks (``check_values``
    of ``cls`` and the classes it derives from) on ``options``; ValueError naming the option."""
    check_shared_options(options)
    if by_name_only(cls):  # Avalanche's strategies by name: the ranges their entry declares
        check = getattr(cls, "check_values", None)
        if callable(check):
            check(options)
        return
    for check in strategy_checks(cls):
        check(options)


def strategy_checks(cls) -> list:
    """The ``check_values`` of ``cls`` and of every class it derives from that declares its
    own (the most derived first, each once): a subclass adds checks, it drops none."""
    checks = []
    for klass in cls.__mro__:
        check = vars(klass).get("check_values")
        if isinstance(check, staticmethod):
            check = check.__func__
        if check is not None and check not in checks:
            checks.append(check)
    return checks


def check_shared_options(options: Mapping[str, Any]) -> None:
    """Range checks of the options of the shared CLIP loop that are given in ``options``
    (:class:`~moram_avalanche.strategies.clip.loop.CLIPStrategy`); ValueError naming the option."""
    from ..utils.devices import resolve_device

    given = {k: v for k, v in options.items() if v is not None}
    if "iterations" in given:
        check_nonnegative_int("iterations", given["iterations"])
    for name in ("train_mb_size", "eval_mb_size", "text_batch_size"):
        if name in given:
            check_positive_int(name, given[name])
    if "lr" in given and _is_number(given["lr"]):  # a DomainLR checks its own rates
        check_number("lr", given["lr"], low=0, low_open=True, hint="e.g. 5e-4, MoRAM's")
    if "weight_decay" in given:
        check_number("weight_decay", given["weight_decay"], low=0)
    if "warmup" in given:
        check_nonnegative_int("warmup", given["warmup"])
    if "label_smoothing" in given:
        check_number("label_smoothing", given["label_smoothing"], low=0, high=1, high_open=True)
    if "betas" in given:
        betas = given["betas"]
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise ValueError(f"betas must be two numbers in [0, 1), e.g. (0.9, 0.999), got {betas!r}")
        for beta in betas:
            check_number("each of betas", beta, low=0, high=1, high_open=True)
    if "device" in given:
        resolve_device(given["device"])


__all__ = ["FIXED", "by_name_only", "check_option_types", "check_option_values", "check_shared_options", "check_strategy_options", "matches", "strategy_annotations",
           "strategy_checks", "strategy_parameters"]
