"""Where 0.6's modules and names went in 0.7 (Redesign IV: a wing per model family), for one version.

0.7 moved modules into their family's wing (``strategies/text_l2p.py`` is
``strategies/text/l2p.py``, ``benchmarks/text_trace.py`` is ``benchmarks/text/trace.py``, ...)
and MoRAM's layer into one package (``layers/moram_paths.py`` is ``layers/moram/paths/``). The old
dotted names keep working until 0.8, each with a ``DeprecationWarning`` that names the new place:

* an old module path (``import moram_avalanche.strategies.text_strategies``,
  ``from moram_avalanche.layers.moram_bank import MoRAMBank``) is the new module itself, through
  :class:`MovedModuleFinder` (installed by ``moram_avalanche/__init__.py``). A moved package's
  submodules are found under its old name too (``experiments.analysis.report`` is
  ``experiments.clip.analysis.report``). That is also how a whole-strategy checkpoint pickled by
  0.6 (Avalanche's ``save_checkpoint``: its classes by their 0.6 module path) still loads;
* a module 0.7 split (``strategies.text_strategies`` became one module per method) is a module
  whose names are looked up in the new modules, in order;
* a name a room no longer holds (``from moram_avalanche.strategies.plugins import AnalyticHead``,
  now in ``strategies.clip.plugins``) is found by the room's ``__getattr__``
  (:func:`moved_name`).

Nothing is imported here: every table holds dotted names, resolved on first use (``utils`` is the
lowest room and may not import the others).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import types
import warnings
from typing import Dict, Optional, Tuple

PACKAGE = "moram_avalanche"
#: the version that removes the old names
REMOVED_IN = "0.8"

#: 0.6 module (under the package) -> the 0.7 module it is now
MOVED_MODULES: Dict[str, str] = {
    # layers: MoRAM as one package
    "layers.moram_bank": "layers.moram.bank",
    "layers.moram_config": "layers.moram.config",
    "layers.moram_variants": "layers.moram.variants",
    "layers.moram_backward": "layers.moram.backward",
    "layers.naive": "layers.moram.naive",
    "layers.routing_kernel": "layers.moram.paths.cpu_kernel",
    "layers.moram_dense": "layers.moram.paths.dense",
    "layers.moram_triton": "layers.moram.paths.triton",
    "layers.triton_routing": "layers.moram.paths.triton_kernels",
    # benchmarks: the images and text wings
    "benchmarks.check": "benchmarks.images.check",
    "benchmarks.classnames": "benchmarks.images.classnames",
    "benchmarks.clip_benchmark": "benchmarks.images.clip_benchmark",
    "benchmarks.domains": "benchmarks.images.domains",
    "benchmarks.fewshot": "benchmarks.images.fewshot",
    "benchmarks.label_space": "benchmarks.images.label_space",
    "benchmarks.prompts": "benchmarks.images.prompts",
    "benchmarks.reference_sets": "benchmarks.images.reference_sets",
    "benchmarks.streams": "benchmarks.images.streams",
    "benchmarks.synthetic": "benchmarks.images.synthetic",
    "benchmarks.validate": "benchmarks.images.validate",
    "benchmarks.code_sandbox": "benchmarks.text.code_sandbox",
    "benchmarks.codealpaca": "benchmarks.text.codealpaca",
    "benchmarks.humaneval": "benchmarks.text.humaneval",
    "benchmarks.mmlu": "benchmarks.text.mmlu",
    "benchmarks.release_answers": "benchmarks.text.release_answers",
    "benchmarks.superni_pseudo": "benchmarks.text.superni_pseudo",
    "benchmarks.synthetic_text": "benchmarks.text.synthetic",
    "benchmarks.text_metrics": "benchmarks.text.metrics",
    "benchmarks.text_stream": "benchmarks.text.stream",
    "benchmarks.text_superni": "benchmarks.text.superni",
    "benchmarks.text_tasks": "benchmarks.text.tasks",
    "benchmarks.text_trace": "benchmarks.text.trace",
    # strategies: the clip and text wings
    "strategies.base": "strategies.clip.loop",
    "strategies.builtins": "strategies.clip.builtins",
    "strategies.codyra": "strategies.clip.codyra",
    "strategies.finetune": "strategies.clip.finetune",
    "strategies.finetune_alone": "strategies.clip.finetune_alone",
    "strategies.icarl": "strategies.clip.icarl",
    "strategies.image_cache": "strategies.clip.image_cache",
    "strategies.inflora": "strategies.clip.inflora",
    "strategies.lora_baselines": "strategies.clip.lora_baselines",
    "strategies.lwf": "strategies.clip.lwf",
    "strategies.moe_adapters": "strategies.clip.moe_adapters",
    "strategies.moram": "strategies.clip.moram",
    "strategies.rail": "strategies.clip.rail",
    "strategies.wiseft": "strategies.clip.wiseft",
    "strategies.zeroshot": "strategies.clip.zeroshot",
    "strategies.zscl": "strategies.clip.zscl",
    "strategies.zscl_finetune": "strategies.clip.zscl_finetune",
    "strategies.plugins.analytic": "strategies.clip.plugins.analytic",
    "strategies.plugins.codyra": "strategies.clip.plugins.codyra",
    "strategies.plugins.distillation": "strategies.clip.plugins.distillation",
    "strategies.plugins.exemplars": "strategies.clip.plugins.exemplars",
    "strategies.plugins.moe_adapters": "strategies.clip.plugins.moe_adapters",
    "strategies.plugins.weights": "strategies.clip.plugins.weights",
    "strategies.text_loop": "strategies.text.loop",
    "strategies.text_builtins": "strategies.text.builtins",
    "strategies.text_dualprompt": "strategies.text.dualprompt",
    "strategies.text_icl": "strategies.text.icl",
    "strategies.text_inflora": "strategies.text.inflora",
    "strategies.text_l2p": "strategies.text.l2p",
    "strategies.text_lfpt5": "strategies.text.lfpt5",
    "strategies.text_lori": "strategies.text.lori",
    "strategies.text_sapt": "strategies.text.sapt",
    "strategies.plugins.accumulation": "strategies.text.plugins.accumulation",
    "strategies.plugins.dualprompt": "strategies.text.plugins.dualprompt",
    "strategies.plugins.hidelora": "strategies.text.plugins.hidelora",
    "strategies.plugins.humaneval_sampling": "strategies.text.plugins.humaneval_sampling",
    "strategies.plugins.l2p": "strategies.text.plugins.l2p",
    "strategies.plugins.lfpt5": "strategies.text.plugins.lfpt5",
    "strategies.plugins.mmlu_evaluation": "strategies.text.plugins.mmlu_evaluation",
    "strategies.plugins.ogd": "strategies.text.plugins.ogd",
    "strategies.plugins.olora": "strategies.text.plugins.olora",
    "strategies.plugins.sapt": "strategies.text.plugins.sapt",
    "strategies.plugins.text_avalanche": "strategies.text.plugins.avalanche",
    "strategies.plugins.text_inflora": "strategies.text.plugins.inflora",
    "strategies.plugins.text_schedule": "strategies.text.plugins.schedule",
    "strategies.plugins.treelora": "strategies.text.plugins.treelora",
    # experiments: the clip and text wings, paper/
    "experiments.clip_family": "experiments.clip.family",
    "experiments.demo": "experiments.clip.demo",
    "experiments.text_family": "experiments.text.family",
    "experiments.demo_text": "experiments.text.demo",
    "experiments.text_recipes": "experiments.text.recipes",
    "experiments.paper_numbers": "experiments.paper.numbers",
    # experiments: CLIP's tools in the CLIP wing (packages: their submodules move with them)
    "experiments.analysis": "experiments.clip.analysis",
    "experiments.cost": "experiments.clip.cost",
}

#: 0.6 module that 0.7 split -> the 0.7 modules that hold its names, looked up in order
SPLIT_MODULES: Dict[str, Tuple[str, ...]] = {
    "strategies.text_strategies": tuple(f"strategies.text.{name}" for name in (
        "adapters", "moram", "finetune", "seq_lora", "inc_lora", "olora", "hidelora", "ogd", "treelora", "mtl",
        "lfpt5")),
    "experiments.loaders": ("experiments.clip.loaders", "experiments.text.loaders", "experiments.stream_arguments"),
    "experiments.recipes": ("experiments.clip.recipes", "experiments.text.recipes"),
    # MoRAM's one chooser and one switch; the CPU path (0.6's "fused") is the reference path
    "layers.moram_paths": ("layers.moram.paths.choice", "layers.moram.paths.switch"),
    "layers.moram_fused": ("layers.moram.paths.reference", "layers.moram.paths.choice", "layers.moram.layer",
                           "layers.moram.backward"),
    # reproduce: one pipeline in experiments/paper/, each family's tables, protocols and settings in its wing
    "experiments.paper_tables": ("experiments.clip.paper_tables", "experiments.clip.table_spec",
                                 "experiments.clip.protocols", "experiments.paper.spec"),
    "experiments.reproduce_plan": ("experiments.clip.reproduce", "experiments.clip.protocols", "experiments.paper.runs",
                                   "experiments.paper.settings", "experiments.paper.needs", "experiments.paper.setup",
                                   "experiments.paper.plan_text"),
    "experiments.reproduce_text": tuple(f"experiments.{name}" for name in (
        "text.reproduce", "text.paper_tables", "text.table_spec", "text.rehearsal", "text.stream_protocol",
        "text.streams", "text.lm_cl_stream", "text.trace_stream", "text.superni_stream", "text.codealpaca_stream",
        "paper.settings", "paper.runs", "paper.needs", "paper.setup", "paper.plan_text", "paper.results",
        "paper.report")),
    "experiments.reproduce_report": ("experiments.paper.report", "experiments.paper.results", "experiments.paper.figure",
                                     "experiments.clip.table_spec"),
}

#: (0.6 module 0.7 split, a name it held that is now computed) -> the function that computes it
COMPUTED_NAMES: Dict[Tuple[str, str], str] = {
    # the package's own language-model strategies by name: now the registry's
    ("strategies.text_strategies", "TEXT_STRATEGIES"): "strategies.registry.package_text_strategies",
}

#: (0.6 module 0.7 split, a name it held) -> what replaces it: ``"module:attribute.path"`` (the
#: object there, under another name)
RENAMED_NAMES: Dict[Tuple[str, str], str] = {
    ("experiments.paper_tables", "resolve_tables"): "experiments.clip.family:FAMILY.reproduction.resolve",
}

#: (0.6 module 0.7 split, a name it held) -> why it has no drop-in replacement and what to use: the
#: AttributeError's words (the one pipeline of experiments/paper/ took these over with new signatures)
REMOVED_NAMES: Dict[Tuple[str, str], str] = {
    ("experiments.reproduce_plan", "files_needed"): "a CLIP protocol's method now: "
        "moram_avalanche.experiments.clip.protocols.Protocol.files_needed(run, settings)",
    ("experiments.reproduce_plan", "format_run"): "a CLIP protocol's method now: "
        "moram_avalanche.experiments.clip.protocols.Protocol.format_run(run, settings)",
    ("experiments.reproduce_plan", "format_plan"): "use moram_avalanche.experiments.paper.plan_text.plan_text(specs, "
        "settings), every family's plan",
    ("experiments.reproduce_text", "TextRun"): "a run is moram_avalanche.experiments.paper.runs.Run(protocol, "
        "strategy, options, seed) for every family; a text run's protocol is a "
        "moram_avalanche.experiments.text.stream_protocol.TextRunProtocol",
}

#: room (package) -> {name it held in 0.6: the 0.7 module that holds it}
MOVED_NAMES: Dict[str, Dict[str, str]] = {
    "strategies.plugins": {
        "AnalyticHead": "strategies.clip.plugins.analytic", "CoDyRAPlugin": "strategies.clip.plugins.codyra",
        **{name: "strategies.clip.plugins.distillation"
           for name in ("ExemplarDistillation", "LwFDistillation", "ReferenceDistillation", "ZSCLDistillation")},
        "ExemplarMemory": "strategies.clip.plugins.exemplars",
        "MoEAdaptersPlugin": "strategies.clip.plugins.moe_adapters",
        **{name: "strategies.clip.plugins.weights" for name in ("L2Anchor", "WeightEnsemble", "WiSEMerge")},
    },
}


def _full(name: str) -> str:
    return f"{PACKAGE}.{name}"


def _outside_imports() -> int:
    """The ``stacklevel`` of the first frame that is neither this module, a room's ``__getattr__`` nor the import system:
    the line that imported the old name, where the warning belongs. ``warnings`` itself does not
    count the import system's frames (``importlib._bootstrap``), so neither does this."""
    frame, level = sys._getframe(1), 1
    while frame is not None:
        name = frame.f_code.co_filename
        internal = "importlib" in name and "_bootstrap" in name
        if name != __file__ and not internal and frame.f_code.co_name != "__getattr__":  # a room's hook
            return level
        frame, level = frame.f_back, level + (0 if internal else 1)
    return level


def _warn(old: str, new: str) -> None:
    warnings.warn(f"{old} moved to {new} in moram-avalanche 0.7; the old name goes in {REMOVED_IN}",
                  DeprecationWarning, stacklevel=_outside_imports())


class _SplitModule(types.ModuleType):
    """A 0.6 module split in 0.7: each name is looked up in the new modules, in order."""

    def __init__(self, name: str, targets: Tuple[str, ...]):
        super().__init__(name, f"0.6's {name}, split in 0.7 into {', '.join(targets)}")
        self.__targets = targets

    def __getattr__(self, attribute: str):
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        key = (self.__name__[len(PACKAGE) + 1:], attribute)
        if key in COMPUTED_NAMES:
            module, _, function = _full(COMPUTED_NAMES[key]).rpartition(".")
            return getattr(importlib.import_module(module), function)()
        if key in RENAMED_NAMES:
            module, _, path = RENAMED_NAMES[key].partition(":")
            value = importlib.import_module(_full(module))
            for part in path.split("."):
                value = getattr(value, part)
            return value
        if key in REMOVED_NAMES:
            raise AttributeError(f"{self.__name__}.{attribute} was removed in 0.7: {REMOVED_NAMES[key]}")
        for target in self.__targets:
            module = importlib.import_module(target)
            if hasattr(module, attribute):
                return getattr(module, attribute)
        raise AttributeError(f"module {self.__name__!r} (split in 0.7 into {', '.join(self.__targets)}) has no "
                             f"attribute {attribute!r}")

    def __dir__(self):
        return sorted({name for target in self.__targets for name in dir(importlib.import_module(target))})


class _Alias(importlib.abc.Loader):
    """Loads a moved module's old name as the new module itself (one object under both names)."""

    def __init__(self, new: str):
        self.new = new

    def create_module(self, spec):
        module = importlib.import_module(self.new)
        _warn(spec.name, self.new)
        return module

    def exec_module(self, module):
        """The new module was executed when it was imported."""


class _Split(importlib.abc.Loader):
    def __init__(self, targets: Tuple[str, ...]):
        self.targets = targets

    def create_module(self, spec):
        _warn(spec.name, ", ".join(self.targets))
        return _SplitModule(spec.name, self.targets)

    def exec_module(self, module):
        """Nothing runs: names are looked up on use."""


def moved_to(old: str) -> Optional[str]:
    """Where 0.6's module ``old`` (under the package) is now: its entry in :data:`MOVED_MODULES`,
    or, for a submodule of a moved package, the same submodule of the package's new place
    (``experiments.analysis.report`` -> ``experiments.clip.analysis.report``); None when it did
    not move."""
    parts = old.split(".")
    for end in range(len(parts), 0, -1):
        package = ".".join(parts[:end])
        if package in MOVED_MODULES:
            return ".".join([MOVED_MODULES[package], *parts[end:]])
    return None


class MovedModuleFinder(importlib.abc.MetaPathFinder):
    """Finds 0.6's module paths (:data:`MOVED_MODULES`, submodules of its packages included, and
    :data:`SPLIT_MODULES`) for one version."""

    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith(PACKAGE + "."):
            return None
        old = fullname[len(PACKAGE) + 1:]
        new = moved_to(old)
        if new is not None:
            return importlib.util.spec_from_loader(fullname, _Alias(_full(new)))
        if old in SPLIT_MODULES:
            return importlib.util.spec_from_loader(fullname, _Split(tuple(map(_full, SPLIT_MODULES[old]))))
        return None


class _Room(types.ModuleType):
    """A room that exports a name 0.6 also had as a submodule (``benchmarks.clip_benchmark`` is a
    function and was a module): importing the old module path through :class:`MovedModuleFinder`
    must not replace the room's name by the module (the import system sets a loaded submodule as
    an attribute of its parent), whether the room holds the name already or imports it on first
    use (a name of its ``__all__`` that its ``__getattr__`` serves)."""

    def __setattr__(self, key, value):
        exported = key in self.__dict__ or key in self.__dict__.get("__all__", ())
        if (isinstance(value, types.ModuleType) and value.__name__ != f"{self.__name__}.{key}"
                and exported and not isinstance(self.__dict__.get(key), types.ModuleType)):
            return  # an old path's alias: the room keeps its own name
        super().__setattr__(key, value)


def keep_names(room: str) -> None:
    """Protect the names of room ``room`` (its ``__name__``) from old module paths' aliases (:class:`_Room`)."""
    sys.modules[room].__class__ = _Room


def install() -> None:
    """Put :class:`MovedModuleFinder` on ``sys.meta_path``, once, before the standard finders: a
    submodule of a moved package (``experiments.analysis.report``) would otherwise be found by the
    path finder in the folder of the package it aliases, and loaded a second time under its old
    name (two copies of every class). The finder answers only the old names of its tables, none of
    which is a module that exists (a test holds every old name to that), so every other import
    passes through it to the standard finders."""
    if not any(isinstance(finder, MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, MovedModuleFinder())


def moved_name(room: str, name: str):
    """The object 0.6's room ``room`` (a package's ``__name__``) held as ``name``, from where it
    is now, with a DeprecationWarning; AttributeError for a name the room never held (what a
    room's ``__getattr__`` raises)."""
    short = room[len(PACKAGE) + 1:] if room.startswith(PACKAGE + ".") else room
    new = MOVED_NAMES.get(short, {}).get(name)
    if new is None:
        old_module = f"{short}.{name}" if short != PACKAGE else name
        if moved_to(old_module) is not None or old_module in SPLIT_MODULES:  # a submodule, by attribute access
            return importlib.import_module(f"{room}.{name}")
        raise AttributeError(f"module {room!r} has no attribute {name!r}")
    _warn(f"{room}.{name}", f"{_full(new)}.{name}")
    return getattr(importlib.import_module(_full(new)), name)


__all__ = ["COMPUTED_NAMES", "MOVED_MODULES", "REMOVED_NAMES", "RENAMED_NAMES", "MOVED_NAMES", "MovedModuleFinder", "REMOVED_IN", "SPLIT_MODULES",
           "install", "keep_names", "moved_name", "moved_to"]
