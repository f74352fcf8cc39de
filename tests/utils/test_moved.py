"""0.6's module paths and names keep working for one version after Redesign IV moved them
(``moram_avalanche/utils/moved.py``); a moved package's submodules are the new modules themselves,
never second copies, and no old name shadows a module that exists.

``data/names_0_6.json`` was written by 0.6.0 itself before anything moved: every module of the
package and the public names it held (its ``__all__``, else what it defined). Each must still
import by its 0.6 path and give the object the package holds now.
"""

import importlib
import json
import pickle
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from moram_avalanche.utils.moved import (
    COMPUTED_NAMES,
    MOVED_MODULES,
    MOVED_NAMES,
    REMOVED_NAMES,
    RENAMED_NAMES,
    SPLIT_MODULES,
    moved_to,
)

NAMES_0_6 = json.loads((Path(__file__).with_name("data") / "names_0_6.json").read_text())
PACKAGE = "moram_avalanche"
PACKAGE_DIR = Path(__file__).resolve().parents[2] / PACKAGE


def old_import(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return importlib.import_module(name)


@pytest.mark.parametrize("module", sorted(NAMES_0_6))
def test_every_module_and_name_of_0_6_imports_by_its_old_path(module):
    old = old_import(module)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # a room's moved names warn: checked below
        missing = [name for name in NAMES_0_6[module] if not hasattr(old, name)
                   and (module[len(PACKAGE) + 1:], name) not in REMOVED_NAMES]
    assert missing == [], f"{module} no longer gives {missing}"


def test_a_name_removed_without_a_drop_in_says_what_replaces_it():
    for (old, name), why in REMOVED_NAMES.items():
        assert name in NAMES_0_6[f"{PACKAGE}.{old}"], (old, name)  # a 0.6 name, not a typo
        with pytest.raises(AttributeError, match=f"{old}.{name} was removed in 0.7: "):
            getattr(old_import(f"{PACKAGE}.{old}"), name)
        assert "moram_avalanche." in why  # names where its replacement is


def test_a_renamed_name_is_its_replacement():
    from moram_avalanche.experiments.clip.family import FAMILY

    resolve_tables = old_import("moram_avalanche.experiments.paper_tables").resolve_tables
    assert resolve_tables("all") == FAMILY.reproduction.resolve("all") and len(resolve_tables("all")) > 1
    assert set(RENAMED_NAMES) == {("experiments.paper_tables", "resolve_tables")}


def test_a_moved_module_is_the_new_module_itself_under_its_old_name():
    for old, new in MOVED_MODULES.items():
        assert old_import(f"{PACKAGE}.{old}") is importlib.import_module(f"{PACKAGE}.{new}"), old


def test_a_split_module_gives_each_name_from_the_module_that_holds_it_now():
    for old, targets in SPLIT_MODULES.items():
        module = old_import(f"{PACKAGE}.{old}")
        for name in NAMES_0_6[f"{PACKAGE}.{old}"]:
            if (old, name) in COMPUTED_NAMES or (old, name) in RENAMED_NAMES or (old, name) in REMOVED_NAMES:
                continue
            holders = [importlib.import_module(f"{PACKAGE}.{t}") for t in targets]
            first = next(h for h in holders if hasattr(h, name))
            assert getattr(module, name) is getattr(first, name), (old, name)


def test_the_package_text_strategies_table_of_0_6_is_the_registrys_now():
    from moram_avalanche.strategies.registry import package_text_strategies, text_strategies

    table = old_import("moram_avalanche.strategies.text_strategies").TEXT_STRATEGIES
    assert table == package_text_strategies() and not any(name.startswith("avalanche.") for name in table)
    assert {"moram", "finetune", "seq-lora", "o-lora", "mtl", "lfpt5"} <= set(table) <= set(text_strategies())


def test_a_name_a_room_no_longer_holds_comes_from_its_new_module():
    for room, names in MOVED_NAMES.items():
        for name, new in names.items():
            with pytest.warns(DeprecationWarning, match=f"{PACKAGE}.{room}.{name} moved to {PACKAGE}.{new}.{name}"):
                value = getattr(importlib.import_module(f"{PACKAGE}.{room}"), name)
            assert value is getattr(importlib.import_module(f"{PACKAGE}.{new}"), name)


def test_a_0_6_pickle_of_a_moved_class_loads():
    # what Avalanche's whole-strategy checkpoints of 0.6 hold: classes by their 0.6 module path
    # (pickle's GLOBAL opcode, written by hand: module, newline, name, newline)
    from moram_avalanche.strategies.text.ogd import TextOGD
    from moram_avalanche.strategies.text.plugins.ogd import OGDPlugin

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        assert pickle.loads(b"cmoram_avalanche.strategies.text_strategies\nTextOGD\n.") is TextOGD
        assert pickle.loads(b"cmoram_avalanche.strategies.plugins.ogd\nOGDPlugin\n.") is OGDPlugin


def test_an_old_module_path_does_not_replace_the_rooms_name_of_the_same_name():
    # benchmarks.clip_benchmark was a module and the room's function: the import system sets a
    # loaded submodule on its parent, which must not hide the function
    from moram_avalanche.benchmarks.images.clip_benchmark import clip_benchmark as function

    old_import("moram_avalanche.benchmarks.clip_benchmark")
    import moram_avalanche.benchmarks as room

    assert room.clip_benchmark is function


def test_an_unknown_module_is_still_not_found():
    with pytest.raises(ModuleNotFoundError, match="moram_avalanche.strategies.no_such_module"):
        importlib.import_module("moram_avalanche.strategies.no_such_module")


def test_the_warning_names_the_new_place_and_points_at_the_importing_line(tmp_path):
    script = tmp_path / "user_code.py"
    script.write_text("import warnings\nwarnings.simplefilter('always')\n"
                      "from moram_avalanche.strategies.text_l2p import TextL2P\n"
                      "from moram_avalanche.strategies.plugins import AnalyticHead\n")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if "DeprecationWarning" in line]
    assert any(line.startswith(f"{script}:3: DeprecationWarning: moram_avalanche.strategies.text_l2p moved to "
                               "moram_avalanche.strategies.text.l2p in moram-avalanche 0.7") for line in lines), lines
    assert any(line.startswith(f"{script}:4: DeprecationWarning: moram_avalanche.strategies.plugins.AnalyticHead "
                               "moved to moram_avalanche.strategies.clip.plugins.analytic.AnalyticHead")
               for line in lines), lines


def test_a_moved_packages_submodules_move_with_it():
    assert moved_to("experiments.analysis") == "experiments.clip.analysis"
    assert moved_to("experiments.analysis.report") == "experiments.clip.analysis.report"
    assert moved_to("experiments.cost.measure") == "experiments.clip.cost.measure"
    assert moved_to("layers.moram_bank") == "layers.moram.bank"
    assert moved_to("experiments.clip.analysis") is None and moved_to("experiments.costs") is None


def test_no_old_name_is_a_module_that_exists():
    # the finder comes before the standard ones: an old name that exists again would be shadowed
    for old in [*MOVED_MODULES, *SPLIT_MODULES]:
        path = PACKAGE_DIR.joinpath(*old.split("."))
        assert not path.with_suffix(".py").exists() and not path.is_dir(), old


def test_old_paths_of_the_analysis_and_the_cost_are_the_new_modules_with_a_warning():
    # a fresh process, the old names imported first: the path finder must not load second copies
    code = (
        "import warnings\n"
        "warnings.simplefilter('error', DeprecationWarning)\n"
        "try:\n"
        "    import moram_avalanche.experiments.analysis.report\n"
        "except DeprecationWarning as warning:\n"
        "    print(warning)\n"
        "warnings.simplefilter('ignore', DeprecationWarning)\n"
        "import moram_avalanche.experiments.analysis.report as old_report\n"
        "from moram_avalanche.experiments.cost.measure import CostOptions as OldOptions\n"
        "from moram_avalanche.experiments.analysis import analyze as old_analyze\n"
        "import moram_avalanche.experiments.clip.analysis.report as report\n"
        "from moram_avalanche.experiments.clip.cost.measure import CostOptions\n"
        "from moram_avalanche import analyze, measure_cost\n"
        "import moram_avalanche.experiments.clip.cost as cost\n"
        "print(old_report is report, OldOptions is CostOptions, old_analyze is report.analyze is analyze,"
        " measure_cost is cost.measure_cost)\n"
        "import sys\n"
        "print(sorted(m for m in sys.modules if m.startswith('moram_avalanche.experiments.clip.analysis.')"
        " and sys.modules[m] is not sys.modules.get(m.replace('.clip.analysis.', '.analysis.'), sys.modules[m])))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         cwd=PACKAGE_DIR.parent, env={"PYTHONPATH": str(PACKAGE_DIR.parent), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    warning, same, copies = out.stdout.strip().splitlines()[-3:]
    assert warning.startswith("moram_avalanche.experiments.analysis moved to moram_avalanche.experiments.clip.analysis "
                              "in moram-avalanche 0.7")
    assert same == "True True True True" and copies == "[]"
