"""What a strategy declares for the command line and the demo, so neither branches on its name.

Each strategy class carries a :class:`StrategyNeeds` as its ``needs`` attribute (inherited
unless it declares its own): ``moram-avalanche run / compare`` read it to decide which shared
options apply (``--iterations``, ``--ref-images``, ``--ref-sentences``), and the demo reads it
for the strategy's recipe at the demo's small budget. Adding a strategy means declaring its
needs on its class and one line in :mod:`~moram_avalanche.strategies.registry`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple

#: the reference data a strategy can take -> its keyword argument (and command-line option)
REFERENCE_ARGUMENTS = {"images": "reference_images", "sentences": "reference_sentences"}


@dataclass(frozen=True)
class StrategyNeeds:
    """A strategy's declaration for the command line and the demo.

    Attributes:
        trains: whether the strategy takes ``iterations`` (``--iterations``); ZeroShot does not.
        references: the reference data it takes, a subset of :data:`REFERENCE_ARGUMENTS`:
            ``"images"`` (``--ref-images`` -> ``reference_images``), ``"sentences"``
            (``--ref-sentences`` -> ``reference_sentences``).
        demo: its options at the demo's small budget: a function of the demo's settings
            (:class:`moram_avalanche.experiments.demo.DemoConfig`, read by attribute) giving
            keyword arguments -- the strategy's own recipe scaled to the demo. None: the
            shared budget alone (batch size and iterations).
        cost: its options for ``moram-avalanche cost`` (:mod:`moram_avalanche.experiments.cost`),
            which builds it offline on random weights to count parameters and time it: a
            function giving keyword arguments that replace what needs a download or trains
            outside the measured loop by stand-ins of the same compute (MoE-Adapters: DDAS's
            AlexNet with random weights). None: nothing to replace.
        data_parallel: whether it trains correctly data-parallel (``torchrun``, the
            :class:`~moram_avalanche.strategies.plugins.data_parallel.DataParallel` plugin);
            the command line refuses the others there.
    """

    trains: bool = True
    references: Tuple[str, ...] = ()
    demo: Optional[Callable[[Any], Dict[str, Any]]] = None
    cost: Optional[Callable[[], Dict[str, Any]]] = None
    data_parallel: bool = True

    def __post_init__(self):
        unknown = sorted(set(self.references) - set(REFERENCE_ARGUMENTS))
        if unknown:
            raise ValueError(f"unknown reference kinds {unknown}; expected a subset of "
                             f"{tuple(REFERENCE_ARGUMENTS)}")

    def taken(self, **given) -> Dict[str, Any]:
        """The given reference data (``images=...``, ``sentences=...``) this strategy takes,
        None values left out."""
        return {kind: value for kind, value in given.items()
                if value is not None and kind in self.references}

    def reference_arguments(self, **given) -> Dict[str, Any]:
        """``{keyword argument: value}`` for the given reference data this strategy takes."""
        return {REFERENCE_ARGUMENTS[kind]: value for kind, value in self.taken(**given).items()}

    def demo_options(self, config) -> Dict[str, Any]:
        """The options :attr:`demo` gives for the demo settings ``config`` ({} without one)."""
        return dict(self.demo(config)) if self.demo is not None else {}

    def cost_options(self) -> Dict[str, Any]:
        """The options :attr:`cost` gives ({} without one)."""
        return dict(self.cost()) if self.cost is not None else {}


__all__ = ["REFERENCE_ARGUMENTS", "StrategyNeeds"]
