"""The ranges of Avalanche's strategies' own arguments, declared once for both families.

``avalanche.ewc`` and the others take Avalanche's arguments as they are (``ewc_lambda``,
``alpha``, ``patterns_per_exp``, ...). Avalanche checks none of their values: ``ewc_lambda=-1``
trains a model pushed *away* from the old tasks' weights, ``alpha=-1`` rewards LwF's drift,
``patterns_per_exp=-1`` fails deep inside A-GEM's buffer after the first task. Each range is
declared here once, by the Avalanche class it belongs to (:data:`RANGES`), and checked once, with
every other option, before anything is built
(:func:`~moram_avalanche.strategies.options.check_strategy_options`): on CLIP by the registry's
entries (:class:`~moram_avalanche.strategies.clip.builtins.BuiltinStrategy`), on the text loop by the
classes of :mod:`~moram_avalanche.strategies.text.builtins`.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, Dict, Mapping, Optional, Tuple

from ..utils.checks import check_number


@dataclass(frozen=True)
class Range:
    """What one argument takes: a number in ``[low, high]`` (``low_open`` / ``high_open``: the
    bound excluded), an int when ``integer``, None too when ``optional``, one number or a
    sequence of them (one per experience) when ``per_experience``, or one of ``choices``."""

    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False
    integer: bool = False
    optional: bool = False
    per_experience: bool = False
    choices: Optional[Tuple[str, ...]] = None
    hint: str = ""

    def check(self, name: str, value: Any) -> None:
        """A ValueError naming ``name``, what it takes and ``value`` when the value is out of range."""
        if value is None and self.optional:
            return
        if self.choices is not None:
            if value not in self.choices:
                raise ValueError(f"{name} must be one of {', '.join(map(repr, self.choices))}, got {value!r}")
            return
        if self.per_experience and isinstance(value, (list, tuple)):
            if not value:
                raise ValueError(f"{name} must be a number or one per experience, got an empty {type(value).__name__}")
            for item in value:
                self.check(f"each of {name}", item)
            return
        if self.integer:
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or not (
                    value >= self.low and value <= self.high):
                bounds = f" in [{self.low:g}, {self.high:g}]" if math.isfinite(self.high) else f" >= {self.low:g}"
                raise ValueError(f"{name} must be an int{bounds}{self.hint and f' ({self.hint})'}, got {value!r}")
            return
        check_number(name, value, low=self.low, high=self.high, low_open=self.low_open,
                     high_open=self.high_open, hint=self.hint)


_MEMORY = Range(low=1, integer=True, hint="examples kept in the replay memory")
#: the registry names of Avalanche's own strategies begin with it, in both families
#: (``avalanche.naive``, ``avalanche.ewc``, ...)
AVALANCHE_PREFIX = "avalanche."

#: Avalanche class name -> {argument: its range} (Avalanche 0.6.0's arguments)
RANGES: Dict[str, Dict[str, Range]] = {
    "EWC": {"ewc_lambda": Range(low=0, hint="the penalty's weight; 0 is plain fine-tuning, e.g. 0.4"),
            "mode": Range(choices=("separate", "online")),
            "decay_factor": Range(low=0, high=1, optional=True, hint="online mode's decay of older importances")},
    "LwF": {"alpha": Range(low=0, per_experience=True, hint="the distillation's weight, e.g. 1"),
            "temperature": Range(low=0, low_open=True, hint="the softmax temperature of the distillation, e.g. 2")},
    "AGEM": {"patterns_per_exp": Range(low=1, integer=True, hint="examples kept per task, e.g. 256"),
             "sample_size": Range(low=1, integer=True, hint="memory examples per projection, e.g. 64")},
    "GEM": {"patterns_per_exp": Range(low=1, integer=True, hint="examples kept per task, e.g. 256"),
            "memory_strength": Range(low=0, hint="the margin of the projection, e.g. 0.5")},
    "MAS": {"lambda_reg": Range(low=0, hint="the penalty's weight, e.g. 1"),
            "alpha": Range(low=0, high=1, hint="the importances' moving-average weight, e.g. 0.5")},
    "DER": {"mem_size": _MEMORY, "batch_size_mem": Range(low=1, integer=True, optional=True),
            "alpha": Range(low=0, hint="the logit-matching weight, e.g. 0.1"),
            "beta": Range(low=0, hint="the label-replay weight, e.g. 0.5")},
    "Replay": {"mem_size": _MEMORY},
    "GDumb": {"mem_size": _MEMORY},
}


def check_avalanche_benchmark(strategy: str, options: Mapping[str, Any], benchmark) -> None:
    """An argument given per experience (LwF's ``alpha``) holds one value for every experience of
    the stream it will train on (Avalanche indexes it by experience: a shorter list failed with an
    IndexError at the first experience past its end)."""
    experiences = len(benchmark.train_stream)
    for name, declared in RANGES.get(strategy, {}).items():
        value = options.get(name)
        if declared.per_experience and isinstance(value, (list, tuple)) and len(value) < experiences:
            raise ValueError(f"{name} holds {len(value)} value(s), one per experience, and the stream has "
                             f"{experiences} experiences: give {experiences} values, or one number for all")


def check_avalanche_values(strategy: str, options: Mapping[str, Any]) -> None:
    """The ranges of Avalanche class ``strategy``'s own arguments given in ``options``
    (:data:`RANGES`); EWC's online mode needs its ``decay_factor``. A ValueError naming the argument."""
    ranges = RANGES.get(strategy, {})
    for name, value in options.items():
        if name in ranges:
            ranges[name].check(name, value)
    if strategy == "EWC" and options.get("mode") == "online" and options.get("decay_factor") is None:
        raise ValueError("mode 'online' needs decay_factor, a number in [0, 1] (EWC's online mode decays older "
                         "importances by it), got None: give it, e.g. decay_factor=0.9, or mode='separate'")


__all__ = ["AVALANCHE_PREFIX", "RANGES", "Range", "check_avalanche_benchmark", "check_avalanche_values"]
