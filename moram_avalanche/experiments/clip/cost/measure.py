"""``moram-avalanche cost``: what each method costs as tasks accumulate (the paper's cost tables).

For every strategy (default: CLIP zero-shot, MoRAM, MoE-Adapters, InfLoRA and the LoRA-style
rows SeqLoRA and MoE-LoRA) :func:`measure_cost` builds the strategy on a freshly loaded model
(random weights unless ``pretrained`` is given: the costs do not depend on them) and trains it
through ``max(tasks)`` tasks of random images. Only the tasks listed in ``tasks`` (paper: 1, 5
and 10) train for real, ``warmup + iterations`` steps; the others run 0 steps, which still grows
every adapter (MoRAM's atoms, MoE-Adapters' routers and DDAS autoencoders, InfLoRA's designed
projections). It records, per strategy and task:

* trainable parameters (the optimizer's share of the model) and, in the first task, the
  formula and count per adapted weight matrix (:mod:`.formula`); parameters and buffers
  added to CLIP;
* peak training memory: ``torch.cuda.max_memory_allocated`` over the task's ``train`` call on a
  GPU, else the labelled CPU proxy (tensors held: model, gradients, optimizer state, teachers;
  not activations; :func:`~moram_avalanche.strategies.plugins.memory.memory_footprint`);
* training ms/image: the median over the timed iterations of iteration time / batch size (one
  optimizer step: image and text forward, loss, backward, update; data loading excluded);
* inference ms/image after the task: the median over the evaluation iterations of ``repeats``
  evaluations (after one untimed) of a test set of the task, in the X-TAIL label space (every
  class of every task), the classifier's text embeddings cached as in a real evaluation; it
  includes what the method does per image (MoE-Adapters: DDAS's AlexNet and autoencoders).

Times are wall-clock, read by the package's one timer
(:class:`~moram_avalanche.strategies.plugins.timing.RunTime`, per iteration: the device
synchronised before each clock read), in fp32 or, with ``amp``, fp16 autocast (CUDA only).
The report says which device and precision it measured.
"""

from __future__ import annotations

import copy
import logging
import platform
import statistics
import warnings
from dataclasses import asdict, dataclass, field
from typing import Dict, Optional, Sequence

import torch
from tqdm.auto import tqdm

from ....strategies.plugins.memory import PROXY_LABEL
from ....strategies.plugins.timing import RunTime
from ....utils.clock import Stopwatch
from .formula import representative
from .probe import CostProbe

#: the paper's rows: CLIP, MoRAM, MoE-Adapters, InfLoRA, the LoRA-style baselines
DEFAULT_STRATEGIES = ("zeroshot", "moram", "moe-adapters", "inflora", "seq-lora", "moe-lora")
#: the paper's latency table: after tasks 1, 5 and 10
PAPER_TASKS = (1, 5, 10)
#: X-TAIL's 1,100 classes over 10 domains: 110 classes per task on average
DEFAULT_CLASSES = 110
#: training images per task when only parameters are counted (``timing=False``): what grows from
#: data (InfLoRA's designed projections, MoE-Adapters' autoencoders) grows to the same shapes from
#: any number of images, and two keep every statistic over images defined
PARAMS_ONLY_IMAGES = 2


@dataclass
class CostOptions:
    """What to measure, and how.

    Attributes:
        model, pretrained: the open_clip model (paper: ViT-B-16) and its weights (None: random).
        device: where to measure. amp: fp16 autocast (CUDA only).
        strategies: registry names. tasks: after which tasks to train for real and time.
        batch_size: training batch (paper: 64). iterations: timed training steps per measured
            task, after ``warmup`` untimed ones.
        classes: classes per task (prompts the text encoder embeds when it trains).
        eval_images: test images per task; eval_batch_size: their batch (default: batch_size).
        repeats: timed evaluations per measured task.
        options: per strategy, keyword arguments for it (``--set STRATEGY.KEY=VALUE``).
        seed: the seed before each strategy's model is built.
        cache_dir: where the weights the package makes are cached (``pretrained="synthetic"`` of
            the demo's tiny CLIP, ``moram-synthetic-tiny``; default: the package's cache).
        timing: measure memory and time; False counts parameters only (every task runs 0 steps,
            on copies of one load, with :data:`PARAMS_ONLY_IMAGES` training images per task and
            no CPU-kernel build: what 0-step tasks of the full measurement count).
    """

    model: str = "ViT-B-16"
    pretrained: Optional[str] = None
    device: str = "cpu"
    strategies: Sequence[str] = DEFAULT_STRATEGIES
    tasks: Sequence[int] = PAPER_TASKS
    batch_size: int = 64
    iterations: int = 10
    warmup: int = 3
    classes: int = DEFAULT_CLASSES
    eval_images: int = 256
    eval_batch_size: Optional[int] = None
    repeats: int = 3
    amp: bool = False
    options: Dict[str, dict] = field(default_factory=dict)
    seed: int = 0
    cache_dir: Optional[str] = None
    timing: bool = True

    def check(self) -> None:
        from ....strategies.registry import get_strategy

        if not self.strategies:
            raise ValueError("no strategies to measure: give at least one name, e.g. moram,zeroshot")
        duplicates = sorted({n for n in self.strategies if list(self.strategies).count(n) > 1})
        if duplicates:
            raise ValueError(f"strategies listed twice: {duplicates}")
        for name in self.strategies:
            get_strategy(name)
        unknown = sorted(set(self.options) - set(self.strategies))
        if unknown:
            raise ValueError(f"options for strategies that are not measured: {unknown} "
                             f"(measured: {list(self.strategies)})")
        if not self.tasks or any(int(t) < 1 for t in self.tasks):
            raise ValueError(f"tasks must be positive task numbers, e.g. 1,5,10; got {list(self.tasks)}")
        for name in ("batch_size", "iterations", "classes", "eval_images", "repeats"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.warmup < 0:
            raise ValueError(f"warmup must be >= 0, got {self.warmup}")
        device = torch.device(self.device)
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"device {self.device!r}: CUDA is not available on this machine (use --device cpu)")
        if self.amp and device.type != "cuda":
            raise ValueError("amp (fp16 autocast) runs on CUDA only; measure on CPU without it")


class RandomImages(torch.utils.data.Dataset):
    """``size`` random images ``[3, H, W]`` drawn per index from a seeded generator (nothing held)."""

    def __init__(self, size: int, classes: int, image_size, seed: int) -> None:
        self.size, self.seed = size, seed
        self.shape = (3, *image_size)
        self.targets = [i % classes for i in range(size)]

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int):
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + index)
        return torch.randn(self.shape, generator=generator), self.targets[index]


def random_stream(tasks: int, classes: int, train_images: int, test_images: int, image_size, seed: int = 0):
    """An X-TAIL-like benchmark of random images: ``tasks`` domains of ``classes`` classes each."""
    from ....benchmarks.images.clip_benchmark import Domain, clip_benchmark

    domains = [Domain(f"task{t + 1}", tuple(f"class {c + 1} of task {t + 1}" for c in range(classes)),
                      "a photo of a {}.") for t in range(tasks)]
    train = [RandomImages(train_images, classes, image_size, seed + 2 * t) for t in range(tasks)]
    test = [RandomImages(test_images, classes, image_size, seed + 2 * t + 1) for t in range(tasks)]
    return clip_benchmark(domains, train, test, label_space="all")


def describe_device(device) -> str:
    device = torch.device(device)
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return f"{torch.cuda.get_device_name(index)} (CUDA {torch.version.cuda}, torch {torch.__version__})"
    name = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as info:
            name = next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), name)
    except OSError:
        pass
    return f"CPU {name}, {torch.get_num_threads()} threads (torch {torch.__version__})"


def measure_cost(options: CostOptions, progress: bool = True) -> dict:
    """Measure every strategy of ``options`` (see the module docstring); returns the results
    (``device``, ``precision``, ``memory_kind``, ``settings``, ``strategies``)."""
    options.check()
    device = torch.device(options.device)
    results = {"device": describe_device(device),
               "precision": "fp16 autocast (amp)" if options.amp else "fp32",
               "memory_kind": ("torch.cuda.max_memory_allocated over the task's training" if device.type == "cuda"
                               else "CPU proxy: " + PROXY_LABEL),
               "settings": {k: v for k, v in asdict(options).items() if k != "options"},
               "strategies": []}
    bar = tqdm(total=len(options.strategies) * max(options.tasks), desc="cost",
               disable=None if progress else True)  # None: terminals only
    clip = _FreshCLIP(options)
    for name in options.strategies:
        results["strategies"].append(_measure_one(name, options, clip, bar))
    bar.close()
    return results


def _held(model) -> int:
    return sum(t.numel() for t in [*model.parameters(), *model.buffers()])


def _image_size(model):
    size = getattr(model.visual, "image_size", 224)
    return tuple(size) if isinstance(size, (tuple, list)) else (int(size), int(size))


def _build(name: str, model, tokenizer, plugins: list, options: CostOptions, image_size):
    from avalanche.training.plugins import EvaluationPlugin

    from ....strategies.registry import get_strategy
    from ..recipes import cost_options

    cls = get_strategy(name)
    needs = cls.needs
    kwargs = dict(model=model, tokenizer=tokenizer, train_mb_size=options.batch_size,
                  eval_mb_size=options.eval_batch_size or options.batch_size, device=options.device,
                  progress=False, plugins=plugins, evaluator=EvaluationPlugin(loggers=[]), amp=options.amp,
                  cache_image_features=False)  # time the image tower, not replayed features
    if needs.trains:
        kwargs["iterations"] = options.warmup + options.iterations
    if needs.references:
        images = torch.utils.data.TensorDataset(torch.randn(8, 3, *image_size,
                                                            generator=torch.Generator().manual_seed(7)))
        kwargs.update(needs.reference_arguments(images=images, sentences=["a photo.", "a small picture."]))
    kwargs.update(cost_options(name))
    kwargs.update(options.options.get(name, {}))
    return cls(**kwargs), needs.trains


class _FreshCLIP:
    """The model each strategy is built on: loaded after ``torch.manual_seed(seed)``, as a fresh
    load per strategy when timing (a copy kept on the device would count in the GPU's peak
    memory); when counting parameters only, loaded once and copied, the random generator set to
    where the load left it, so that every strategy is built exactly as on its own load."""

    def __init__(self, options: CostOptions) -> None:
        self.options = options
        self.model = self.tokenizer = self.rng = None

    def take(self):
        """``(model, tokenizer)``: a freshly loaded model (or a copy of the one kept)."""
        if self.model is None:
            model, tokenizer = self._load()
            if self.options.timing:
                return model, tokenizer
            self.model, self.tokenizer, self.rng = model, tokenizer, torch.get_rng_state()
        torch.set_rng_state(self.rng)
        return copy.deepcopy(self.model), self.tokenizer

    def _load(self):
        from ....clip.load import load_clip
        from ....clip.registry import resolve_pretrained

        options = self.options
        pretrained = resolve_pretrained(options.model, options.pretrained, options.cache_dir)  # made weights: their file
        torch.manual_seed(options.seed)
        previous = logging.getLogger().level
        logging.getLogger().setLevel(logging.ERROR)  # open_clip warns that the weights are random
        try:
            model, _, _, tokenizer = load_clip(options.model, pretrained=pretrained, device=torch.device(options.device))
        finally:
            logging.getLogger().setLevel(previous)
        return model, tokenizer


def _measure_one(name: str, options: CostOptions, clip: _FreshCLIP, bar) -> dict:
    from ...runner import prepare_plugins

    device = torch.device(options.device)
    model, tokenizer = clip.take()
    clip_size = _held(model)
    image_size = _image_size(model)
    last = max(options.tasks)
    # counting parameters needs every task's growth, not its data (PARAMS_ONLY_IMAGES)
    train_images = options.batch_size if options.timing else PARAMS_ONLY_IMAGES
    stream = random_stream(last, options.classes, train_images, options.eval_images, image_size, options.seed)
    # the timer first: its iteration spans end before the probe counts memory
    timer, probe = RunTime(iterations=("train", "eval"), warmup=options.warmup), CostProbe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # no loggers; warm-up longer than the timed steps; ...
        strategy, trains = _build(name, model, tokenizer, [timer, probe], options, image_size)
        for plugin in strategy.plugins:  # growth that can follow shapes alone (InfLoRA's: no covariances, no SVD)
            if hasattr(plugin, "shapes_only"):
                plugin.shapes_only = not options.timing
        if options.timing:  # nothing runs a timed step without timing: no kernel to build
            prepare_plugins(strategy)  # e.g. MoRAM's CPU routing kernel: built here, outside every timed step
        row = {"strategy": name, "class": type(strategy).__name__, "trains": trains, "tasks": []}
        for task in range(1, last + 1):
            measured = task in options.tasks
            timed = measured and options.timing
            if trains:
                strategy.iterations = options.warmup + options.iterations if timed else 0
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(device)
            strategy.train(stream.train_stream[task - 1])
            entry = {"task": task, "trainable": probe.trainable, "added": _held(model) - clip_size}
            if task == 1 and probe.formulas:
                layer, formula = representative(probe.formulas)
                row["per_matrix"] = {"layer": layer, **asdict(formula)}
            if timed:
                if trains:
                    cuda = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
                    entry["peak_mb"] = (cuda if cuda is not None else probe.proxy_peak) / 2 ** 20
                    entry["train_ms_per_image"] = _median_ms(timer.iterations["train"])
                entry["infer_ms_per_image"] = _inference_ms(strategy, timer, stream.test_stream[task - 1], options)
            if measured or task == 1:
                row["tasks"].append(entry)
            bar.update()
    return row


def _median_ms(iterations: Stopwatch) -> Optional[float]:
    """Median over the kept iterations of milliseconds per image (None without one)."""
    if not iterations.seconds:
        return None
    return 1000 * statistics.median(s / n for s, n in zip(iterations.seconds, iterations.sizes))


def _inference_ms(strategy, timer: RunTime, experience, options: CostOptions) -> float:
    """Median ms/image over the iterations of ``repeats`` evaluations, after an untimed one."""
    strategy.eval([experience])  # warm-up: kernels, the classifier's text embeddings
    timer.iterations["eval"].reset()
    for _ in range(options.repeats):
        strategy.eval([experience])
    return _median_ms(timer.iterations["eval"])


__all__ = ["CostOptions", "DEFAULT_CLASSES", "DEFAULT_STRATEGIES", "PAPER_TASKS", "PARAMS_ONLY_IMAGES", "RandomImages",
           "describe_device", "measure_cost", "random_stream"]
