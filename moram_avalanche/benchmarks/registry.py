"""The benchmark registry: one :class:`Benchmark` entry per ``--benchmark`` name.

An entry says everything the library knows of a stream by its name: the model family it is for
(which picks the model loader and the strategies), the function that builds it, the protocol it
is (what help texts and plans say) and, where ``check-data`` can look at its data, the check of
its layout (:class:`DataCheck`). Every reader asks the registry: the command line's choices and
help, ``check-data``, the family lookups of ``run``, ``compare`` and ``analyze``
(:func:`benchmark_family`, the one place a benchmark's family is derived). Each wing registers its
own entries (:mod:`.images.entries`, :mod:`.text.entries`); a user registers one the same way,
as open_clip's ``add_model_config`` or peft's ``register_peft_method`` do::

    register_benchmark(Benchmark("tiny", family="clip", builder=my_tiny_stream,
                                 protocol="three toy domains (my tests)"))

A builder or a check is a function, or ``"package.module:function"`` imported when it is first
called: registering imports nothing heavy, so listing the names (``--help``) stays instant.
"""

from __future__ import annotations

import importlib
import inspect
import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Dict, Mapping, Optional, Union

from ..utils.names import lookup

#: a function, or where to find it: ``"package.module:function"`` (imported when first used)
Reference = Union[Callable[..., Any], str]

_DOTTED = r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*"
_REFERENCE = re.compile(rf"{_DOTTED}:{_DOTTED}")
_NAME = re.compile(r"[a-z0-9][a-z0-9._-]*")


def _check_reference(reference, what: str) -> None:
    if callable(reference) or (isinstance(reference, str) and _REFERENCE.fullmatch(reference)):
        return
    raise TypeError(f"{what} must be a function or 'package.module:function' (imported on first use), "
                    f"got {reference!r}")


def resolve(reference: Reference, what: str) -> Callable[..., Any]:
    """The function ``reference`` is: itself, or the one ``"package.module:function"`` names (imported
    now). A ValueError naming ``what`` when the module or the function does not exist; an import
    error inside the module (a dependency missing) keeps its own traceback."""
    if callable(reference):
        return reference
    module_name, _, attribute = reference.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name is None or not (module_name == error.name or module_name.startswith(error.name + ".")):
            raise  # the module exists, one of its imports does not
        raise ValueError(f"{what} is {reference!r}, and there is no module {module_name!r}: register the "
                         "function itself or the module it is defined in") from None
    value = module
    for part in attribute.split("."):
        if not hasattr(value, part):
            raise ValueError(f"{what} is {reference!r}, and {module_name} has no {attribute!r}: register "
                             "an existing function")
        value = getattr(value, part)
    return value


@dataclass(frozen=True)
class DataCheck:
    """What ``moram-avalanche check-data --benchmark NAME`` checks of a data root.

    Args:
        function: ``(root, verify_images=False, progress=True) -> (reports, text)``: a report per
            domain or task (each with ``usable``) and the text printed; a :data:`Reference`.
        layout: the layout it looks for, in the words of ``check-data --help``.
        images: an image layout: one of those ``check-data --benchmark all`` (the default) checks.
    """

    function: Reference
    layout: str
    images: bool = False

    def __post_init__(self):
        _check_reference(self.function, "a data check")
        if not isinstance(self.layout, str) or not self.layout.strip():
            raise ValueError(f"a data check's layout is the text check-data's help gives it, got {self.layout!r}")
        if not isinstance(self.images, bool):
            raise TypeError(f"DataCheck.images is True or False, got {self.images!r}")

    @property
    def run(self) -> Callable[..., Any]:
        """The check itself, ``(root, verify_images=False, progress=True) -> (reports, text)``."""
        return resolve(self.function, "the data check")


@dataclass(frozen=True)
class Benchmark:
    """One registered benchmark, checked once when it is made (names, types; nothing imported).

    Args:
        name: what ``--benchmark`` takes; lower case (names are looked up lower-cased).
        family: the model family it is for ("clip", "text"): the family record that loads the
            model and builds the stream (:mod:`moram_avalanche.experiments.families`), whose
            strategies run on it (:data:`moram_avalanche.strategies.registry.FAMILIES`).
        builder: ``(data_root, **options) -> benchmark``, a :data:`Reference`; a stream that reads
            no data takes ``data_root=None``. The CLIP family's builders take ``train_transform=``
            and ``eval_transform=`` too; the text family's name the stream options they take.
        protocol: what the stream is, one phrase (``run --help``, plans).
        check: what ``check-data`` checks of its layout (None: it has no check of its own).
    """

    name: str
    family: str
    builder: Reference
    protocol: str
    check: Optional[DataCheck] = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise ValueError(f"a benchmark name is lower case letters, digits, '-', '_' or '.' (what --benchmark "
                             f"takes), got {self.name!r}")
        if not isinstance(self.family, str) or not self.family:
            raise ValueError(f"benchmark {self.name!r}: family must name a model family, e.g. 'clip' or 'text', "
                             f"got {self.family!r}")
        _check_reference(self.builder, f"benchmark {self.name!r}'s builder")
        if not isinstance(self.protocol, str) or not self.protocol.strip():
            raise ValueError(f"benchmark {self.name!r}: protocol is the phrase --help gives it, got {self.protocol!r}")
        if self.check is not None and not isinstance(self.check, DataCheck):
            raise TypeError(f"benchmark {self.name!r}: check must be a DataCheck or None, got {self.check!r}")

    @property
    def build(self) -> Callable[..., Any]:
        """The builder itself, ``(data_root, **options) -> benchmark`` (imported on first use)."""
        return resolve(self.builder, f"benchmark {self.name!r}'s builder")

    @property
    def reads_from_disk(self) -> bool:
        """Whether the stream is read from a data root: its builder's first parameter has no default."""
        first = next(iter(inspect.signature(self.build).parameters.values()), None)
        return first is not None and first.default is inspect.Parameter.empty


_REGISTRY: Dict[str, Benchmark] = {}


def register_benchmark(benchmark: Benchmark, *, replace: bool = False) -> Benchmark:
    """Register ``benchmark`` under its name (``replace=True``: over an entry of that name) and return it."""
    if not isinstance(benchmark, Benchmark):
        raise TypeError(f"register_benchmark takes a Benchmark(name, family, builder, protocol, check=None), "
                        f"got {benchmark!r}")
    if benchmark.name in _REGISTRY and not replace:
        raise ValueError(f"a benchmark named {benchmark.name!r} is registered already "
                         f"({_REGISTRY[benchmark.name].protocol}): give another name, or replace=True to replace it")
    _REGISTRY[benchmark.name] = benchmark
    return benchmark


def unregister_benchmark(name: str) -> Benchmark:
    """Remove the benchmark registered as ``name`` and return its entry; a clear error for unknown names."""
    return _REGISTRY.pop(benchmark_entry(name).name)


def benchmarks() -> Mapping[str, Benchmark]:
    """Every registered benchmark, by name, in the order they were registered (read-only)."""
    return MappingProxyType(dict(_REGISTRY))


def benchmark_entry(name: str) -> Benchmark:
    """The entry registered as ``name``; a ValueError listing the registered names otherwise."""
    return lookup(_REGISTRY, name, "benchmark")


def get_benchmark(name: str) -> Callable[..., Any]:
    """The builder registered as ``name`` (an image or a text stream), ``(data_root, **options) ->
    benchmark``; a clear error for unknown names."""
    return benchmark_entry(name).build


def benchmark_family(name: str) -> str:
    """The model family of benchmark ``name``: the one place a benchmark's family is derived (the
    command line's checks, the run's options and the family records read it); a clear error for
    unknown names."""
    return benchmark_entry(name).family


def describe_benchmarks() -> str:
    """One phrase per benchmark, in registration order: ``"name: protocol; ..."`` (``run --help``)."""
    return "; ".join(f"{name}: {entry.protocol}" for name, entry in _REGISTRY.items())


__all__ = ["Benchmark", "DataCheck", "Reference", "benchmark_entry", "benchmark_family", "benchmarks",
           "describe_benchmarks", "get_benchmark", "register_benchmark", "resolve", "unregister_benchmark"]
