"""0.6's module paths kept for one version (utils/moved.py): a moved package's submodules are the
new modules themselves, never second copies; no old name shadows a module that exists."""

import subprocess
import sys
from pathlib import Path

from moram_avalanche.utils.moved import MOVED_MODULES, SPLIT_MODULES, moved_to

PACKAGE = Path(__file__).resolve().parents[2] / "moram_avalanche"


def test_a_moved_packages_submodules_move_with_it():
    assert moved_to("experiments.analysis") == "experiments.clip.analysis"
    assert moved_to("experiments.analysis.report") == "experiments.clip.analysis.report"
    assert moved_to("experiments.cost.measure") == "experiments.clip.cost.measure"
    assert moved_to("layers.moram_bank") == "layers.moram.bank"
    assert moved_to("experiments.clip.analysis") is None and moved_to("experiments.costs") is None


def test_no_old_name_is_a_module_that_exists():
    # the finder comes before the standard ones: an old name that exists again would be shadowed
    for old in [*MOVED_MODULES, *SPLIT_MODULES]:
        path = PACKAGE.joinpath(*old.split("."))
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
                         cwd=PACKAGE.parent, env={"PYTHONPATH": str(PACKAGE.parent), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    warning, same, copies = out.stdout.strip().splitlines()[-3:]
    assert warning.startswith("moram_avalanche.experiments.analysis moved to moram_avalanche.experiments.clip.analysis "
                              "in moram-avalanche 0.7")
    assert same == "True True True True" and copies == "[]"
