"""What a strategy takes from the app, so the command line, the demo and ``reproduce`` do not
branch on its name.

Each strategy class carries a :class:`StrategyNeeds` as its ``needs`` attribute (inherited
unless it declares its own): whether it trains, the reference data it takes, the other files a
run of it reads, whether it trains data-parallel, and with sharded weights. Its options are
its signature and its ``check_values`` (:mod:`~moram_avalanche.strategies.options`); the app's
recipes -- the demo's small budget, the paper's settings per protocol, the cost measurement's
stand-ins, what a short budget shortens -- are data of the app (:mod:`moram_avalanche.experiments.clip.recipes`).
Adding a strategy means declaring its needs on its class and one line in
:mod:`~moram_avalanche.strategies.registry`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Tuple

#: the reference data a strategy can take -> its keyword argument (and command-line option)
REFERENCE_ARGUMENTS = {"images": "reference_images", "sentences": "reference_sentences"}


@dataclass(frozen=True)
class StrategyNeeds:
    """What a strategy takes from the app.

    Attributes:
        trains: whether the strategy takes ``iterations`` (``--iterations``); ZeroShot does not.
        references: the reference data it takes, a subset of :data:`REFERENCE_ARGUMENTS`:
            ``"images"`` (``--ref-images`` -> ``reference_images``), ``"sentences"``
            (``--ref-sentences`` -> ``reference_sentences``).
        files: other files a run needs on disk: a function of the run's keyword arguments
            giving ``{what: path}`` (e.g. DDAS's AlexNet weights); None: none.
        data_parallel: whether it trains correctly data-parallel (``torchrun``, the
            :class:`~moram_avalanche.strategies.plugins.data_parallel.DataParallel` plugin);
            the command line refuses the others there.
        fsdp: whether it trains with the pre-trained weights sharded over the processes
            (``--fsdp``, :mod:`~moram_avalanche.algorithms.fsdp`): only adapters train, added
            after the weights were sharded, and nothing copies the model. Opt-in: the command
            line refuses the others there.
        atoms: the option that sets how many rank-1 atoms each task adds to every adapted linear
            map (MoRAM's ``atoms_per_task``): banks that grow with every task, which a run checks
            fit the device for the whole stream before it starts; None: none.
    """

    trains: bool = True
    references: Tuple[str, ...] = ()
    files: Optional[Callable[[Dict[str, Any]], Dict[str, str]]] = None
    data_parallel: bool = True
    fsdp: bool = False
    atoms: Optional[str] = None

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

    def files_needed(self, options: Dict[str, Any]) -> Dict[str, str]:
        """``{what: path}`` of the other files a run with ``options`` needs ({} without :attr:`files`)."""
        return dict(self.files(options)) if self.files is not None else {}


__all__ = ["REFERENCE_ARGUMENTS", "StrategyNeeds"]
