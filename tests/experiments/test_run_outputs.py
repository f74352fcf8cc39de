"""The run path knows no method: what a method adds to a run folder comes from its plugin."""

import ast
from pathlib import Path

import numpy as np
import open_clip
from avalanche.core import SupervisedPlugin

import moram_avalanche.experiments as experiments
from moram_avalanche.experiments.run import Setup, run_single
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
