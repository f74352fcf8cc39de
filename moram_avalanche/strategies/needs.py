"""What a strategy declares for the command line, the demo and ``reproduce``, so none of them
branches on its name.

Each strategy class carries a :class:`StrategyNeeds` as its ``needs`` attribute (inherited
unless it declares its own): ``moram-avalanche run / compare`` read it to decide which shared
options apply (``--iterations``, ``--ref-images``, ``--ref-sentences``) and to check a
strategy's options before anything is built (``check``), the demo reads it for the
strategy's recipe at the demo's small budget, and ``moram-avalanche reproduce`` for
the settings of the paper's runs (``paper``, with their source), the data they need on disk
(``reference_paths``, ``files``) and what to shorten with the budget (``short_budget``).
Adding a strategy means declaring its needs on its class and one line in
:mod:`~moram_avalanche.strategies.registry`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

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
        check: the value checks of its own options, on the given options alone (a mapping of
            the keyword arguments passed; absent ones keep their defaults): raises a
            ValueError naming the option, what was given and what is allowed. It builds
            nothing (no model, no layer), so a comparison checks every strategy before the
            first one runs; the constructor runs it too (before it touches the model). The
            checks of the classes a strategy derives from run as well; names and types are
            checked from the signatures
            (:func:`~moram_avalanche.strategies.options.check_strategy_options`).
        paper: the keyword arguments of the paper's runs of this strategy -- every setting
            the paper (or the strategy's own paper) fixes, written out so a changed default
            cannot change a reproduction: a function of the protocol (an object with
            ``benchmark`` -- "xtail" or "mtil" --, ``shots`` and ``order``, read by
            attribute). None: the strategy's defaults.
        paper_source: where those settings come from, and what is our choice (shown by
            ``reproduce --dry-run``).
        reference_paths: where the paper's reference data lie under a data root, by kind
            (``{"images": "ImageNet/train"}``): ``reproduce``'s default for each reference
            kind of :attr:`references`.
        files: other files a run needs on disk: a function of the run's keyword arguments
            giving ``{what: path}`` (e.g. DDAS's AlexNet weights); None: none.
        short_budget: options that keep their share of the budget when the iterations per
            experience are cut to ``n`` (``reproduce --rehearse`` and smoke runs): a function
            of ``n`` giving keyword arguments (warm-up, averaging period, autoencoder
            iterations, ...). None: nothing else to shorten.
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
    check: Optional[Callable[[Mapping[str, Any]], None]] = None
    paper: Optional[Callable[[Any], Dict[str, Any]]] = None
    paper_source: str = ""
    reference_paths: Mapping[str, str] = field(default_factory=dict)
    files: Optional[Callable[[Dict[str, Any]], Dict[str, str]]] = None
    short_budget: Optional[Callable[[int], Dict[str, Any]]] = None
    cost: Optional[Callable[[], Dict[str, Any]]] = None
    data_parallel: bool = True

    def __post_init__(self):
        unknown = sorted(set(self.references) - set(REFERENCE_ARGUMENTS))
        if unknown:
            raise ValueError(f"unknown reference kinds {unknown}; expected a subset of "
                             f"{tuple(REFERENCE_ARGUMENTS)}")
        stray = sorted(set(self.reference_paths) - set(self.references))
        if stray:
            raise ValueError(f"reference_paths names kinds the strategy does not take: {stray} "
                             f"(references: {self.references})")

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

    def paper_options(self, protocol) -> Dict[str, Any]:
        """The options :attr:`paper` gives for ``protocol`` ({} without one)."""
        return dict(self.paper(protocol)) if self.paper is not None else {}

    def cost_options(self) -> Dict[str, Any]:
        """The options :attr:`cost` gives ({} without one)."""
        return dict(self.cost()) if self.cost is not None else {}

    def short_budget_options(self, iterations: int) -> Dict[str, Any]:
        """The options :attr:`short_budget` gives for ``iterations`` ({} without one)."""
        return dict(self.short_budget(iterations)) if self.short_budget is not None else {}

    def files_needed(self, options: Dict[str, Any]) -> Dict[str, str]:
        """``{what: path}`` of the other files a run with ``options`` needs ({} without :attr:`files`)."""
        return dict(self.files(options)) if self.files is not None else {}


def scaled(value: int, iterations: int, of: int = 500, *, at_least: int = 0) -> int:
    """``value`` (set for a budget of ``of`` iterations) scaled to ``iterations``, rounded down,
    never below ``at_least`` (for :attr:`StrategyNeeds.short_budget`)."""
    return max(at_least, value * iterations // of)


__all__ = ["REFERENCE_ARGUMENTS", "StrategyNeeds", "scaled"]
