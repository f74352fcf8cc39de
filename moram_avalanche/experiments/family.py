"""The record of a model family, as the app reads it: :class:`Family`, with its :class:`Demo`, its
:class:`Reproduction` and the :class:`Tool` s it offers for its own runs (registered in :mod:`.families`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from .paper.spec import table_named


def _no_plugins(args) -> list:
    return []


def _nothing_to_check(args, options=None) -> None:
    """A family whose command-line arguments need no check beyond the shared ones."""


@dataclass(frozen=True)
class Demo:
    """A family's offline demo: a tiny pre-trained model compared with its strategies on a
    synthetic stream (:func:`~moram_avalanche.experiments.demos.run_family_demo`).

    Attributes:
        title: what messages call it ("the demo", "the text demo").
        strategies, full_strategies: what ``demo`` runs, and with ``--full`` (empty: no ``--full``).
        out: the default output folder.
        config: the demo's settings, a dataclass recorded in every run; ``config.quick()`` is a
            seconds-long version (``--quick``).
        key: the key of the demo's settings in its runs' records (``run.<key>``): a folder holding
            runs without it is another command's, which a demo never starts over.
        prepare: ``(config, cache_dir, device, progress) -> Setup``: the cached pre-trained model,
            the stream, the strategies' recipes and the tables to write.
        context: ``(config) -> context manager`` around the whole demo (threads, quiet libraries).
    """

    title: str
    strategies: Tuple[str, ...]
    full_strategies: Tuple[str, ...]
    out: str
    config: type
    key: str
    prepare: Callable[..., tuple]
    context: Callable[[Any], Any]


@dataclass(frozen=True)
class Reproduction:
    """A family's paper tables, as data the one pipeline reads
    (:func:`~moram_avalanche.experiments.reproduce.reproduce`, :mod:`~moram_avalanche.experiments.paper`).

    Each table (:class:`~moram_avalanche.experiments.paper.spec.PaperTable`) says how its rows run
    and how its cells are read; the settings a ``settings`` call returns say what the family's
    model and budget mean for a run (:class:`~moram_avalanche.experiments.paper.settings.ReproductionSettings`).

    Attributes:
        specs: ``{table name: table}`` in the paper's order (the order ``every`` runs them).
        settings: ``(command-line args) -> settings`` (flags of another family refused).
        index: ``(file name, title)`` of the index of the tables written under one root.
        every: the name that stands for every table of the family ("all"); "" for none.
    """

    specs: Mapping[str, Any]
    settings: Callable[[Any], Any]
    index: Tuple[str, str]
    every: str = ""

    @property
    def tables(self) -> Tuple[str, ...]:
        """The table names ``reproduce`` takes for this family (:attr:`every` last)."""
        return (*self.specs, *((self.every,) if self.every else ()))

    def resolve(self, table: str) -> Tuple[Any, ...]:
        """The tables ``table`` names: one, or every table for :attr:`every`."""
        if self.every and table == self.every:
            return tuple(self.specs.values())
        return (table_named(self.specs, table),)


@dataclass(frozen=True)
class Tool:
    """A command a family offers for its own runs, beyond those every family shares: ``analyze``
    (:attr:`Family.analysis`) and ``cost`` (:attr:`Family.cost`), which the command line reaches
    through the family record (:mod:`.families`).

    Attributes:
        run: ``(checked command-line arguments) -> what the command reports`` (the package of the
            tool imported when it runs).
        about: what it does, for messages naming the families that offer it ("the figures of CLIP
            runs (...)").
    """

    run: Callable[[Any], Any]
    about: str


@dataclass(frozen=True)
class Family:
    """A model family (module docstring).

    Attributes:
        name: its name (``"clip"``, ``"text"``): whose strategies a run's names are
            (:data:`~moram_avalanche.strategies.registry.FAMILIES`).
        model_loader: ``(args, device) -> () -> (model, train_transform, eval_transform, tokenizer)``
            of ``--model`` and its options, loaded on ``device``.
        benchmark_builder: ``(args) -> (train_transform, eval_transform) -> benchmark`` of
            ``--benchmark`` and its stream options.
        stream_options: ``(benchmark, strategy name=None, preset=None) -> options`` a stream sets
            for a strategy (its name None: for every strategy), beyond the strategy's defaults.
        dtype: ``(args) -> the weights' dtype or None``: ``--dtype``, else the stream's.
        tables: what a comparison of this family writes (:class:`~.tables.Tables`).
        demo: its offline demo. reproduction: its paper tables.
        check_arguments: ``(args, {strategy: options}) -> None``: everything of ``run`` / ``compare``'s command line
            this family can check without loading the model's weights (options it does not use,
            the model's files, the stream's data), run by :mod:`moram_avalanche.arguments` after
            the strategies' options and before any model loads or the output folder exists.
        run_plugins: ``(args) -> plugins`` the family's own command-line switches add to every
            strategy of a run (CLIP: ``--compile-eval``); the shared ones (``--keep-base-casts``) are
            added for every family (:func:`~.from_arguments.switch_plugins`).
        data_workers: whether its data is decoded by DataLoader worker processes (images: yes;
            the text streams' examples are strings in memory, read with none).
        analysis: ``analyze``: the paper's figures from a run of this family, ``run(args) -> the
            report's path`` (None: the family has none).
        cost: ``cost``: what its strategies cost as tasks accumulate, ``run(args) -> (report
            Markdown, results)`` (None: the family has none).
    """

    name: str
    model_loader: Callable[[Any, str], Callable[[], tuple]]
    benchmark_builder: Callable[[Any], Callable[[Any, Any], Any]]
    stream_options: Callable[..., Dict[str, Any]]
    dtype: Callable[[Any], Any]
    tables: Any
    demo: Demo
    reproduction: Reproduction
    check_arguments: Callable[..., None] = _nothing_to_check
    run_plugins: Callable[[Any], list] = _no_plugins
    data_workers: bool = True
    analysis: Optional[Tool] = None
    cost: Optional[Tool] = None


__all__ = ["Demo", "Family", "Reproduction", "Tool"]
