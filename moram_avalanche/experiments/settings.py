"""What made a run folder: its settings recorded as JSON, and a refusal to mix other settings in.

A run folder (:func:`~moram_avalanche.experiments.runner.run_stream`'s ``out_dir``) holds
``settings.json``: what the caller says made it (the command line's benchmark, data, model,
seeds, ...), the strategy's class and the options it was built with, and the benchmark's
domains, class counts and sizes. Resuming in the folder with settings that differ is refused
with the keys that differ, their values there and now, and the way out (another folder, or
starting over); a result is never silently continued or reused under other settings.

Values are recorded by :func:`describe`: JSON values as they are, anything else by what
identifies it without its content (a dataset: its class and length; a module: its class and
parameter count; a function: its qualified name).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Dict, Iterable, Mapping, Optional

from ..utils.files import atomic_write_text

#: a run folder's record of its settings
RUN_SETTINGS_NAME = "settings.json"
#: strategy keyword arguments that do not change results (or are recorded apart): not recorded
UNRECORDED_OPTIONS = ("model", "tokenizer", "evaluator", "device", "progress", "plugins")
#: benchmark attributes the disk-backed streams set (recorded when present)
BENCHMARK_ATTRIBUTES = ("protocol", "shots", "seed", "prompts", "root")


def describe(value: Any) -> Any:
    """``value`` as JSON: plain values as they are, containers item by item, objects by what
    identifies them (see the module docstring). Non-finite floats become strings."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): describe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        if len(value) > 16 and all(isinstance(v, str) for v in value):  # sentences: not all of them
            return {"type": type(value).__name__, "len": len(value), "first": value[0]}
        return [describe(v) for v in value]
    if hasattr(value, "item") and getattr(value, "ndim", None) == 0:  # numpy / torch scalars
        return describe(value.item())
    if hasattr(value, "parameters") and callable(value.parameters):  # a torch module
        return {"type": type(value).__name__, "parameters": sum(p.numel() for p in value.parameters())}
    if hasattr(value, "shape") and hasattr(value, "dtype"):  # a tensor or an array
        return {"type": type(value).__name__, "shape": list(value.shape), "dtype": str(value.dtype)}
    if hasattr(value, "__len__") and hasattr(value, "__getitem__"):  # a dataset
        return {"type": type(value).__name__, "len": len(value)}
    if callable(value):
        return getattr(value, "__qualname__", type(value).__name__)
    return {"type": type(value).__name__, **({"repr": repr(value)} if _plain_repr(value) else {})}


def _plain_repr(value) -> bool:
    text = repr(value)
    return " at 0x" not in text and len(text) <= 200


def describe_options(options: Mapping[str, Any]) -> Dict[str, Any]:
    """The recorded part of a strategy's keyword arguments (:data:`UNRECORDED_OPTIONS` left out)."""
    return {name: describe(value) for name, value in sorted(options.items())
            if name not in UNRECORDED_OPTIONS}


def describe_benchmark(benchmark) -> Dict[str, Any]:
    """Domains, class counts, label space and sizes of a benchmark of
    :mod:`moram_avalanche.benchmarks` (and the stream options it carries)."""
    domains = getattr(benchmark, "domains", None)
    record: Dict[str, Any] = {}
    if domains is not None:
        record["domains"] = [d.name for d in domains]
        record["classes"] = [len(d.classnames) for d in domains]
    record["label_space"] = getattr(benchmark, "label_space", None)
    record["train_sizes"] = [len(e.dataset) for e in benchmark.train_stream]
    record["test_sizes"] = [len(e.dataset) for e in benchmark.test_stream]
    for name in BENCHMARK_ATTRIBUTES:
        if hasattr(benchmark, name):
            record[name] = describe(getattr(benchmark, name))
    return record


def as_stored(settings: Mapping[str, Any]) -> Dict[str, Any]:
    """``settings`` as it reads back from its JSON file."""
    return json.loads(json.dumps(describe(dict(settings))))


def read_settings(path: Path, what: str) -> Optional[Dict[str, Any]]:
    """The settings recorded in ``path`` (None when there is no such file); a damaged file is a
    ValueError naming it (``what`` says whose settings they are)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        stored = json.loads(text)
        if not isinstance(stored, dict):
            raise ValueError("not a JSON object")
    except ValueError as err:
        raise ValueError(f"{path}, the record of {what}, is damaged ({err}): delete it to continue "
                         "with the settings given now, or start over (--no-resume / resume=False)") from None
    return stored


_MISSING = "(absent)"


def differences(stored: Mapping[str, Any], now: Mapping[str, Any], keys: Optional[Iterable[str]] = None) -> list:
    """``["run.iterations: 80 there, 40 now", ...]``: every value that differs, by its dotted
    path into nested objects, among ``keys`` (default: all) of the top level."""
    names = sorted(set(stored) | set(now)) if keys is None else sorted(keys)
    found = []
    for name in names:
        found += _differences(name, stored.get(name, _MISSING), now.get(name, _MISSING))
    return found


def _differences(path: str, there: Any, now: Any) -> list:
    if there == now:
        return []
    if isinstance(there, dict) and isinstance(now, dict):
        return [line for key in sorted(set(there) | set(now))
                for line in _differences(f"{path}.{key}", there.get(key, _MISSING), now.get(key, _MISSING))]
    return [f"{path}: {json.dumps(there)} there, {json.dumps(now)} now"]


def check_settings(path: Path, settings: Mapping[str, Any], *, what: str, fix: str,
                   keys: Optional[Iterable[str]] = None) -> None:
    """Refuse when ``path`` records other ``settings`` (only ``keys``, when given): a
    ValueError with ``what`` (e.g. "the run in runs/x"), every difference, and ``fix``."""
    stored = read_settings(path, what)
    if stored is None:
        return
    changed = differences(stored, as_stored(settings), keys)
    if changed:
        raise ValueError(f"{what} was made with other settings ({'; '.join(changed)}): {fix}")


def write_settings(path: Path, settings: Mapping[str, Any]) -> None:
    atomic_write_text(path, json.dumps(as_stored(settings), indent=2, sort_keys=True) + "\n")


__all__ = ["BENCHMARK_ATTRIBUTES", "RUN_SETTINGS_NAME", "UNRECORDED_OPTIONS", "as_stored", "check_settings",
           "describe", "describe_benchmark", "describe_options", "differences", "read_settings",
           "write_settings"]
