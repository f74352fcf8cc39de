"""Avalanche's own strategies train CLIP (CLIPClassifier), by name, with the package's growth plugins."""

import warnings

import pytest
import torch
from avalanche.evaluation.metrics import accuracy_metrics
from avalanche.training import Naive
from avalanche.training.plugins import EvaluationPlugin, SupervisedPlugin

from moram_avalanche.benchmarks.images.synthetic import synthetic
from moram_avalanche.clip.inject import inject_moram
from moram_avalanche.experiments.metrics import AccuracyMatrix
from moram_avalanche.layers.base import find_layers
from moram_avalanche.layers.moram.layer import MoRAMLinear
from moram_avalanche.models import CLIPClassifier
from moram_avalanche.strategies.clip.builtins import BUILTINS
from moram_avalanche.strategies.plugins import IterationBudget, MoRAMPlugin
from moram_avalanche.strategies.registry import get_strategy

warnings.filterwarnings("ignore", message="No loggers specified")
warnings.filterwarnings("ignore", category=DeprecationWarning)


def two_domains(tiny_transforms, label_space="all"):
    train_tf, eval_tf = tiny_transforms
    return synthetic(("shapes", "glyphs"), train_size=12, test_size=7 * 2, label_space=label_space,
                     train_transform=train_tf, eval_transform=eval_tf)


class Steps(SupervisedPlugin):
    def __init__(self):
        super().__init__()
        self.steps = []

    def before_training_exp(self, strategy, **kwargs):
        self.steps.append(0)

    def after_training_iteration(self, strategy, **kwargs):
        self.steps[-1] += 1


OPTIONS = {"naive": {}, "ewc": {}, "lwf": {}, "replay": {"mem_size": 6}, "der": {"mem_size": 6},
           "agem": {"patterns_per_exp": 4, "sample_size": 4}}


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_avalanche_strategies_train_clip_and_fill_the_accuracy_matrix(name, tiny_clip, tokenizer,
                                                                      tiny_transforms, one_thread):
    benchmark = two_domains(tiny_transforms)
    matrix, steps = AccuracyMatrix(), Steps()
    evaluator = EvaluationPlugin(matrix, accuracy_metrics(experience=True), loggers=[])
    before = tiny_clip.visual.conv1.weight.detach().clone()
    strategy = get_strategy(f"avalanche.{name}")(
        model=tiny_clip, tokenizer=tokenizer, iterations=3, lr=1e-3, train_mb_size=4, eval_mb_size=14,
        evaluator=evaluator, plugins=[steps], **OPTIONS[name])
    assert isinstance(strategy.model, CLIPClassifier)
    for experience in benchmark.train_stream:
        strategy.train(experience)
        last = strategy.eval(benchmark.test_stream)
    assert steps.steps == [3, 3]  # the package's budget: iterations, not epochs
    result = matrix.result()
    assert result.shape == (2, 2) and not (result < 0).any() and not (result > 100).any()
    # the matrix's last row is what Avalanche's own accuracy metric measured (on the same outputs)
    avalanche_row = [100 * last[f"Top1_Acc_Exp/eval_phase/test_stream/Task{d:03d}/Exp{d:03d}"] for d in (0, 1)]
    assert result[-1].tolist() == pytest.approx(avalanche_row)
    assert not torch.equal(before, tiny_clip.visual.conv1.weight)  # CLIP trained
    assert not tiny_clip.logit_scale.requires_grad


def test_moram_plugin_grows_in_a_stock_strategy_and_old_atoms_never_move(tiny_clip, tokenizer, tiny_transforms,
                                                                        one_thread):
    benchmark = two_domains(tiny_transforms)
    r = 4
    inject_moram(tiny_clip, atoms_per_task=r, topk=2)
    layers = find_layers(tiny_clip, MoRAMLinear)
    model = CLIPClassifier(tiny_clip, tokenizer)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    held = []

    class OptimizerHolds(SupervisedPlugin):
        def after_training_iteration(self, strategy, **kwargs):
            ids = {id(p) for group in strategy.optimizer.param_groups for p in group["params"]}
            held.append(all(id(layer.new_keys) in ids and id(layer.new_values) in ids
                            for layer in layers.values()))

    strategy = Naive(model=model, optimizer=optimizer, criterion=torch.nn.CrossEntropyLoss(), train_mb_size=4,
                     train_epochs=1, plugins=[MoRAMPlugin(), IterationBudget(3), OptimizerHolds()],
                     evaluator=EvaluationPlugin(loggers=[]))
    strategy.train(benchmark.train_stream[0])
    assert {layer.num_atoms for layer in layers.values()} == {r}
    first = {name: (layer.keys.clone(), layer.values.clone()) for name, layer in layers.items()}
    assert all(values.abs().sum() > 0 for _, values in first.values())  # trained from zero values
    strategy.train(benchmark.train_stream[1])
    assert {layer.num_atoms for layer in layers.values()} == {2 * r}
    assert {layer.num_frozen for layer in layers.values()} == {2 * r}  # settled after the experience
    for name, layer in layers.items():
        keys, values = first[name]
        assert torch.equal(layer.keys[:r], keys) and torch.equal(layer.values[:, :r], values)
        assert layer.values[:, r:].abs().sum() > 0  # the second experience's atoms trained
    assert held and all(held)  # Avalanche's update_optimizer took the new atoms every time


def test_builtins_keep_avalanche_defaults_and_refuse_unknown_options(tiny_clip, tokenizer):
    ewc = get_strategy("avalanche.ewc")(model=tiny_clip, tokenizer=tokenizer, evaluator=EvaluationPlugin(loggers=[]))
    plugin = next(p for p in ewc.plugins if type(p).__name__ == "EWCPlugin")
    assert plugin.ewc_lambda == 0.4  # Avalanche's examples/ewc_mnist.py
    replay = get_strategy("avalanche.replay")(model=tiny_clip, tokenizer=tokenizer, mem_size=30,
                                              evaluator=EvaluationPlugin(loggers=[]))
    assert next(p for p in replay.plugins if type(p).__name__ == "ReplayPlugin").mem_size == 30
    with pytest.raises(ValueError, match=r"no argument\(s\) \['mem_sise'\].*'mem_size'"):
        get_strategy("avalanche.replay")(model=tiny_clip, tokenizer=tokenizer, mem_sise=30)
    assert set(BUILTINS) >= {"avalanche.naive", "avalanche.ewc", "avalanche.lwf", "avalanche.replay",
                             "avalanche.der", "avalanche.agem", "avalanche.gdumb"}


def test_iteration_budget_needs_one_epoch(tiny_clip, tokenizer, tiny_transforms):
    benchmark = two_domains(tiny_transforms)
    model = CLIPClassifier(tiny_clip, tokenizer)
    strategy = Naive(model=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.0),
                     criterion=torch.nn.CrossEntropyLoss(), train_epochs=2, plugins=[IterationBudget(2)],
                     evaluator=EvaluationPlugin(loggers=[]))
    with pytest.raises(ValueError, match="train_epochs=1"):
        strategy.train(benchmark.train_stream[0])


def test_built_ins_by_name_on_the_command_line(tmp_path, capsys):
    import csv
    import io
    import json

    from moram_avalanche.cli import main

    common = ["--benchmark", "synthetic", "--model", "moram-synthetic-tiny", "--pretrained", "none",
              "--cache-dir", str(tmp_path / "cache"), "--no-progress", "--iterations", "2", "--batch-size", "8"]
    assert main(["run", *common, "--strategy", "avalanche.replay", "--set", "mem_sise=3",
                 "--log-dir", str(tmp_path / "bad")]) == 2
    assert "avalanche.replay has no argument(s) ['mem_sise']" in capsys.readouterr().err
    assert main(["compare", *common, "--strategies", "zeroshot,avalanche.ewc", "--set", "avalanche.ewc.ewc_lambda=1",
                 "--out", str(tmp_path / "out")]) == 0
    assert "| avalanche.ewc |" in capsys.readouterr().out  # the paper-style table, beside zeroshot
    recorded = json.loads((tmp_path / "out" / "avalanche.ewc" / "run.json").read_text())
    assert recorded["run"]["set"] == {"ewc_lambda": "1"} and recorded["strategy"] == "EWC"
    rows = list(csv.reader(io.StringIO((tmp_path / "out" / "table.csv").read_text())))
    names = {row[1] for row in rows[1:]}
    assert names == {"zeroshot", "avalanche.ewc"} and len(rows) == 1 + 3 * 2, rows
    matrix = json.loads((tmp_path / "out" / "avalanche.ewc" / "results.json").read_text())["matrix"]
    assert len(matrix) == 5 and all(0 <= v <= 100 for row in matrix for v in row)
    # the folder records what the strategy was given, so the same command resumes it (0.6 recorded
    # nothing for Avalanche's strategies on CLIP and refused: "made with other settings")
    assert recorded["options"] == {"ewc_lambda": 1, "iterations": 2, "train_mb_size": 8}
    assert main(["compare", *common, "--strategies", "zeroshot,avalanche.ewc", "--set", "avalanche.ewc.ewc_lambda=1",
                 "--out", str(tmp_path / "out")]) == 0
    assert json.loads((tmp_path / "out" / "avalanche.ewc" / "results.json").read_text())["matrix"] == matrix
