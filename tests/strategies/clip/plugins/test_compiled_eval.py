"""CompiledEvaluation: the tower's evaluation goes through torch.compile, once per task, with the eager
evaluation's results; training, copies and checkpoints never see the compiled function."""

import copy
import io
import warnings

import numpy as np
import open_clip
import pytest
import torch
from avalanche.training.plugins import EvaluationPlugin

from moram_avalanche.benchmarks.images.synthetic import synthetic
from moram_avalanche.experiments.metrics import AccuracyMatrix
from moram_avalanche.layers.moram.paths.switch import use_path
from moram_avalanche.strategies import MoRAM
from moram_avalanche.strategies.clip.plugins import CompiledEvaluation
from moram_avalanche.strategies.clip.plugins.compiled_eval import tower_signature
from moram_avalanche.strategies.plugins.base_casts import KeepBaseCasts
from tiny_clip import TINY_CONFIG

warnings.filterwarnings("ignore", message="No loggers specified")


class CountingBackend:
    """A torch.compile backend that runs the captured graph as traced and counts what it captured."""

    def __init__(self):
        self.graphs = 0
        self.calls = 0

    def __call__(self, graph_module, example_inputs):
        self.graphs += 1

        def run(*args):
            self.calls += 1
            return graph_module.forward(*args)

        return run


def run_two_tasks(plugins):
    torch.manual_seed(0)
    model = open_clip.CLIP(**TINY_CONFIG).eval()
    transform = open_clip.image_transform(32, is_train=False)
    benchmark = synthetic(("shapes", "colours"), train_size=12, test_size=6,
                          train_transform=transform, eval_transform=transform)
    matrix = AccuracyMatrix()
    strategy = MoRAM(model=model, tokenizer=open_clip.tokenizer.SimpleTokenizer(context_length=16), iterations=2, lr=1e-3,
                     train_mb_size=6, eval_mb_size=6, progress=False, plugins=list(plugins),
                     evaluator=EvaluationPlugin(matrix, loggers=[]))
    for experience in benchmark.train_stream:
        strategy.train(experience)
        strategy.eval(benchmark.test_stream)
    return strategy, matrix


def test_the_compiled_evaluation_matches_the_eager_one_and_compiles_once_per_task():
    """On the dense path (the GPU's: no data-dependent shapes) the whole tower is one graph per task;
    the CPU's paths select the kept atoms with ``nonzero``, which breaks a graph (still correct)."""
    torch._dynamo.reset()
    backend = CountingBackend()
    plugin = CompiledEvaluation(mode=None, backend=backend)
    with use_path("dense"):
        strategy, compiled = run_two_tasks([plugin])
        _, eager = run_two_tasks([])
    assert np.array_equal(compiled.result(), eager.result())  # the same operations, traced as they run
    # one compilation per task (its atoms change the tower); both domains are evaluated after tasks 1
    # and 2, a batch each: the first batch after each compilation runs eagerly (eager_first), the
    # other ran the whole tower as ONE captured graph (2 calls)
    assert plugin.compilations == 2 and backend.graphs == 2 and backend.calls == 2
    assert strategy.eval_image_encoder is None  # training and checkpoints never see it


def test_avalanche_s_own_strategy_evaluates_through_the_classifier_s_compiled_encoder():
    from avalanche.training import Naive

    from moram_avalanche.clip.inject import inject_moram
    from moram_avalanche.models.classifier import CLIPClassifier
    from moram_avalanche.strategies.plugins.moram import MoRAMPlugin

    results = []
    torch._dynamo.reset()
    for plugins in ([CompiledEvaluation(mode=None, backend=CountingBackend())], []):
        torch.manual_seed(0)
        clip = open_clip.CLIP(**TINY_CONFIG)
        inject_moram(clip)
        model = CLIPClassifier(clip, open_clip.tokenizer.SimpleTokenizer(context_length=16))
        transform = open_clip.image_transform(32, is_train=False)
        benchmark = synthetic(("shapes",), train_size=6, test_size=12, train_transform=transform,
                              eval_transform=transform)  # two batches: the first runs eagerly (eager_first)
        matrix = AccuracyMatrix()
        strategy = Naive(model=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.0),
                         criterion=torch.nn.CrossEntropyLoss(), train_mb_size=6, eval_mb_size=6,
                         plugins=[MoRAMPlugin(), *plugins], evaluator=EvaluationPlugin(matrix, loggers=[]))
        with use_path("dense"):
            strategy.train(benchmark.train_stream[0])
            strategy.eval(benchmark.test_stream)
        results.append(matrix.result())
        if plugins:
            assert plugins[0].backend.calls == 1 and model.eval_image_encoder is None
            torch.save(model, io.BytesIO())  # a classifier that was evaluated still pickles
            model.eval_image_encoder = plugins[0].encoder_for(clip)
            assert copy.deepcopy(model).eval_image_encoder is None  # and copies without it
    assert np.array_equal(results[0], results[1])


def test_the_signature_follows_the_structure_not_the_values():
    layer = torch.nn.Linear(3, 2)
    before = tower_signature(layer)
    with torch.no_grad():
        layer.weight.add_(1)
    assert tower_signature(layer) == before
    layer.extra = torch.nn.Parameter(torch.zeros(1))
    assert tower_signature(layer) != before
    grown = tower_signature(layer)
    layer.register_buffer("frozen", torch.zeros(2))
    assert tower_signature(layer) != grown


def test_a_model_without_an_image_tower_is_refused_in_one_line():
    class Strategy:
        model = torch.nn.Linear(2, 2)

    with pytest.raises(TypeError, match="compiles a CLIP image tower; the strategy .Strategy. evaluates a Linear"):
        CompiledEvaluation().before_eval(Strategy())


def test_keep_base_casts_reaches_every_moram_layer_and_changes_no_result():
    keep = KeepBaseCasts()
    strategy, kept = run_two_tasks([keep])
    _, plain = run_two_tasks([])
    from moram_avalanche.layers.moram.layer import MoRAMRouting

    layers = [m for m in strategy.model.modules() if isinstance(m, MoRAMRouting)]
    assert keep.layers == len(layers) > 0 and all(layer.keep_base_cast for layer in layers)
    assert np.array_equal(kept.result(), plain.result())  # in float32 nothing is cast: the option changes nothing


def test_with_kept_base_casts_the_compiled_tower_reads_each_base_stacked_with_its_keys():
    """The first batch after each compilation runs eagerly and keeps the stacked copies; the graph
    traced next reads them: fewer matrix products per tower (one for q, k, v and their keys, one for
    each other layer's base and keys), the same accuracies."""
    import re

    products = {}
    results = {}
    for keep in (False, True):
        torch._dynamo.reset()
        backend = CountingBackend()
        graphs = []
        counting = backend.__call__

        def recording(graph_module, example_inputs, counting=counting, graphs=graphs):
            graphs.append(graph_module)
            return counting(graph_module, example_inputs)

        plugin = CompiledEvaluation(mode=None, backend=recording)
        with use_path("dense"):
            _, matrix = run_two_tasks([plugin] + ([KeepBaseCasts()] if keep else []))
        results[keep] = matrix.result()
        names = [str(node.target) for node in graphs[-1].graph.nodes if node.op in ("call_function", "call_method")]
        products[keep] = sum(bool(re.search(r"\b(addmm_?|mm|linear|matmul)\b", name)) for name in names)
    assert np.allclose(results[True], results[False])
    # per block, 18 products -> 10: q, k and v 3 x 3 -> 1 + 3 (one for the three bases and keys, one
    # read-out each); out_proj, c_fc and c_proj 3 x 3 -> 3 x 2 (base and keys, read-out)
    blocks = TINY_CONFIG["vision_cfg"]["layers"]
    assert products[False] - products[True] == 8 * blocks, products
