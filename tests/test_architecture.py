"""The house rules of DESIGN.md, checked on the source: import contracts, private names, branching."""

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "moram_avalanche"
MODULES = sorted(PACKAGE.rglob("*.py"))


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def resolve(path: Path, node: ast.ImportFrom) -> str:
    """The absolute module an ``ImportFrom`` reads from."""
    if not node.level:
        return node.module or ""
    package = module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    base = package[: len(package) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def lint_imports(cwd: Path, env_path: Path):
    executable = shutil.which("lint-imports")
    if executable is None:
        pytest.skip("import-linter is not installed (pip install -e '.[test]')")
    return subprocess.run([executable, "--config", "setup.cfg", "--no-cache"], cwd=cwd, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(env_path)}, timeout=120)


def test_the_import_contracts_hold():
    result = lint_imports(ROOT, ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "10 kept, 0 broken" in result.stdout


APP = "the app (experiments/ outside its wings) knows no family"


@pytest.mark.parametrize("module, line, contract", [
    ("layers/lora.py", "import avalanche", "layers/ is pure torch"),
    ("layers/moram/layer.py", "import open_clip", "layers/ is pure torch"),
    ("layers/base.py", "import transformers", "layers/ is pure torch"),
    ("text/targets.py", "import avalanche", "text/ imports no avalanche"),
    ("text/load.py", "from ..clip import load", "text/ imports no avalanche, no open_clip, not clip/"),
    ("clip/head.py", "from ..text import targets", "clip/ does not import text/"),
    ("algorithms/losses.py", "import avalanche.core", "import no avalanche"),
    ("clip/head.py", "from ..experiments import runner", "each room imports only the rooms below it"),
    ("models/scoring.py", "from ..strategies import needs", "each room imports only the rooms below it"),
    ("benchmarks/images/label_space.py", "from ...models import scoring", "each room imports only the rooms below it"),
    ("algorithms/teacher.py", "from . import distillation", "no import cycles"),
    # the two wings of each upper room
    ("benchmarks/images/streams.py", "from ..text import trace", "the two wings of a room import nothing of each other"),
    ("strategies/text/l2p.py", "from ..clip import moram", "strategies/clip and strategies/text import nothing"),
    ("experiments/clip/demo.py", "from ..text import recipes", "experiments/clip and experiments/text import nothing"),
    # the app: packages, not a list of modules, so a new module of the app is held to it too
    ("experiments/run.py", "from ..strategies.clip import moram", APP),
    ("experiments/compare.py", "from ..clip import load", APP),
    ("experiments/reproduce.py", "from .clip import paper_tables", APP),
    ("experiments/commands.py", "from .text import family", APP),
    ("experiments/a_new_module.py", "from ..strategies.text import l2p", APP),
    ("experiments/paper/report.py", "from ..clip import paper_tables", APP),
])
def test_each_contract_breaks_when_its_rule_is_broken(tmp_path, module, line, contract):
    shutil.copytree(PACKAGE, tmp_path / "moram_avalanche")
    shutil.copy(ROOT / "setup.cfg", tmp_path / "setup.cfg")
    if "cycles" in contract:  # a cycle needs the way back too
        with open(tmp_path / "moram_avalanche" / "algorithms" / "distillation.py", "a") as file:
            file.write("\nfrom . import teacher\n")
    with open(tmp_path / "moram_avalanche" / module, "a") as file:  # "a": a new module too
        file.write(f"\n{line}\n")
    result = lint_imports(tmp_path, tmp_path)
    assert result.returncode == 1
    broken = [row for row in result.stdout.splitlines() if " BROKEN" in row]  # "BROKEN (n ignored imports)" too
    assert len(broken) >= 1 and any(contract in row for row in broken), result.stdout


def private_crossings(path: Path, source: str) -> list:
    """Private names of other package modules that ``source`` (the text of ``path``) reaches:
    ``from .x import _y`` and ``module._y`` on a package module it imported."""
    crossings, tree, modules = [], ast.parse(source), {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            origin = resolve(path, node)
            if not origin.startswith("moram_avalanche"):
                continue
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.endswith("__"):  # dunders are public
                    crossings.append(f"{module_name(path)} imports {origin}.{alias.name}")
                modules[alias.asname or alias.name] = origin
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("moram_avalanche"):
                    modules[alias.asname or alias.name.split(".")[0]] = alias.name
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in modules and node.attr.startswith("_")
                and not node.attr.startswith("__")):
            crossings.append(f"{module_name(path)} reads {node.value.id}.{node.attr}")
    return crossings


def test_no_private_name_crosses_a_module_boundary():
    assert [c for path in MODULES for c in private_crossings(path, path.read_text())] == []


def test_the_private_name_check_sees_both_forms():
    path = PACKAGE / "strategies" / "clip" / "lwf.py"
    source = ("from ...benchmarks.images.clip_benchmark import _domain_of, Domain\n"
              "from . import base\nbase._cycle([])\nfrom torch import _C\n")
    assert private_crossings(path, source) == [
        "moram_avalanche.strategies.clip.lwf imports moram_avalanche.benchmarks.images.clip_benchmark._domain_of",
        "moram_avalanche.strategies.clip.lwf reads base._cycle"]


def strategy_names():
    from moram_avalanche.strategies.registry import STRATEGIES

    return set(STRATEGIES)


def name_branches(source: str, names: set) -> list:
    """Where ``source`` compares with a strategy name or keys a table by one."""
    branching = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            for part in [node.left, *node.comparators]:
                for const in ast.walk(part):
                    if isinstance(const, ast.Constant) and const.value in names:
                        branching.append(f"line {node.lineno}: compares with {const.value!r}")
        elif isinstance(node, ast.Dict):
            for key in node.keys:
                if isinstance(key, ast.Constant) and key.value in names:
                    branching.append(f"line {node.lineno}: a table keyed by {key.value!r}")
    return branching


@pytest.mark.parametrize("relative", ["cli.py", "experiments/clip/demo.py", "experiments/clip/tools.py",
                                      "experiments/text/demo.py", *sorted(
    str(p.relative_to(PACKAGE)) for p in (PACKAGE / "experiments" / "clip" / "cost").glob("*.py"))])
def test_the_command_line_and_the_demo_do_not_branch_on_strategy_names(relative):
    assert name_branches((PACKAGE / relative).read_text(), strategy_names()) == []


def test_the_costs_script_does_not_branch_on_strategy_names():
    # what a strategy needs to be timed offline is its declaration (StrategyNeeds.cost), as in cost
    assert name_branches((ROOT / "scripts" / "bench_reproduce_costs.py").read_text(), strategy_names()) == []


def family_benchmark_and_table_names() -> set:
    from moram_avalanche.benchmarks import benchmarks
    from moram_avalanche.experiments.families import families

    names = {*benchmarks(), *(entry.family for entry in benchmarks().values())}
    for record in families().values():
        names.update(record.reproduction.tables)
    return names


#: the command line and the app (experiments/ outside its wings): what differs is the family record's
ABOVE_THE_REGISTRY = ("cli.py", "arguments.py", *sorted(
    str(p.relative_to(PACKAGE)) for p in (PACKAGE / "experiments").glob("*.py")), *sorted(
    str(p.relative_to(PACKAGE)) for p in (PACKAGE / "experiments" / "paper").glob("*.py")))


@pytest.mark.parametrize("relative", ABOVE_THE_REGISTRY)
def test_nothing_above_the_registry_branches_on_a_family_benchmark_or_table(relative):
    assert name_branches((PACKAGE / relative).read_text(), family_benchmark_and_table_names()) == []


def test_check_data_offers_the_layouts_it_checks():
    from moram_avalanche.benchmarks import benchmarks
    from moram_avalanche.cli import build_parser

    check = build_parser()._subparsers._group_actions[0].choices["check-data"]
    choices = next(action.choices for action in check._actions if action.dest == "benchmark")
    layouts = {name for name, entry in benchmarks().items() if entry.check is not None}  # 0.6's DATA_CHECKS
    assert set(choices) == {*layouts, "all"}


def test_the_branching_check_sees_comparisons_and_tables():
    source = ('if name == "zscl":\n    pass\nif name in ("lwf", "other"):\n    pass\n'
              'lr = {"moram": 1e-2}.get(name)\nlabel = "zscl"\n')
    assert name_branches(source, strategy_names()) == [
        "line 1: compares with 'zscl'", "line 3: compares with 'lwf'", "line 5: a table keyed by 'moram'"]


def test_every_strategy_declares_options_it_accepts():
    import inspect

    from moram_avalanche.experiments.clip.demo import DemoConfig
    from moram_avalanche.strategies.needs import REFERENCE_ARGUMENTS
    from moram_avalanche.strategies.registry import STRATEGIES

    def accepted(cls):
        names = set()
        for klass in cls.__mro__:
            if "__init__" in vars(klass):
                names |= set(inspect.signature(vars(klass)["__init__"]).parameters)
        return names

    from moram_avalanche.experiments.clip.protocols import MTIL_5SHOT, XTAIL_ORDER1
    from moram_avalanche.experiments.clip.recipes import cost_options, demo_recipe, paper_options, short_budget_options

    for name, cls in STRATEGIES.items():
        needs, takes = cls.needs, accepted(cls)
        wanted = set(demo_recipe(name, DemoConfig())) | {REFERENCE_ARGUMENTS[r] for r in needs.references}
        wanted |= set(cost_options(name))
        wanted |= {"iterations"} if needs.trains else set()
        for protocol in (XTAIL_ORDER1, MTIL_5SHOT):  # what reproduce passes
            wanted |= set(paper_options(name, protocol)) | set(short_budget_options(name, 2))
        assert wanted <= takes, (name, wanted - takes)


def test_importing_the_package_patches_nothing_outside_it():
    code = ("import torch.optim; before = set(vars(torch.optim)); "
            "import moram_avalanche.strategies, moram_avalanche.experiments; "
            "print(sorted(set(vars(torch.optim)) - before))")
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


def calls_of(attribute: str) -> list:
    """``module:line`` of every call ``<something>.<attribute>(...)`` in the package."""
    found = []
    for path in MODULES:
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == attribute):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    return found


def test_one_layer_finder():
    # adapters are found by find_layers alone; towers.py walks the module tree for blocks
    assert sorted({c.split(":")[0] for c in calls_of("named_modules")}) == ["clip/towers.py", "layers/base.py"]


def test_one_checkpoint_filter_and_no_strategy_lists_keys():
    from moram_avalanche.strategies.clip.loop import CLIPStrategy
    from moram_avalanche.strategies.registry import STRATEGIES

    for name, cls in STRATEGIES.items():
        for method in ("checkpoint_model_state", "load_checkpoint_model_state"):
            assert getattr(cls, method) is getattr(CLIPStrategy, method), (name, method)


def test_no_plugin_rebuilds_the_optimizer():
    # the optimizer is built by Avalanche after the model adaptation: nothing calls make_optimizer
    assert calls_of("make_optimizer") == []
