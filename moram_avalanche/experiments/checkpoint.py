"""Lean run checkpoints between experiences: the trained state and the run state, not CLIP.

A checkpoint holds what changes during a run -- the strategy's
:meth:`~moram_avalanche.strategies.clip.loop.CLIPStrategy.checkpoint_model_state` (the declared
state of the adapter layers, e.g. MoRAM's atom banks; full fine-tuning: the whole model), the
training clock, the domains seen, the state of plugins and metrics that have one
(``state_dict``/``load_state_dict``) and every RNG (:mod:`~moram_avalanche.utils.random_state`) -- so a
run resumed from it ends exactly as an uninterrupted run. It is written atomically and loads with ``torch.load(weights_only=True)``.

Damage is named and survivable: :func:`save_run_state` keeps the checkpoint it replaces
(``checkpoint.prev.pt`` beside ``checkpoint.pt``: one experience earlier), and
:func:`load_latest_run_state` falls back to it, with a warning naming the damaged file, when
the newest cannot be read (a truncated copy, a full disk); with no readable checkpoint left it
stops with a :class:`DamagedCheckpointError` that names the files and the ways out.

For Avalanche's own whole-strategy pickles, :func:`save_checkpoint` is Avalanche's
``save_checkpoint`` with its torch 2.15 fix applied only while it writes
(:func:`optimizer_names_for_dill`; integration guide, section 5): importing this package
patches nothing.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import logging
import os
import pickle
from pathlib import Path
from typing import Dict, Iterator, Optional, Tuple

import torch

from ..benchmarks.images.clip_benchmark import Domain
from ..utils.files import atomic_write, atomic_write_bytes
from ..utils.random_state import rng_state, set_rng_state

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
#: the entries every run checkpoint holds
STATE_KEYS = ("version", "strategy", "experiences_done", "model", "clock", "seen_domains", "stateful", "rng")
_CLOCK_FIELDS = ("train_iterations", "train_exp_counter", "train_exp_epochs",
                 "train_exp_iterations", "train_epoch_iterations", "total_iterations")


#: the ``torch.optim`` submodules dill must find by name to pickle optimizers by reference
OPTIMIZER_MODULES = ("sgd", "adam", "adamw", "lr_scheduler")


@contextlib.contextmanager
def optimizer_names_for_dill() -> Iterator[None]:
    """While open, ``torch.optim.<submodule>`` names exist again, so dill pickles optimizers by reference.

    torch 2.15 removes ``torch.optim.sgd``, ``adam``, ... from the ``torch.optim`` namespace;
    dill then pickles the optimizer classes by value and fails on ``typing_extensions``
    sentinels (Avalanche's ``save_checkpoint`` raises ``PicklingError``; integration guide,
    section 5, fix (b)). The names this adds are removed again on exit.
    """
    added = [name for name in OPTIMIZER_MODULES if not hasattr(torch.optim, name)]
    for name in added:
        setattr(torch.optim, name, importlib.import_module(f"torch.optim.{name}"))
    try:
        yield
    finally:
        for name in added:
            delattr(torch.optim, name)


def save_checkpoint(strategy, path, exclude=None) -> Path:
    """Avalanche's ``save_checkpoint(strategy, path, exclude)`` -- a dill pickle of the whole
    strategy, resumed with ``avalanche.checkpointing.maybe_load_checkpoint`` -- with the torch
    2.15 fix scoped to the write (:func:`optimizer_names_for_dill`), written atomically.

    :func:`save_run_state` is this package's lean alternative (adapter state, not all of CLIP).
    """
    from avalanche.checkpointing import save_checkpoint as avalanche_save_checkpoint

    with optimizer_names_for_dill():
        return atomic_write(path, lambda file: avalanche_save_checkpoint(strategy, file, exclude=exclude),
                            mode="wb")


def _stateful(strategy):
    """Plugins and metrics with a state to keep, by a stable key."""
    items = {}
    for index, plugin in enumerate(strategy.plugins):
        if hasattr(plugin, "state_dict") and hasattr(plugin, "load_state_dict"):
            items[f"plugin{index}:{type(plugin).__name__}"] = plugin
    for index, metric in enumerate(getattr(strategy.evaluator, "metrics", [])):
        if hasattr(metric, "state_dict") and hasattr(metric, "load_state_dict"):
            items[f"metric{index}:{type(metric).__name__}"] = metric
    return items


def _kind_and_class(key: str) -> Tuple[str, str]:
    """``"plugin3:MoRAMPlugin"`` -> ``("plugin", "MoRAMPlugin")``."""
    place, _, name = key.partition(":")
    return place.rstrip("0123456789"), name


def _place(key: str) -> int:
    digits = key.partition(":")[0].lstrip("abcdefghijklmnopqrstuvwxyz")
    return int(digits) if digits.isdigit() else 0


def match_stateful(saved, items: dict, path) -> dict:
    """``{saved key: the strategy's item}``: each saved plugin or metric state matched to the
    strategy's item of the same kind and class, the n-th saved of a class to its n-th item.

    The saved keys number every plugin (``plugin3:MoRAMPlugin``), and that number moves whenever
    a version puts other plugins before a method's own: 0.2.0 wrote MoRAM's plugin as
    ``plugin0:MoRAMPlugin`` (the run path's PeakMemory and RunTime after it), 0.3.0 puts the
    loop's budget, schedule and progress and the run path's plugins first. Matching by class and
    order among that class, not by the number, resumes both. A saved state whose class the
    strategy has fewer of is a ValueError naming the file and the fix."""
    groups: Dict[Tuple[str, str], list] = {}
    for key in sorted(items, key=_place):
        groups.setdefault(_kind_and_class(key), []).append(items[key])
    matched, taken = {}, {}
    for key in sorted(saved, key=_place):
        group = _kind_and_class(key)
        position = taken.get(group, 0)
        candidates = groups.get(group, [])
        if position >= len(candidates):
            raise ValueError(f"{path} holds state for {key}, which this strategy does not have (its "
                             f"{group[0]}s: {', '.join(items) or 'none'}): resume it with the strategy and plugins "
                             "it was made with, use another output folder, or start over (--no-resume, resume=False)")
        matched[key] = candidates[position]
        taken[group] = position + 1
    return matched


class DamagedCheckpointError(ValueError):
    """A run checkpoint that cannot be read (truncated, overwritten, of another format)."""


def previous_path(path) -> Path:
    """Where :func:`save_run_state` keeps the checkpoint that ``path`` replaced
    (``checkpoint.pt`` -> ``checkpoint.prev.pt``)."""
    path = Path(path)
    return path.with_name(f"{path.stem}.prev{path.suffix}")


def save_run_state(strategy, path, *, keep_previous: bool = True, identity: Optional[dict] = None) -> Path:
    """Write the checkpoint of ``strategy`` after its last completed experience.

    The file is written atomically; with ``keep_previous`` the checkpoint it replaces is
    kept as :func:`previous_path` (renamed, not copied), the fallback of
    :func:`load_latest_run_state`. ``identity`` (JSON-able: the checked parts of the run's
    record, :data:`~moram_avalanche.experiments.record.CHECKED`) says what made the run; every
    load compares it with what resumes it (:func:`restore_run_state`).
    """
    state = {
        "identity": identity,
        "version": FORMAT_VERSION,
        "strategy": type(strategy).__name__,
        "experiences_done": int(strategy.clock.train_exp_counter),
        "model": {k: v.detach().cpu() for k, v in strategy.checkpoint_model_state().items()},
        "clock": {f: int(getattr(strategy.clock, f)) for f in _CLOCK_FIELDS},
        "seen_domains": [
            {"name": d.name, "classnames": list(d.classnames), "template": d.template,
             "eval_templates": list(d.eval_templates)}
            for d in getattr(strategy, "seen_domains", ())  # the CLIP loop's; the text loop has none
        ],
        "stateful": {key: item.state_dict() for key, item in _stateful(strategy).items()},
        "rng": rng_state(),
    }
    buffer = io.BytesIO()
    torch.save(state, buffer)
    path = Path(path)
    if keep_previous and path.exists():
        os.replace(path, previous_path(path))  # killed right after: the loader takes the previous
    return atomic_write_bytes(path, buffer.getvalue())


def read_run_state(path) -> dict:
    """The content of a run checkpoint; a :class:`DamagedCheckpointError` naming ``path`` when
    it cannot be read or lacks what a run checkpoint holds."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, EOFError, pickle.UnpicklingError, OSError, ValueError, KeyError) as err:
        first = (str(err).strip().splitlines() or [""])[0].split(". ")[0][:100]
        raise DamagedCheckpointError(f"{path} cannot be read, truncated or overwritten "
                                     f"({type(err).__name__}: {first})") from None
    if not isinstance(state, dict) or any(key not in state for key in STATE_KEYS):
        raise DamagedCheckpointError(f"{path} is not a run checkpoint of this package")
    if state["version"] != FORMAT_VERSION:
        raise DamagedCheckpointError(f"{path}: checkpoint format {state['version']}, expected {FORMAT_VERSION}")
    return state


def load_latest_run_state(strategy, path, identity: Optional[dict] = None) -> Tuple[int, Optional[Path]]:
    """Restore ``strategy`` from the newest readable of ``path`` and its previous checkpoint
    (:func:`previous_path`); returns ``(experiences done, the file used)``, ``(0, None)`` when
    neither exists. ``identity``: what the resumed run is (see :func:`restore_run_state`).

    A damaged newest checkpoint is skipped with a warning that names it (the run resumes one
    experience earlier); when no checkpoint can be read, a :class:`DamagedCheckpointError`
    names the files and the ways out.
    """
    state, candidate = read_latest_run_state(path)
    if state is None:
        return 0, None
    return restore_run_state(strategy, state, candidate, identity), candidate


def read_latest_run_state(path, doing: str = "resuming from") -> Tuple[Optional[dict], Optional[Path]]:
    """``(state, the file read)`` of the newest readable of ``path`` and its previous checkpoint,
    ``(None, None)`` when neither exists (what :func:`load_latest_run_state` and ``analyze``
    read; the same fallback and errors)."""
    damaged = []
    for candidate in (Path(path), previous_path(path)):
        if not candidate.exists():
            continue
        try:
            state = read_run_state(candidate)
        except DamagedCheckpointError as err:
            damaged.append(str(err))
            continue
        if damaged:
            logger.warning("%s; %s the previous checkpoint %s instead (one experience "
                           "earlier)", damaged[0], doing, candidate)
        return state, candidate
    if damaged:
        raise DamagedCheckpointError(
            f"{'; '.join(damaged)}, and no earlier checkpoint can be read: start the run over "
            "(--no-resume, resume=False), or put back an intact copy of the file")
    return None, None


def load_run_state(strategy, path, identity: Optional[dict] = None) -> int:
    """Restore ``strategy`` from a checkpoint; returns how many experiences were done."""
    return restore_run_state(strategy, read_run_state(path), path, identity)


def check_identity(path, stored: Optional[dict], identity: Optional[dict]) -> None:
    """Refuse a checkpoint whose recorded identity differs from the run resuming it (a
    ValueError listing the differences); a checkpoint of 0.2 records none (its folder's record
    was checked instead)."""
    if stored is None or identity is None:
        return
    from .record import CHECKED, as_stored, check_contents, differences

    changed = differences(stored, as_stored(identity), [key for key in CHECKED if key in stored])
    if changed:
        raise ValueError(f"{path} was written by another run ({'; '.join(changed[:6])}"
                         f"{'; ...' if len(changed) > 6 else ''}): resume it with the settings it was made "
                         "with, use another output folder, or start over (--no-resume, resume=False)")
    check_contents(stored, as_stored(identity), f"the run that wrote {path}", warn=False)


def restore_run_state(strategy, state: dict, path, identity: Optional[dict] = None) -> int:
    """Restore ``strategy`` from ``state`` (read from ``path``, named in errors); returns how
    many experiences were done. ``identity``: the checked parts of the resuming run's record,
    compared with the checkpoint's (:func:`check_identity`)."""
    if state["strategy"] != type(strategy).__name__:
        raise ValueError(
            f"{path} was written by a {state['strategy']} run, not {type(strategy).__name__}: "
            "use another output folder or the same strategy"
        )
    check_identity(path, state.get("identity"), identity)
    matched = match_stateful(state["stateful"], _stateful(strategy), path)  # before anything is restored
    strategy.load_checkpoint_model_state(state["model"])
    for field in _CLOCK_FIELDS:
        setattr(strategy.clock, field, state["clock"][field])
    if hasattr(strategy, "seen_domains"):  # the CLIP loop's
        strategy.seen_domains = [
            Domain(d["name"], tuple(d["classnames"]), d["template"], tuple(d["eval_templates"]))
            for d in state["seen_domains"]
        ]
    for key, item in matched.items():
        item.load_state_dict(state["stateful"][key])
    if getattr(strategy, "text_head", None) is not None:  # the CLIP loop's cached class embeddings
        strategy.text_head.clear()
    set_rng_state(state["rng"])
    return int(state["experiences_done"])


__all__ = ["FORMAT_VERSION", "OPTIMIZER_MODULES", "STATE_KEYS", "DamagedCheckpointError",
           "check_identity", "load_latest_run_state", "load_run_state", "match_stateful", "optimizer_names_for_dill",
           "previous_path", "read_latest_run_state",
           "read_run_state", "restore_run_state", "save_checkpoint", "save_run_state"]
