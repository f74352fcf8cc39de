"""What strategies declare they take from the app, and how the command line and the demo read it
(the app's recipes themselves: tests/experiments/clip/test_recipes.py)."""

from types import SimpleNamespace

import pytest

from moram_avalanche.cli import build_parser
from moram_avalanche.experiments.clip.demo import DemoConfig, demo_options
from moram_avalanche.experiments.from_arguments import strategy_options
from moram_avalanche.strategies import ZSCL, MoEAdapters, MoRAM, ZeroShot
from moram_avalanche.strategies.needs import StrategyNeeds
from moram_avalanche.strategies.registry import strategies_taking


def test_a_declaration_names_known_reference_kinds_and_maps_them_to_arguments():
    with pytest.raises(ValueError, match="unknown reference kinds \\['captions'\\]"):
        StrategyNeeds(references=("captions",))
    needs = StrategyNeeds(references=("images",))
    assert needs.reference_arguments(images="I", sentences="S") == {"reference_images": "I"}
    assert needs.reference_arguments(images=None) == {}


def test_the_registry_answers_who_takes_reference_data():
    assert strategies_taking("images") == ["moe-adapters", "zscl"]
    assert strategies_taking("sentences") == ["zscl"]
    assert ZeroShot.needs.trains is False and MoRAM.needs.trains is True
    assert MoEAdapters.needs.references == ("images",) and ZSCL.needs.references == ("images", "sentences")


def cli_args(*extra):
    return build_parser().parse_args(["run", "--benchmark", "synthetic", "--strategy", "x", "--log-dir", "d",
                                      *extra])


def test_the_command_line_passes_each_strategy_what_it_declares():
    args = cli_args("--iterations", "7", "--batch-size", "5", "--ref-images", "none")
    assert strategy_options(args, "zeroshot", None, {}) == {"train_mb_size": 5}  # takes no iterations
    assert strategy_options(args, "moe-adapters", None, {}) == {
        "train_mb_size": 5, "iterations": 7, "reference_images": "none"}  # DDAS's opt-out passes through
    assert strategy_options(args, "lwf", None, {"temperature": 3}) == {
        "train_mb_size": 5, "iterations": 7, "temperature": 3}  # takes no reference images


def test_the_demo_builds_each_strategy_from_its_declaration():
    config = DemoConfig.quick()
    transform = SimpleNamespace()  # the reference images are built lazily: never called here
    zeroshot = demo_options("zeroshot", config, transform)
    batches = {"train_mb_size": config.batch_size, "eval_mb_size": config.batch_size}  # the table's
    assert zeroshot == batches
    moram = demo_options("moram", config, transform)
    assert moram == {**batches, "iterations": config.iterations, "lr": config.moram_lr,
                     "topk": config.topk, "atoms_per_task": config.atoms_per_task}
    zscl = demo_options("zscl", config, transform)
    assert len(zscl["reference_images"]) == config.reference_images
    assert 0 < len(zscl["reference_sentences"]) <= config.reference_sentences
    assert zscl["average_every"] == config.zscl_average_every
    moe = demo_options("moe-adapters", config, transform)
    assert "reference_sentences" not in moe and len(moe["reference_images"]) == config.reference_images
    assert moe["feature_extractor"] is not None and moe["ae_iterations"] == config.ae_iterations
