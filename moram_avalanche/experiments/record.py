"""The one record of a run folder: what made the run, written once by the run path, read by
resuming and by ``analyze``.

A run folder (``run --log-dir``, ``OUT/<strategy>`` of a ``compare`` or the demo) holds
``run.json`` (:data:`RECORD_NAME`), a JSON object:

* ``format``: :data:`RECORD_FORMAT`;
* ``run``: what the caller says made it -- for the command line the benchmark, its stream
  options, the data root, the model and its weights, the budget, the seed, the strategy's
  registry name and its ``--set`` values (:func:`~moram_avalanche.experiments.run.run_one`);
* ``strategy``: the strategy's class; ``options``: the keyword arguments it was built with
  (:func:`describe_options`); ``model``: the model's class and size; ``benchmark``: its
  domains, class counts, label space and sizes (:func:`describe_benchmark`);
* ``environment``: facts that help rebuild the run but do not change its numbers, never
  checked on resume: the cache folder, the device asked for, the base weights' checksum;
* ``contents``: what the run read, as short hashes: ``train`` and ``test``, one per split of the
  benchmark's data (:func:`~moram_avalanche.benchmarks.fingerprint.split_hashes`: the text
  streams' (prompt, answer) pairs, the image streams' (path, label) pairs); the base model's
  ``weights`` by their bytes and, for a language model, its ``config``, ``tokenizer`` and
  ``generation_config`` files (:mod:`~moram_avalanche.experiments.fingerprints`, since 0.7.1);
  ``decoding``, the settings a language model's evaluation decodes with (a generation config
  built from scratch: the strategy's ``decoding_settings``); and ``weights_checksum``, 0.7's
  sum of the weights' absolute values (:func:`weights_checksum`);
* ``version``: the moram-avalanche that wrote it (since 0.7.1; :mod:`.stream_changes`).

Resuming compares ``contents`` too (:func:`content_differences`): a data file edited since the
run began (the same number of items, so ``benchmark`` looks the same), other base weights under
the same name (a sign flipped, two rows swapped), an edited ``config.json``, tokenizer or
``generation_config.json`` are refused, in one line naming what changed, its recorded and its
current hash, and the way out (restore the files, or start the run in another folder), before
anything is trained or written. A value a record lacks is not compared: a record made before
0.6.0 has no data hashes (a note says so), one made by 0.7.0 or before no fingerprints of the
weights' bytes or the model's files (a warning names what cannot be checked; its weights
checksum still is). A record an older version wrote than its stream's last change of prompts or
metric is refused (:func:`~moram_avalanche.experiments.stream_changes.check_stream_version`).

Resuming in the folder with a record that differs in :data:`CHECKED` is refused with the keys
that differ, their values there and now, and the way out (another folder, or starting over);
a result is never silently continued or reused under other settings.

Folders of version 0.2 hold two records: ``settings.json`` (what resuming checked) and, for
``run``, a flat ``run.json`` (what ``analyze`` read); a comparison also kept ``compare.json``.
:func:`read_record` reads them once, as one record of this format (:func:`migrate`); the run
path then writes ``run.json`` in this format and removes ``settings.json`` (``analyze`` only
reads, so a read-only old folder still analyses).

Values are recorded by :func:`describe`: JSON values as they are, anything else by what
identifies it without its content (a dataset: its class and length; a module: its class and
parameter count; a function: its qualified name).
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any, Dict, Iterable, Mapping, Optional

from ..utils.files import atomic_write_text

logger = logging.getLogger(__name__)

#: a run folder's one record
RECORD_NAME = "run.json"
#: the record's layout (0.2's folders had none: :func:`migrate`)
RECORD_FORMAT = 2
#: the parts of the record a resumed run must match
CHECKED = ("run", "strategy", "options", "model", "benchmark")
#: the parts known before the strategy is built (its model, with adapters, is not)
CHECKED_BEFORE_BUILDING = ("run", "strategy", "options", "benchmark")
#: the records of version 0.2 (read once by :func:`read_record`)
LEGACY_SETTINGS_NAME = "settings.json"
LEGACY_COMPARE_NAME = "compare.json"
#: strategy keyword arguments that do not change results (or are recorded apart): not recorded
UNRECORDED_OPTIONS = ("model", "tokenizer", "evaluator", "device", "progress", "plugins")
#: benchmark attributes the disk-backed streams set (recorded when present)
BENCHMARK_ATTRIBUTES = ("protocol", "shots", "seed", "prompts", "root")
#: keys of a 0.2 ``run.json`` that are environment facts, not settings
_LEGACY_ENVIRONMENT = ("cache_dir", "device", "weights_checksum")
#: what a 0.2 comparison checked that this format records as environment (no effect on numbers)
_UNCHECKED_COMPARISON = ("device", "num_workers")


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


def as_stored(value: Mapping[str, Any]) -> Dict[str, Any]:
    """``value`` as it reads back from its JSON file."""
    return json.loads(json.dumps(describe(dict(value))))


def make_record(run: Mapping[str, Any], *, strategy: Optional[str] = None,
                options: Optional[Mapping[str, Any]] = None, model: Any = None, benchmark: Any = None,
                environment: Optional[Mapping[str, Any]] = None, fingerprints: Optional[Mapping[str, Any]] = None,
                decoding: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """A record (see the module docstring) as it reads back from ``run.json``; ``fingerprints``:
    the base model's (:func:`~moram_avalanche.experiments.fingerprints.model_fingerprints`);
    ``decoding``: what evaluation decodes with."""
    from .. import __version__

    return as_stored({
        "contents": contents_of(benchmark, environment, fingerprints, decoding),
        "format": RECORD_FORMAT, "version": __version__, "run": dict(run), "strategy": strategy,
        "options": describe_options(options or {}),
        "model": describe(model) if model is not None else None,
        "benchmark": describe_benchmark(benchmark) if benchmark is not None else None,
        "environment": dict(environment or {}),
    })


def contents_of(benchmark: Any = None, environment: Optional[Mapping[str, Any]] = None,
                fingerprints: Optional[Mapping[str, Any]] = None,
                decoding: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """The record's ``contents``: one hash per split of ``benchmark``'s data (None: not known), the
    base weights' checksum of ``environment``, the model's ``fingerprints`` and the ``decoding``
    settings (module docstring; a part not given is left out)."""
    from ..benchmarks.fingerprint import split_hashes

    hashes = split_hashes(benchmark) if benchmark is not None else {"train": None, "test": None}
    extra = {**dict(fingerprints or {}), **({"decoding": dict(decoding)} if decoding is not None else {})}
    return {**hashes, "weights_checksum": dict(environment or {}).get("weights_checksum"), **extra}


#: the relative difference of two weights checksums that still counts as the same weights (the
#: sum's order on another device differs by ~1e-12; a changed weight moves it far more)
CHECKSUM_TOLERANCE = 1e-7
#: what a resume refused for its data or weights advises
CONTENTS_FIX = ("restore the data files and the weights (and the model's other files) the run was made with, or start "
                "a new run in another folder (another --log-dir / --out; --no-resume starts this one over and removes "
                "its results)")


def content_differences(stored: Mapping[str, Any], now: Mapping[str, Any]) -> list:
    """``["the train data's hash 1f.. in run.json, 9c.. now", ...]``: where the data, weights and
    model files a stored record read differ from ``now``'s (module docstring); a value either side
    lacks is not compared (a record made before 0.6.0 has no data hashes, one made by 0.7.0 no
    fingerprints: :func:`unchecked_fingerprints`)."""
    from .fingerprints import FINGERPRINTS

    there, here = dict(stored.get("contents") or {}), dict(now.get("contents") or {})
    there.setdefault("weights_checksum", dict(stored.get("environment") or {}).get("weights_checksum"))
    found = []
    for split in ("train", "test"):
        if there.get(split) and here.get(split) and there[split] != here[split]:
            found.append(f"the {split} data's hash {there[split]} in {RECORD_NAME}, {here[split]} now")
    for key, name in FINGERPRINTS.items():
        old, new = there.get(key), here.get(key)
        if old is None or new is None or old == new:
            continue
        if isinstance(old, dict) and isinstance(new, dict):
            found.append(f"{name} ({'; '.join(_differences(key, old, new)).replace(' there,', f' in {RECORD_NAME},')})")
        else:
            found.append(f"{name}: hash {json.dumps(old)} in {RECORD_NAME}, {json.dumps(new)} now")
    old, new = there.get("weights_checksum"), here.get("weights_checksum")
    hashed = there.get("weights") is not None and here.get("weights") is not None  # the bytes' hash says more
    if (not hashed and isinstance(old, (int, float)) and isinstance(new, (int, float))
            and not math.isclose(old, new, rel_tol=CHECKSUM_TOLERANCE)):
        found.append(f"the model's weights checksum {old!r} in {RECORD_NAME}, {new!r} now")
    return found


def unchecked_fingerprints(stored: Mapping[str, Any], now: Mapping[str, Any]) -> list:
    """What ``now`` fingerprints that ``stored`` does not (a record made by 0.7.0 or before), by the
    names messages give them (:data:`~moram_avalanche.experiments.fingerprints.FINGERPRINTS`)."""
    from .fingerprints import FINGERPRINTS

    there, here = dict(stored.get("contents") or {}), dict(now.get("contents") or {})
    return [name for key, name in FINGERPRINTS.items() if there.get(key) is None and here.get(key) is not None]


def check_contents(stored: Mapping[str, Any], now: Mapping[str, Any], what: str, *, warn: bool = True) -> None:
    """Refuse, in one line, a resume whose data, base weights or model files are not the ones
    ``stored`` read (:func:`content_differences`, :data:`CONTENTS_FIX`); ``warn``: say in one line
    what ``stored`` cannot check (:func:`unchecked_fingerprints`)."""
    changed = content_differences(stored, now)
    if changed:
        raise ValueError(f"{what} read other data, weights or model files than it finds now ({'; '.join(changed)}): "
                         f"they changed since it began; {CONTENTS_FIX}")
    unchecked = unchecked_fingerprints(stored, now) if warn else []
    if unchecked:
        checksum = ((stored.get("contents") or {}).get("weights_checksum")
                    or (stored.get("environment") or {}).get("weights_checksum"))
        logger.warning("%s records no fingerprint of %s (made by moram-avalanche %s, or given none): they cannot be "
                       "checked%s; resuming, and recording them from now on", what, ", ".join(unchecked),
                       stored.get("version") or "0.7.0 or before", " (its weights checksum is)" if isinstance(checksum, (int, float)) else "")
    if not (stored.get("contents") or {}).get("train") and (now.get("contents") or {}).get("train"):
        logger.info("%s records no hash of its data (made before 0.6.0, or of a dataset without one): its data "
                    "files are not compared", what)


def _read_json(path: Path, what: str, fix: str) -> Optional[Dict[str, Any]]:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise ValueError(f"{path}, the record of {what}, is a folder, not a file: {fix}") from None
    try:
        stored = json.loads(text)
        if not isinstance(stored, dict):
            raise ValueError("not a JSON object")
    except ValueError as err:
        raise ValueError(f"{path}, the record of {what}, is damaged ({err}): {fix}") from None
    return stored


#: what a damaged record's message advises: never a step that mixes two runs in one folder
DAMAGED_FIX = ("restore it, give another folder, or start the run over (--no-resume, resume=False), "
               "which removes the run's results")


def read_record(folder, what: Optional[str] = None) -> Optional[Dict[str, Any]]:
    """The record of the run in ``folder`` in this format (a 0.2 folder's records migrated),
    or None when it has none; a damaged record is a ValueError naming the file."""
    folder = Path(folder)
    what = what or f"the run in {folder}"
    stored = _read_json(folder / RECORD_NAME, what, DAMAGED_FIX)
    if stored is not None and stored.get("format") == RECORD_FORMAT:
        return stored
    legacy = _read_json(folder / LEGACY_SETTINGS_NAME, what, DAMAGED_FIX)
    if legacy is None and stored is None:  # a 0.2 comparison's run kept its shared settings one folder up
        shared = _read_json(folder.parent / LEGACY_COMPARE_NAME, f"the comparison in {folder.parent}", DAMAGED_FIX)
        if shared is None:
            return None
        legacy = {"run": {"comparison": shared, "seed": shared.get("seed")}}
    return migrate(folder, legacy, stored)


def migrate(folder: Path, settings: Optional[Mapping[str, Any]], flat_run: Optional[Mapping[str, Any]]
            ) -> Dict[str, Any]:
    """One record from a 0.2 folder's ``settings.json`` (``settings``) and flat ``run.json``.

    0.2's ``settings.json`` held ``run`` in one of two shapes: ``run``'s (the shared settings
    with ``strategy``, ``lr`` and ``set``) or a comparison's (``comparison``: the shared
    settings, ``strategy_settings``, ``seed``); both become this format's one shape (shared
    settings + ``seed`` + ``strategy`` + ``set``; ``lr`` is recorded among the options).
    """
    settings = dict(settings or {})
    old_run = dict(settings.get("run") or {})
    environment = {k: v for k, v in dict(flat_run or {}).items() if k in _LEGACY_ENVIRONMENT}
    if "comparison" in old_run:
        shared = dict(old_run["comparison"] or {})
        environment.update({k: shared.pop(k) for k in _UNCHECKED_COMPARISON if k in shared})
        run = {**shared, "seed": old_run.get("seed"), "strategy": folder.name,
               "set": dict(old_run.get("strategy_settings") or {})}
    elif old_run:
        run = {k: v for k, v in old_run.items() if k != "lr"}
    else:  # a 0.2 run killed between its two records: the flat run.json alone
        run = {k: v for k, v in dict(flat_run or {}).items() if k not in _LEGACY_ENVIRONMENT + ("lr",)}
    record = {"format": RECORD_FORMAT, "run": run, "environment": environment}
    for key in ("strategy", "options", "model", "benchmark"):
        record[key] = settings.get(key)
    record["migrated_from"] = [name for name, found in ((LEGACY_SETTINGS_NAME, settings),
                                                        ("run.json (0.2)", flat_run)) if found]
    return as_stored(record)


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


def weights_checksum(model) -> float:
    """A fingerprint of a model's weights: the float64 sum of the absolute values of its parameters
    and finite buffer entries (no cancellation, so devices that sum in another order agree to
    ~1e-12; an attention mask's -inf entries are left out). A sharded weight (``--fsdp``) counts
    once: its shares are summed over the processes (a collective: every process calls this)."""
    import torch

    from ..algorithms.fsdp import sharded_sum

    def finite_sum(t):
        t = t.detach().double().abs()
        return t[torch.isfinite(t)].sum()

    with torch.no_grad():
        return sharded_sum([*model.parameters(), *model.buffers()], finite_sum)


def unrecorded_options(stored: Mapping[str, Any], now: Mapping[str, Any]) -> bool:
    """Whether ``stored`` is a record of 0.4-0.6 for one of Avalanche's own strategies, whose options
    those versions never kept (the runner recorded ``options: {}`` for them: a killed run of
    ``avalanche.*`` could not resume), while ``now`` records some: the one case where a folder's
    options are unknown rather than different."""
    from ..strategies.avalanche_ranges import AVALANCHE_PREFIX

    strategy = (stored.get("run") or {}).get("strategy")
    return (stored.get("options") == {} and bool(now.get("options")) and isinstance(strategy, str)
            and strategy.startswith(AVALANCHE_PREFIX))


def check_record(folder, record: Mapping[str, Any], *, what: str, fix: str,
                 keys: Iterable[str] = CHECKED) -> None:
    """Refuse when ``folder`` records a run made with another ``record`` (only ``keys``): a
    ValueError with ``what`` (e.g. "the run in runs/x"), every difference, and ``fix``."""
    from .stream_changes import check_stream_version

    stored = read_record(folder, what)
    if stored is None:
        return
    check_stream_version(stored, what)
    keys = list(CHECKED if keys is None else keys)
    whole = set(CHECKED) <= set(keys)  # the last comparison before the run: the one that warns
    if "options" in keys and unrecorded_options(stored, as_stored(record)):
        keys.remove("options")
        logger.warning("%s was made before 0.7, which recorded no options for Avalanche's strategy %s: its "
                       "options cannot be compared; resuming with this run's, recorded from now on", what,
                       (stored.get("run") or {}).get("strategy"))
    changed = differences(stored, as_stored(record), keys)
    if changed:
        raise ValueError(f"{what} was made with other settings ({'; '.join(changed)}): {fix}")
    check_contents(stored, as_stored(record), what, warn=whole)


def write_record(folder, record: Mapping[str, Any]) -> Path:
    """Write ``folder/run.json`` atomically; a 0.2 folder's ``settings.json`` goes once it is."""
    folder = Path(folder)
    stored = {k: v for k, v in as_stored(record).items() if k != "migrated_from"}
    path = atomic_write_text(folder / RECORD_NAME, json.dumps(stored, indent=2, sort_keys=True) + "\n")
    (folder / LEGACY_SETTINGS_NAME).unlink(missing_ok=True)
    return path


__all__ = ["BENCHMARK_ATTRIBUTES", "CHECKED", "CHECKED_BEFORE_BUILDING", "CHECKSUM_TOLERANCE", "CONTENTS_FIX",
           "DAMAGED_FIX", "check_contents", "content_differences", "contents_of", "LEGACY_COMPARE_NAME",
           "LEGACY_SETTINGS_NAME", "RECORD_FORMAT", "RECORD_NAME", "UNRECORDED_OPTIONS", "as_stored",
           "check_record", "describe", "describe_benchmark", "describe_options", "differences", "make_record",
           "migrate", "read_record", "unchecked_fingerprints", "unrecorded_options", "weights_checksum",
           "write_record"]
