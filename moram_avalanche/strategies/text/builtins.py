"""Avalanche's own strategies by name (``avalanche.naive``, ``avalanche.ewc``, ...), on language models.

The ``"text"`` family's counterpart of :mod:`..clip.builtins` (CLIP): ``get_strategy("avalanche.ewc",
"text")`` is a class that *is* Avalanche's ``EWC`` and *is* the package's generative loop
(:class:`~moram_avalanche.strategies.text.loop.TextStrategy`), made once per Avalanche strategy as
``type(f"Text{cls.__name__}", (TextBuiltinLoop, cls), ...)``. The method resolution order puts
the text loop first (``TextEWC -> TextBuiltinLoop -> TextStrategy -> EWC -> SupervisedTemplate``):

* Avalanche's strategy keeps its own ``__init__`` (it builds its plugin -- ``EWCPlugin``,
  ``ReplayPlugin``, ... -- from its arguments, reached through the text loop's ``**base_kwargs``),
  so every one of its arguments is an option, checked by name and type before anything is
  built (:func:`~moram_avalanche.strategies.options.check_strategy_options`) and settable with
  ``--set``;
* the text loop overrides the template's data, forward and criterion: batches of strings,
  the teacher-forced token cross-entropy (``LanguageModel.loss``) as the training loss, greedy
  generation scored per sample with the task's metric in evaluation (``eval_output = "scores"``,
  read by the accuracy matrix); the budget is the loop's (``epochs``, the paper's one per task, or ``iterations``
  minibatches per task) and so is the optimisation (AdamW, constant lr): the paper's setting,
  :data:`~moram_avalanche.strategies.text.loop.PAPER_TEXT_LOOP` (lr 1e-3, batch 64, one epoch),
  the same as the ``finetune`` row's, so ``avalanche.naive`` *is* SeqFT run by Avalanche's class;
* Avalanche's plugins that score the model on their own (EWC's importances, GEM / A-GEM's
  memory gradients, LwF's distillation) are re-classed by the loop as their text counterparts
  (:mod:`~moram_avalanche.strategies.text.plugins.avalanche`): the same algorithm with the token
  loss; the criterion Avalanche stores (``_criterion``) is :func:`token_loss`, which returns the
  training output (already the token loss) for any code that calls it;
* run checkpoints (``run_stream``, the command line's resume) are Avalanche's whole-strategy
  ones, as for Avalanche's strategies on CLIP: they hold the plugins' state (replay buffer,
  importances, teacher, memories), which the loop's lean model state would drop;
* the model: every weight trains (the ``finetune`` / SeqFT row), unless adapters were injected
  beforehand, whose own trainability is kept (and growth plugins grow them).

Composition over a mixin class was considered and left: Avalanche's wrappers build their plugin
inside ``__init__``, so reusing the class is the only way to keep "``avalanche.ewc``" meaning
Avalanche's ``EWC`` (its argument list, its plugin, ``isinstance(strategy, EWC)``).

Arguments Avalanche requires without a default take the value of its own examples (per entry,
as :mod:`..clip.builtins`); Avalanche's defaults are kept otherwise.

=====================  =======================  =============================================
name                   Avalanche class          defaults set here
=====================  =======================  =============================================
``avalanche.naive``    ``Naive``                --
``avalanche.replay``   ``Replay``               -- (``mem_size`` 200, Avalanche's)
``avalanche.ewc``      ``EWC``                  ``ewc_lambda`` 0.4 (examples/ewc_mnist.py)
``avalanche.lwf``      ``LwF``                  ``alpha`` 1, ``temperature`` 2 (LwFPlugin's)
``avalanche.gem``      ``GEM``                  ``patterns_per_exp`` 256 (examples/gem_agem_mnist.py)
``avalanche.agem``     ``AGEM``                 ``patterns_per_exp`` 256 (examples/gem_agem_mnist.py)
=====================  =======================  =============================================

GEM solves its projection with quadprog (Avalanche calls ``qpsolvers.solve_qp(...,
solver="quadprog")``): it needs the ``quadprog`` package, which Avalanche does not pin.
"""

from __future__ import annotations

from inspect import unwrap
from typing import Any, Dict

from avalanche.training import AGEM, EWC, GEM, LwF, Naive, Replay

from ...layers.base import find_layers
from ..avalanche_ranges import AVALANCHE_PREFIX, check_avalanche_benchmark, check_avalanche_values
from ..needs import StrategyNeeds
from .adapters import wrap
from .loop import TextStrategy

#: the prefix of Avalanche's strategies' names (as on CLIP)
PREFIX = AVALANCHE_PREFIX


def token_loss(output, answers):
    """The criterion Avalanche stores: the text loop's training output is already the token
    cross-entropy of the answers (``LanguageModel.loss``), so it is returned as is."""
    return output


def check_no_criterion(options) -> None:
    if "criterion" in options:
        raise ValueError("the language-model loop's criterion is the token cross-entropy of the answers; "
                         "it takes no criterion")


class TextBuiltinLoop(TextStrategy):
    """The text loop under one of Avalanche's strategy classes (module docstring).

    Args: the text loop's (:class:`~moram_avalanche.strategies.text.loop.TextStrategy`: epochs,
    iterations, lr, train_mb_size, ...) and the Avalanche strategy's own (``ewc_lambda``,
    ``mem_size``, ...; :attr:`avalanche_defaults` fills those Avalanche requires).
    """

    #: not data-parallel: Avalanche's plugins keep per-process state (buffers, importances,
    #: memories) that this package does not synchronise; torchrun is refused
    needs = StrategyNeeds(data_parallel=False)
    #: values of the Avalanche strategy's arguments that have no default there, and their source
    avalanche_defaults: Dict[str, Any] = {}
    source: str = ""
    #: the value checks of its own options (run once, by check_strategy_options)
    check_values = staticmethod(check_no_criterion)
    #: run checkpoints are Avalanche's whole strategy (replay buffers, EWC importances, LwF's
    #: teacher, GEM memories), not the loop's lean model state (run_stream reads this)
    lean_checkpoints = False

    def __init__(self, *, model, tokenizer=None, plugins=None, **kwargs):
        model = wrap(model, tokenizer)
        if not find_layers(model):
            model.requires_grad_(True)  # SeqFT: every weight
        # a copy: Avalanche's wrappers append their plugin to the list they are given. The text
        # loop's __init__ unwrapped: Avalanche wraps every template subclass's __init__ with a
        # check of the keyword names against *that* class's bases, which do not include the
        # Avalanche strategy mixed in below it (text_builtin); the final class's check covers all
        unwrap(TextStrategy.__init__)(self, model=model, tokenizer=tokenizer, plugins=list(plugins or []),
                                      criterion=token_loss, **{**self.avalanche_defaults, **kwargs})


def text_builtin(cls, defaults=None, source: str = ""):
    """``Text<cls>``: Avalanche's strategy ``cls`` on the text loop; its own arguments' ranges are
    Avalanche's class's (:data:`~moram_avalanche.strategies.avalanche_ranges.RANGES`)."""
    defaults = dict(defaults or {})

    def check_values(options) -> None:
        check_avalanche_values(cls.__name__, {**defaults, **options})

    def check_benchmark(klass, options, benchmark) -> None:
        TextBuiltinLoop.check_benchmark.__func__(klass, options, benchmark)  # the text loop's (accumulation)
        check_avalanche_benchmark(cls.__name__, {**defaults, **options}, benchmark)

    return type(f"Text{cls.__name__}", (TextBuiltinLoop, cls), {
        "check_values": staticmethod(check_values), "check_benchmark": classmethod(check_benchmark),
        "avalanche_defaults": defaults, "source": source, "__module__": __name__,
        "__init__": unwrap(TextBuiltinLoop.__init__),  # checked once, against every base (__init__ above)
        "__doc__": f"Avalanche's ``{cls.__name__}`` on the language-model loop ({__name__}; {source or 'its defaults'})."})


TextNaive = text_builtin(Naive)
TextReplay = text_builtin(Replay)
TextEWC = text_builtin(EWC, {"ewc_lambda": 0.4},
                       "ContinualAI/avalanche examples/ewc_mnist.py (--ewc_lambda 0.4, mode separate)")
TextLwF = text_builtin(LwF, {"alpha": 1.0, "temperature": 2.0},
                      "Avalanche's LwFPlugin / LearningWithoutForgetting defaults (alpha 1, temperature 2)")
TextGEM = text_builtin(GEM, {"patterns_per_exp": 256},
                       "ContinualAI/avalanche examples/gem_agem_mnist.py (--patterns_per_exp 256)")
TextAGEM = text_builtin(AGEM, {"patterns_per_exp": 256},
                        "ContinualAI/avalanche examples/gem_agem_mnist.py (--patterns_per_exp 256)")

#: ``avalanche.<name>`` -> Avalanche's strategy on the language-model loop (the ``"text"`` family)
TEXT_BUILTINS = {PREFIX + name: cls for name, cls in (
    ("naive", TextNaive), ("replay", TextReplay), ("ewc", TextEWC), ("lwf", TextLwF), ("gem", TextGEM),
    ("agem", TextAGEM))}


__all__ = ["PREFIX", "TEXT_BUILTINS", "TextAGEM", "TextBuiltinLoop", "TextEWC", "TextGEM", "TextLwF", "TextNaive",
           "TextReplay", "text_builtin", "token_loss"]
