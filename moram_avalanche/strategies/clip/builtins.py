"""Avalanche's own strategies by name (``avalanche.naive``, ``avalanche.ewc``, ...), on CLIP.

Each name builds the Avalanche strategy around :class:`~moram_avalanche.models.classifier.CLIPClassifier`
with the harness's budget and optimisation, so that ``moram-avalanche run`` / ``compare`` put
it in the paper-style table beside the package's strategies:

* the model: CLIP as an Avalanche model (logits over the benchmark's label space, every CLIP
  weight trained but ``logit_scale``, as :class:`~moram_avalanche.strategies.clip.finetune.FineTune`
  -- ZSCL's ``--train-mode whole``); adapters injected into the model beforehand are kept,
  and growth plugins (``plugins=[MoRAMPlugin()]``) grow them;
* the budget: ``iterations`` minibatches of ``train_mb_size`` per experience
  (:class:`~moram_avalanche.strategies.plugins.budget.IterationBudget`, the plugin
  :class:`~moram_avalanche.strategies.clip.loop.CLIPStrategy` attaches too; 500 and 64 by default,
  the MoRAM release's); in a data-parallel run
  ``train_mb_size`` is the global batch, each of the N processes loading ``train_mb_size / N``
  through Avalanche's distributed sampler;
* the optimisation: :class:`~moram_avalanche.strategies.clip.finetune.FineTune`'s -- AdamW, lr 1e-5
  (ZSCL's fine-tuning rate), betas (0.9, 0.9999), weight decay 0 and the per-iteration cosine
  schedule restarted every experience
  (:class:`~moram_avalanche.strategies.plugins.schedule.IterationSchedule`) -- so
  ``avalanche.naive`` differs from ``finetune`` by its loss (the user's criterion,
  cross-entropy over the model's logits) only;
* each strategy's own arguments keep Avalanche 0.6.0's defaults; the arguments Avalanche
  requires without a default take the value of its own example scripts (cited per entry);
  ``--set KEY=VALUE`` (``compare``: ``--set avalanche.ewc.ewc_lambda=1``) overrides any.

Every one works in both label spaces ("all", "domain") and data-parallel (``torchrun``:
each process loads ``train_mb_size / N`` of every global batch).
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass, field
from importlib import import_module
from typing import Any, Dict, Optional

import torch
from avalanche.training.plugins.evaluation import default_evaluator

from ...algorithms.data_parallel import world_size
from ...models.classifier import CLIPClassifier
from ...utils.devices import resolve_device
from ..avalanche_ranges import AVALANCHE_PREFIX, check_avalanche_benchmark, check_avalanche_values
from ..moram_setting import MORAM
from ..needs import StrategyNeeds
from ..plugins.agem import checkpointable_agem
from ..plugins.budget import IterationBudget
from ..plugins.schedule import IterationSchedule
from ..plugins.validate import check_plugins
from .loop import EVAL_BATCH_FACTOR

#: the prefix of Avalanche's strategies' names
PREFIX = AVALANCHE_PREFIX
#: the arguments :class:`BuiltinStrategy` sets itself (the harness's budget and optimisation)
HARNESS_ARGUMENTS = ("model", "optimizer", "criterion", "train_mb_size", "train_epochs", "eval_mb_size",
                     "device", "plugins", "evaluator", "eval_every")
#: the options :meth:`BuiltinStrategy.__call__` takes besides the strategy's own arguments
HARNESS_OPTIONS = ("model", "tokenizer", "iterations", "lr", "betas", "weight_decay", "warmup", "criterion",
                   "train_mb_size", "eval_mb_size", "device", "plugins", "evaluator", "progress")


def keeps_given_options(build):
    """``build(self, **options) -> strategy``, which also keeps the keyword arguments it was given
    on the strategy (``given_options``), as the package's own strategies keep theirs
    (:class:`~moram_avalanche.strategies.loop.ContinualLoop`): what a run folder records and a
    resume compares. (0.6 kept none for Avalanche's strategies on CLIP, so a killed run of one could
    not resume.) The signature stays ``build``'s: the options check reads it."""
    @functools.wraps(build)
    def call(self, **options):
        strategy = build(self, **options)
        strategy.given_options = dict(options)
        return strategy

    return call


@dataclass(frozen=True)
class BuiltinStrategy:
    """An Avalanche strategy class, callable like the package's strategies.

    ``BuiltinStrategy(...)(model=clip, tokenizer=tokenizer, iterations=..., lr=..., **options)``
    returns the Avalanche strategy training ``CLIPClassifier(clip, tokenizer)`` (see the
    module docstring); ``options`` are the strategy's own arguments.

    Attributes:
        name: the registry name (``avalanche.<name>``).
        target: ``"module:Class"`` of the Avalanche strategy (imported when built).
        defaults: values of arguments Avalanche requires without a default, with their source.
        needs: what the command line and the demo read (:class:`~moram_avalanche.strategies.needs.StrategyNeeds`).
    """

    name: str
    target: str
    defaults: Dict[str, Any] = field(default_factory=dict)
    source: str = ""
    needs: StrategyNeeds = field(default_factory=StrategyNeeds)

    @property
    def strategy_class(self):
        module, _, cls = self.target.partition(":")
        return getattr(import_module(module), cls)

    @property
    def __name__(self) -> str:  # noqa: A003 - what records and messages call a strategy class
        return self.strategy_class.__name__

    def check_options(self, options) -> None:
        """The names of keyword ``options`` of :meth:`__call__` (ValueError listing the strategy's
        own arguments); :func:`~moram_avalanche.strategies.options.check_strategy_options` checks
        them and the shared loop's ranges."""
        accepted = set(self.arguments()) | set(HARNESS_OPTIONS)
        unknown = sorted(set(options) - accepted)
        if unknown:
            raise ValueError(f"{self.name} has no argument(s) {unknown}; its own arguments: "
                             f"{sorted(self.arguments())} (the budget and optimisation: iterations, lr, "
                             "betas, weight_decay, warmup, train_mb_size)")

    def check_values(self, options) -> None:
        """The ranges of the strategy's own arguments in ``options`` (declared once, by Avalanche
        class, in :data:`~moram_avalanche.strategies.avalanche_ranges.RANGES`), the defaults this
        entry sets included."""
        check_avalanche_values(self.strategy_class.__name__, {**self.defaults, **options})

    def check_benchmark(self, options, benchmark) -> None:
        """The options against the stream they will train on (an ``alpha`` per experience)."""
        check_avalanche_benchmark(self.strategy_class.__name__, {**self.defaults, **options}, benchmark)

    def arguments(self) -> Dict[str, inspect.Parameter]:
        """The strategy's own keyword arguments (not the harness's)."""
        params = inspect.signature(self.strategy_class.__init__).parameters
        return {name: p for name, p in params.items()
                if name not in ("self", *HARNESS_ARGUMENTS) and p.kind is p.KEYWORD_ONLY}

    @keeps_given_options
    def __call__(self, *, model, tokenizer, iterations: int = MORAM.iterations, lr: float = 1e-5,
                 betas=MORAM.betas, weight_decay: float = MORAM.weight_decay, warmup: int = MORAM.warmup,
                 criterion: Optional[torch.nn.Module] = None, train_mb_size: int = MORAM.train_mb_size,
                 eval_mb_size: Optional[int] = None, device="cpu", plugins=None,
                 evaluator=default_evaluator, progress: bool = True, **options):
        """Build the strategy (``progress`` is accepted for the package's call convention;
        Avalanche's loops report through their loggers)."""
        from ..options import check_strategy_options

        check_strategy_options(self, dict(iterations=iterations, lr=lr, betas=betas, weight_decay=weight_decay,
                                          warmup=warmup, train_mb_size=train_mb_size,
                                          eval_mb_size=eval_mb_size, **options))
        device = resolve_device(device)
        world = world_size()
        if train_mb_size % world:
            raise ValueError(f"train_mb_size {train_mb_size} (the global batch) must be a multiple of the "
                             f"{world} data-parallel processes")
        classifier = model if isinstance(model, CLIPClassifier) else CLIPClassifier(model, tokenizer)
        classifier.model.logit_scale.requires_grad_(False)
        optimizer = torch.optim.AdamW(classifier.parameters(), lr=lr, betas=tuple(betas),
                                      weight_decay=weight_decay)
        own = [IterationBudget(iterations), IterationSchedule(iterations, warmup=warmup)]
        strategy = self.strategy_class(
            model=classifier, optimizer=optimizer, criterion=criterion or torch.nn.CrossEntropyLoss(),
            train_mb_size=train_mb_size // world, train_epochs=1,
            eval_mb_size=eval_mb_size or EVAL_BATCH_FACTOR * train_mb_size // world,
            device=device, plugins=[*own, *check_plugins(plugins)], evaluator=evaluator,
            **{**self.defaults, **options})
        # A-GEM's memory sampler as one that pickles: its run checkpoints (whole-strategy) are written
        checkpointable_agem(strategy.plugins)
        return strategy


def _entry(name: str, cls: str, defaults=None, source: str = "") -> BuiltinStrategy:
    return BuiltinStrategy(PREFIX + name, cls, dict(defaults or {}), source)


#: ``avalanche.<name>`` -> Avalanche strategy, in the package's call convention
BUILTINS: Dict[str, BuiltinStrategy] = {entry.name: entry for entry in (
    _entry("naive", "avalanche.training:Naive"),
    _entry("cumulative", "avalanche.training:Cumulative"),
    _entry("ewc", "avalanche.training:EWC", {"ewc_lambda": 0.4},
           "ContinualAI/avalanche examples/ewc_mnist.py (--ewc_lambda 0.4, mode separate)"),
    _entry("mas", "avalanche.training:MAS"),
    _entry("lwf", "avalanche.training:LwF", {"alpha": 1.0, "temperature": 2.0},
           "Avalanche's LwFPlugin / LearningWithoutForgetting defaults (alpha 1, temperature 2)"),
    _entry("replay", "avalanche.training:Replay"),
    _entry("der", "avalanche.training:DER"),
    _entry("agem", "avalanche.training:AGEM", {"patterns_per_exp": 256},
           "ContinualAI/avalanche examples/gem_agem_mnist.py (--patterns_per_exp 256)"),
    _entry("gdumb", "avalanche.training:GDumb"),
)}


__all__ = ["BUILTINS", "HARNESS_ARGUMENTS", "HARNESS_OPTIONS", "PREFIX", "BuiltinStrategy", "IterationSchedule"]
