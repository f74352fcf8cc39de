"""Tiny MoRAM runs shared by the analysis tests (built once per session), with what each task
left in the model recorded independently of the MoRAMPlugin (a plugin placed after it)."""

import atexit
import functools
import shutil
import tempfile
import warnings
from pathlib import Path

import open_clip
import torch
from avalanche.core import SupervisedPlugin
from avalanche.training.plugins import EvaluationPlugin

from moram_avalanche.benchmarks import Domain, clip_benchmark
from moram_avalanche.experiments.metrics import AccuracyMatrix
from moram_avalanche.experiments.runner import run_stream
from moram_avalanche.layers.base import adapter_state_dict, find_layers
from moram_avalanche.layers.moram.layer import MoRAMLinear
from moram_avalanche.strategies import MoRAM
from tiny_clip import STREAM_CLASSES, TINY_CONFIG, TensorDomain

warnings.filterwarnings("ignore", message="No loggers specified")
ATOMS, TOPK = 4, 2
_ROOT = Path(tempfile.mkdtemp(prefix="moram-analysis-tests-"))
atexit.register(shutil.rmtree, _ROOT, ignore_errors=True)


def tokenizer():
    simple = open_clip.tokenizer.SimpleTokenizer(context_length=16)
    return lambda texts: simple(texts)


def stream():
    domains = [Domain(name, classes, f"a {{}} from {name}.") for name, classes in STREAM_CLASSES.items()]
    train = [TensorDomain(n, len(d.classnames), i) for i, (n, d) in enumerate(zip((8, 6, 6), domains))]
    test = [TensorDomain(6, len(d.classnames), 10 + i) for i, d in enumerate(domains)]
    return clip_benchmark(domains, train, test, label_space="all")


class AfterEachTask(SupervisedPlugin):
    """After each experience (and after MoRAMPlugin settled it): every layer's bank and sizes."""

    def __init__(self):
        super().__init__()
        self.states, self.layers = [], []

    def after_training_exp(self, strategy, **kwargs):
        model = strategy.model
        self.states.append({k: v.detach().clone() for k, v in adapter_state_dict(model).items()})
        self.layers.append({name: {"atom_task": layer.atom_task.clone(), "in": layer.in_features,
                                   "out": layer.out_features}
                            for name, layer in find_layers(model, MoRAMLinear).items()})


def fresh_model():
    torch.manual_seed(0)
    return open_clip.CLIP(**TINY_CONFIG)


@functools.lru_cache(maxsize=None)
def tiny_run(prune_mass=None, iterations=3):
    """``(log_dir, benchmark, AfterEachTask)`` of a 3-task MoRAM run on random tensors."""
    torch.manual_seed(0)
    model = open_clip.CLIP(**TINY_CONFIG)
    after = AfterEachTask()
    strategy = MoRAM(model=model, tokenizer=tokenizer(), atoms_per_task=ATOMS, topk=TOPK, iterations=iterations,
                     train_mb_size=4, lr=1e-2, prune_mass=prune_mass, plugins=[after], progress=False,
                     evaluator=EvaluationPlugin(AccuracyMatrix(), loggers=[]))
    benchmark = stream()
    log_dir = _ROOT / f"moram-prune{prune_mass}-it{iterations}"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # far faster for tiny tensors on a shared machine
    try:
        run_stream(strategy, benchmark, log_dir, resume=False, progress=False)
    finally:
        torch.set_num_threads(threads)
    return log_dir, benchmark, after
