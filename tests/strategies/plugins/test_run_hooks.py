"""RunHooks: the run path's plugin hooks declared once; a plugin that misspells one, declares one
of the wrong kind or returns the wrong thing gets an error naming it and the fix."""

import ast
import importlib
import inspect
import pkgutil
from pathlib import Path

import pytest
from avalanche.core import BasePlugin, SupervisedPlugin

import moram_avalanche
from moram_avalanche.strategies.plugins.run_hooks import HOOKS, PluginRunHooks, RunHooks, misspelt_hooks

PACKAGE = Path(moram_avalanche.__file__).parent


class Drawing(SupervisedPlugin, RunHooks):
    """A plugin that says it implements the hooks and uses two of them."""

    run_files = ("drawing.png", "drawing.json")

    def run_pictures(self):
        return {"drawing.png": {"values": [[1.0]], "row_labels": ["a"], "col_labels": ["b"]}}

    def run_reports(self):
        return {"drawing.json": {"value": 1}}


def test_the_protocol_declares_exactly_the_hooks_the_run_path_calls():
    declared = {name for name in vars(RunHooks) if not name.startswith("_")}
    assert declared == set(HOOKS) == {"run_files", "prepare_run", "run_pictures", "run_reports"}
    for hook in HOOKS[1:]:  # each hook says when it is called and what it returns
        doc = inspect.getdoc(getattr(RunHooks, hook))
        assert "Called" in doc and ("Returns None" in doc or "{file name:" in doc), hook


def test_a_plugin_says_it_implements_the_hooks_and_inherits_the_defaults():
    plugin = Drawing()
    assert isinstance(plugin, RunHooks) and isinstance(plugin, SupervisedPlugin)
    hooks = PluginRunHooks(plugin)
    assert isinstance(hooks, RunHooks)  # the checked view conforms too
    assert hooks.run_files == ("drawing.png", "drawing.json")
    assert hooks.prepare_run(object()) is None  # RunHooks' default: nothing to prepare
    assert hooks.run_reports() == {"drawing.json": {"value": 1}}
    assert list(hooks.run_pictures()) == ["drawing.png"]


def test_a_duck_typed_plugin_conforms_for_the_hooks_it_has():
    class Preparing:  # no base class at all, as Avalanche allows for its own callbacks
        def __init__(self):
            self.prepared = []

        def prepare_run(self, strategy):
            self.prepared.append(strategy)

    plugin = Preparing()
    hooks = PluginRunHooks(plugin)
    hooks.prepare_run("strategy")
    assert plugin.prepared == ["strategy"]
    assert (hooks.run_files, hooks.run_pictures(), hooks.run_reports()) == ((), {}, {})
    assert not isinstance(plugin, RunHooks)  # it conforms for one hook only


def hook_implementers():
    """Every class of the package that defines one of the hooks itself."""
    found = {}
    for info in pkgutil.walk_packages([str(PACKAGE)], "moram_avalanche."):
        path = PACKAGE.joinpath(*info.name.split(".")[1:])
        source = path / "__init__.py" if info.ispkg else path.with_suffix(".py")
        tree = ast.parse(source.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name != "RunHooks":
                names = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
                names |= {t.id for n in node.body if isinstance(n, ast.Assign) for t in n.targets
                          if isinstance(t, ast.Name)}
                if names & set(HOOKS):
                    found[f"{info.name}.{node.name}"] = (info.name, node.name)
    return found


def test_every_plugin_of_the_package_that_implements_a_hook_says_so():
    found = hook_implementers()
    assert {"moram_avalanche.strategies.plugins.moram.MoRAMPlugin",
            "moram_avalanche.strategies.text.plugins.humaneval_sampling.HumanEvalSampling",
            "moram_avalanche.strategies.text.plugins.mmlu_evaluation.MMLUEvaluation"} <= set(found)
    for module, name in found.values():
        cls = getattr(importlib.import_module(module), name)
        assert RunHooks in cls.__mro__, module + "." + name  # subclassed (issubclass: data members)


def plugin_classes():
    import avalanche.training.plugins as avalanche_plugins

    classes = set()
    modules = [avalanche_plugins]
    for info in pkgutil.walk_packages([str(PACKAGE / "strategies")], "moram_avalanche.strategies."):
        modules.append(importlib.import_module(info.name))
    for module in modules:
        classes |= {value for value in vars(module).values()
                    if inspect.isclass(value) and issubclass(value, BasePlugin)}
    return classes


def test_no_plugin_of_avalanche_or_of_the_package_reads_as_a_misspelt_hook():
    classes = plugin_classes()
    assert len(classes) > 30  # Avalanche's plugins and the package's
    assert {cls.__name__: misspelt_hooks(cls) for cls in classes if misspelt_hooks(cls)} == {}


@pytest.mark.parametrize("wrong, meant", [("run_report", "run_reports"), ("run_picture", "run_pictures"),
                                          ("prepare_runs", "prepare_run"), ("run_file", "run_files"),
                                          ("Prepare_Run", "prepare_run")])
def test_a_misspelt_hook_is_an_error_that_names_the_hook_it_meant(wrong, meant):
    plugin = type("Misspelt", (SupervisedPlugin,), {wrong: lambda self: {}})()
    with pytest.raises(TypeError, match=f"Misspelt defines '{wrong}', which the run path never calls: "
                                        f"did you mean '{meant}'"):
        PluginRunHooks(plugin)


def test_names_far_from_every_hook_are_not_misspellings():
    plugin = type("Plain", (SupervisedPlugin,), {"prepare": 1, "prepared": 2, "run_name": 3, "reports": 4})()
    assert misspelt_hooks(plugin) == {}
    PluginRunHooks(plugin)


@pytest.mark.parametrize("files, error, message", [
    ("atom_usage.png", TypeError, "run_files must be a tuple of file names, got str 'atom_usage.png'; "
                                  "write run_files = ('atom_usage.png',)"),
    ({"a.png"}, TypeError, "run_files must be a tuple of file names, got set"),
    (("../outside.png",), ValueError, "run_files holds '../outside.png': expected plain file names"),
    (("sub/file.png",), ValueError, "run_files holds 'sub/file.png'"),
    (("",), ValueError, "run_files holds ''"),
    ((3,), ValueError, "run_files holds 3"),
])
def test_run_files_of_the_wrong_kind_are_refused(files, error, message):
    plugin = type("Files", (SupervisedPlugin,), {"run_files": files})()
    with pytest.raises(error, match="Files." + message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        PluginRunHooks(plugin)


def test_hooks_of_the_wrong_kind_are_refused():
    as_method = type("AsMethod", (SupervisedPlugin,), {"run_files": lambda self: ("a.png",)})()
    with pytest.raises(TypeError, match=r"AsMethod.run_files is a method; it is an attribute"):
        PluginRunHooks(as_method)
    as_dict = type("AsDict", (SupervisedPlugin,), {"run_pictures": {"a.png": {}}, "run_files": ("a.png",)})()
    with pytest.raises(TypeError, match=r"AsDict.run_pictures is a dict, not a method"):
        PluginRunHooks(as_dict)


class Returning(SupervisedPlugin, RunHooks):
    run_files = ("listed.png", "listed.json")

    def __init__(self, prepared=None, pictures=None, reports=None):
        super().__init__()
        self.prepared, self.pictures, self.reports = prepared, pictures, reports

    def prepare_run(self, strategy):
        return self.prepared

    def run_pictures(self):
        return self.pictures

    def run_reports(self):
        return self.reports


def test_what_a_hook_returns_is_checked():
    with pytest.raises(TypeError, match=r"Returning.prepare_run\(strategy\) returned int: the run path ignores"):
        PluginRunHooks(Returning(prepared=1)).prepare_run(None)
    with pytest.raises(TypeError, match=r"Returning.run_pictures\(\) returned list: expected \{file name: keyword"):
        PluginRunHooks(Returning(pictures=[])).run_pictures()
    with pytest.raises(TypeError, match=r"Returning.run_reports\(\) returned NoneType: expected \{file name: JSON"):
        PluginRunHooks(Returning()).run_reports()
    with pytest.raises(TypeError, match=r"gave list for 'listed.png': expected the keyword arguments of heatmap"):
        PluginRunHooks(Returning(pictures={"listed.png": [1, 2]})).run_pictures()
    with pytest.raises(ValueError, match=r"Returning.run_reports\(\) writes \['other.json'\], which "
                                         r"Returning.run_files \('listed.png', 'listed.json'\) does not list"):
        PluginRunHooks(Returning(reports={"listed.json": {}, "other.json": {}})).run_reports()
    good = PluginRunHooks(Returning(prepared=None, pictures={"listed.png": {"values": []}}, reports={}))
    assert good.prepare_run(None) is None and good.run_pictures() == {"listed.png": {"values": []}}
