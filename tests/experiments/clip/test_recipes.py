"""The app's recipes (demo, paper, short budget, cost) as data, and each default written once."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from moram_avalanche.experiments.clip import recipes
from moram_avalanche.experiments.clip.demo import DemoConfig
from moram_avalanche.experiments.clip.recipes import (
    COST_OPTIONS,
    DEMO_OPTIONS,
    PAPER_OPTIONS,
    PAPER_SOURCES,
    REFERENCE_PATHS,
    SHORT_BUDGET,
    check_recipes,
    demo_recipe,
    paper_options,
    short_budget_options,
)
from moram_avalanche.strategies import MoRAM
from moram_avalanche.strategies.moram_setting import MORAM
from moram_avalanche.strategies.registry import STRATEGIES, get_strategy

PACKAGE = Path(recipes.__file__).resolve().parents[2]


def test_a_strategy_without_a_recipe_gets_its_defaults():
    assert demo_recipe("seq-lora", DemoConfig()) == {}
    assert demo_recipe("avalanche.naive", DemoConfig()) == {}
    assert paper_options("seq-lora") == {} and short_budget_options("moram", 2) == {}
    assert recipes.cost_options("moram") == {}


def test_each_strategy_of_the_papers_tables_declares_its_paper_settings():
    from moram_avalanche.experiments.clip.paper_tables import TABLES
    from moram_avalanche.experiments.clip.protocols import XTAIL_ORDER1
    from moram_avalanche.strategies.clip.moram import ROUTING_ABLATIONS

    used = {m.strategy for spec in TABLES.values() for m in spec.methods if m.strategy}
    for name in used:
        assert name in PAPER_OPTIONS and PAPER_SOURCES[name], name
    moram = paper_options("moram", XTAIL_ORDER1)
    assert {k: moram[k] for k in ("atoms_per_task", "topk", "temperature", "threshold", "lr", "iterations",
                                  "train_mb_size", "encoders")} == {
        "atoms_per_task": 16, "topk": 16, "temperature": 0.01, "threshold": 0.2, "lr": 5e-4,
        "iterations": 500, "train_mb_size": 64, "encoders": ("visual", "text")}
    # each routing row keeps its own routing: MoRAM's settings with the row's options on top
    for row in ROUTING_ABLATIONS.values():
        if row.strategy.startswith("moram-"):
            settings = paper_options(row.strategy, XTAIL_ORDER1)
            assert {k: settings[k] for k in row.options} == row.options, row.strategy
            assert settings["lr"] == 5e-4 and settings["atoms_per_task"] == 16
    assert paper_options("moram-self-activation", XTAIL_ORDER1)["topk"] is None


def test_short_budgets_keep_their_share():
    assert short_budget_options("zscl", 2) == {"warmup": 0, "average_every": 1}
    assert short_budget_options("zscl", 250) == {"warmup": 50, "average_every": 50}
    assert short_budget_options("moe-adapters", 2) == {"warmup": 0, "ae_iterations": 2, "ae_reference_iterations": 2}
    assert short_budget_options("moram", 2) == {}
    with pytest.raises(ValueError, match="reference_paths names kinds the strategy does not take"):
        check_recipes(reference_paths={"zeroshot": {"images": "x"}})


def test_the_tables_cover_every_registered_strategy_they_should():
    from moram_avalanche.strategies.registry import all_strategies

    assert set(DEMO_OPTIONS) == set(STRATEGIES)  # the demo runs any of the package's strategies
    for table in (PAPER_OPTIONS, PAPER_SOURCES, REFERENCE_PATHS, SHORT_BUDGET, COST_OPTIONS):
        assert set(table) <= set(all_strategies())
    assert set(PAPER_SOURCES) == set(PAPER_OPTIONS)
    for name in PAPER_OPTIONS:  # the paper's reference data: where each kind the strategy takes lies
        assert set(REFERENCE_PATHS.get(name, {})) == set(get_strategy(name).needs.references), name
    counts = ("warmup", "average_every", "ae_iterations", "ae_reference_iterations", "kappa_steps")
    for name, paper in PAPER_OPTIONS.items():  # a budget cut to 2 iterations cuts every step count
        short = {**paper, **short_budget_options(name, 2)}
        assert all(short[k] <= 2 for k in counts if k in short), (name, short)
    # what needs a download (a file on disk) has an offline stand-in for ``cost``
    assert {name for name, cls in STRATEGIES.items() if cls.needs.files is not None} <= set(COST_OPTIONS)
    with pytest.raises(ValueError, match="PAPER_OPTIONS names unregistered strategies \\['moramm'\\]"):
        check_recipes(paper={"moramm": {}})


def test_the_recipes_read_the_strategies_defaults_instead_of_copying_them():
    # ZSCL's lineage: its optimisation is ZSCLFineTune's signature; MoRAM's is MORAM
    import inspect

    from moram_avalanche.strategies.clip.zscl_finetune import ZSCLFineTune

    defaults = {k: p.default for k, p in inspect.signature(ZSCLFineTune.__init__).parameters.items()}
    for name in ("wiseft", "lwf", "zscl", "finetune-alone"):
        assert PAPER_OPTIONS[name]["warmup"] == defaults["warmup"]
        assert PAPER_OPTIONS[name]["label_smoothing"] == defaults["label_smoothing"]
    assert {k: PAPER_OPTIONS["moram"][k] for k in MORAM.options()} == MORAM.options()
    with pytest.raises(ValueError, match="declares no default for \\['model'\\]"):
        recipes.declared("moram", "model")


#: MoRAM's own options whose paper values live in MORAM alone
ROUTING = ("atoms_per_task", "topk", "temperature", "threshold")


def _named_constants(tree):
    """``(name, value)`` of every literal bound to a name: a parameter default, a keyword
    argument, a dict entry with a string key, an annotated class attribute."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            args = node.args
            positional = args.posonlyargs + args.args
            for arg, default in zip(positional[len(positional) - len(args.defaults):], args.defaults):
                yield arg.arg, default
            for arg, default in zip(args.kwonlyargs, args.kw_defaults):
                if default is not None:
                    yield arg.arg, default
        elif isinstance(node, ast.keyword) and node.arg:
            yield node.arg, node.value
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    yield key.value, value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            yield node.target.id, node.value


def test_moram_s_paper_values_are_written_once_in_strategies_and_experiments():
    paper = {name: getattr(MORAM, name) for name in ROUTING}
    copies = []
    for room in ("strategies", "experiments"):
        for path in sorted((PACKAGE / room).rglob("*.py")):
            if path.name == "moram_setting.py":
                continue
            for name, value in _named_constants(ast.parse(path.read_text())):
                if (name in paper and isinstance(value, ast.Constant) and not isinstance(value.value, bool)
                        and value.value == paper[name]):
                    copies.append(f"{path.relative_to(PACKAGE)}:{value.lineno} {name}={value.value!r}")
    assert copies == []


CHANGED = """
import importlib.util, sys
# the one declaration, loaded first and changed before anything reads it
name = "moram_avalanche.strategies.moram_setting"
spec = importlib.util.spec_from_file_location(name, sys.argv[1])
setting = sys.modules[name] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(setting)
setting.MORAM = setting.MoRAMSetting(atoms_per_task=8, topk=4, temperature=0.05, threshold=0.3, lr=1e-3,
                                     iterations=300, train_mb_size=32)
import inspect
from moram_avalanche.experiments.clip.demo import DemoConfig
from moram_avalanche.experiments.clip.recipes import paper_options
from moram_avalanche.strategies.clip.builtins import BUILTINS
from moram_avalanche.strategies.clip.moram import ROUTING_ABLATIONS
from moram_avalanche.strategies.options import strategy_parameters
from moram_avalanche.strategies.registry import get_strategy
cli = {k: p.default for k, p in strategy_parameters(get_strategy("moram")).items()}
seq = {k: p.default for k, p in strategy_parameters(get_strategy("seq-lora")).items()}
builtin = {k: p.default for k, p in inspect.signature(type(BUILTINS["avalanche.naive"]).__call__).parameters.items()}
paper, topk = paper_options("moram"), paper_options("moram-self+topk")
demo = DemoConfig()
print([cli[k] for k in ("atoms_per_task", "topk", "temperature", "threshold", "lr", "iterations", "train_mb_size")],
      seq["rank"], builtin["iterations"], builtin["train_mb_size"],
      [paper[k] for k in ("atoms_per_task", "topk", "temperature", "threshold", "lr", "iterations", "train_mb_size")],
      topk["topk"], ROUTING_ABLATIONS["full"].options, demo.atoms_per_task, demo.topk)
"""


def test_changing_the_one_declaration_changes_what_the_cli_demo_and_reproduce_see():
    setting = PACKAGE / "strategies" / "moram_setting.py"
    out = subprocess.run([sys.executable, "-W", "ignore", "-c", CHANGED, str(setting)], capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == (
        "[8, 4, 0.05, 0.3, 0.001, 300, 32] 8 300 32 [8, 4, 0.05, 0.3, 0.001, 300, 32] 4 "
        "{'topk': 4, 'temperature': 0.05, 'threshold': 0.3} 8 4")
    # and the real declaration is the paper's
    assert (MORAM.atoms_per_task, MORAM.topk, MORAM.temperature, MORAM.threshold) == (16, 16, 0.01, 0.2)
    assert (MORAM.lr, MORAM.iterations, MORAM.train_mb_size) == (5e-4, 500, 64)
    defaults = {k: p.default for k, p in __import__("inspect").signature(MoRAM.__init__).parameters.items()}
    assert all(defaults[k] == getattr(MORAM, k) for k in ROUTING)


def test_every_recipe_names_a_registered_strategy_and_kinds_it_takes():
    check_recipes()  # the package's own tables (checked here: nothing runs on import)
