"""The run path knows no method: what a method adds to a run folder comes from its plugin."""

import ast
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import open_clip
import pytest
from avalanche.core import SupervisedPlugin

import moram_avalanche.experiments as experiments
from moram_avalanche.experiments.run import Setup, run_single, write_plugin_pictures, write_plugin_reports
from moram_avalanche.experiments.run_folder import RUN_FILES
from moram_avalanche.experiments.runner import plugin_files
from tiny_clip import TINY_CONFIG


class Marker(SupervisedPlugin):
    """A method's plugin as the run path sees it: its files, its pictures, its preparation."""

    run_files = ("marker.png",)

    def __init__(self, draws=True):
        super().__init__()
        self.draws = draws
        self.prepared = 0

    def prepare_run(self, strategy):
        self.prepared += 1

    def run_pictures(self):
        if not self.draws:
            return {}
        return {"marker.png": {"values": np.ones((1, 2)), "row_labels": ["layer"], "col_labels": ["a", "b"]}}


def setup_with(plugin, tokenizer):
    from moram_avalanche.benchmarks.images.synthetic import synthetic

    transform = open_clip.image_transform(32, is_train=False)
    return Setup(
        make_model=lambda: (open_clip.CLIP(**TINY_CONFIG), transform, transform, tokenizer),
        make_benchmark=lambda tr, ev: synthetic(("shapes", "colours"), train_size=6, test_size=6,
                                                train_transform=tr, eval_transform=ev),
        options=lambda name, eval_tf: {"train_mb_size": 6, "iterations": 1, "plugins": [plugin]})


def test_a_plugins_files_are_drawn_prepared_once_and_removed_when_the_run_starts_over(tmp_path, tokenizer):
    plugin = Marker()
    run_single(setup_with(plugin, tokenizer), "finetune", tmp_path / "run", progress=False)
    assert (tmp_path / "run" / "marker.png").is_file() and plugin.prepared == 1
    quiet = Marker(draws=False)  # its file is removed with the run's when the run starts over
    run_single(setup_with(quiet, tokenizer), "finetune", tmp_path / "run", resume=False, progress=False)
    assert not (tmp_path / "run" / "marker.png").exists()
    assert (tmp_path / "run" / "results.json").is_file()


class Misspelt(SupervisedPlugin):
    run_files = ("misspelt.json",)

    def run_report(self):  # the run path calls run_reports: this would never be written
        return {"misspelt.json": {}}


def test_a_plugin_with_a_misspelt_hook_stops_the_run_before_anything_is_written(tmp_path, tokenizer):
    with pytest.raises(TypeError, match="Misspelt defines 'run_report', which the run path never calls: did you "
                                        "mean 'run_reports'"):
        run_single(setup_with(Misspelt(), tokenizer), "finetune", tmp_path / "run", progress=False)
    assert not any((tmp_path / "run" / name).exists() for name in RUN_FILES)


class Claiming(SupervisedPlugin):
    run_files = ("results.json",)  # the run's own file


class Writing(SupervisedPlugin):
    run_files = ("picture.png", "report.json")

    def __init__(self, picture, report):
        super().__init__()
        self.picture, self.report = picture, report

    def run_pictures(self):
        return {"picture.png": self.picture}

    def run_reports(self):
        return {"report.json": self.report}


def test_what_a_plugin_adds_is_checked_where_the_run_path_writes_it(tmp_path):
    with pytest.raises(ValueError, match=r"plugins add \['results.json'\] to the run folder, which the run path or "
                                         "another plugin writes too"):
        plugin_files(SimpleNamespace(plugins=[Claiming()]))
    with pytest.raises(ValueError, match=r"add \['twice.json'\]"):
        twice = type("Twice", (SupervisedPlugin,), {"run_files": ("twice.json",)})
        plugin_files(SimpleNamespace(plugins=[twice(), twice()]))
    bad_picture = SimpleNamespace(plugins=[Writing({"value": [[1.0]]}, {})])
    with pytest.raises(TypeError, match=r"Writing.run_pictures\(\) gave 'picture.png' arguments heatmap does not "
                                        "take"):
        write_plugin_pictures(bad_picture, tmp_path)
    bad_report = SimpleNamespace(plugins=[Writing({}, {"tensor": object()})])
    with pytest.raises(TypeError, match=r"Writing.run_reports\(\) gave 'report.json' content that is not JSON-able"):
        write_plugin_reports(bad_report, tmp_path)
    assert list(tmp_path.iterdir()) == []
    good = SimpleNamespace(plugins=[Writing({"values": np.ones((1, 1)), "row_labels": ["r"], "col_labels": ["c"]},
                                            {"value": 1})])
    write_plugin_pictures(good, tmp_path)
    write_plugin_reports(good, tmp_path)
    assert (tmp_path / "picture.png").is_file() and (tmp_path / "report.json").read_text() == '{\n  "value": 1\n}\n'


RUN_PATH = ("run.py", "runner.py", "run_folder.py", "compare.py", "record.py", "checkpoint.py")


def test_the_run_path_imports_no_method():
    root = Path(experiments.__file__).parent
    for name in RUN_PATH:
        tree = ast.parse((root / name).read_text())
        imported = [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]
        imported += [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
        methods = [module for module in imported if "moram" in module.split(".")[-1] or "layers" in module
                   or "routing_kernel" in module]
        assert not methods, (name, methods)
