"""The record of a model family, as the app reads it: :class:`Family`, with its :class:`Demo`, its
:class:`Reproduction` and the :class:`Tool` s it offers for its own runs (registered in :mod:`.families`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional, Sequence, Tuple


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
    """A family's paper tables and how ``reproduce`` runs them
    (:func:`~moram_avalanche.experiments.reproduce.reproduce`).

    Attributes:
        tables: the table names ``reproduce`` takes for this family.
        specs: ``table -> [spec]`` (``"all"`` may stand for several).
        settings: ``(command-line args) -> settings`` (flags of another family refused).
        paper_text: ``[spec] -> Markdown`` of the paper's numbers alone.
        plan_text: ``([spec], settings) -> the plan`` (``--dry-run``).
        plan: ``([spec], settings) -> [(run, [rows it serves])]``, every distinct run once.
        check_needs: ``([spec], settings, plan) -> None``: one ValueError naming all that is missing.
        setup: ``(run, settings) -> Setup`` of one run's comparison folder.
        table_result: ``(spec, settings) -> TableResult`` from the finished runs.
        index: ``(file name, title)`` of the index of the tables written under one root.
    """

    tables: Tuple[str, ...]
    specs: Callable[[str], Sequence[Any]]
    settings: Callable[[Any], Any]
    paper_text: Callable[[Sequence[Any]], str]
    plan_text: Callable[[Sequence[Any], Any], str]
    plan: Callable[[Sequence[Any], Any], list]
    check_needs: Callable[[Sequence[Any], Any, list], None]
    setup: Callable[[Any, Any], Any]
    table_result: Callable[[Any, Any], Any]
    index: Tuple[str, str]


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
    data_workers: bool = True
    analysis: Optional[Tool] = None
    cost: Optional[Tool] = None


__all__ = ["Demo", "Family", "Reproduction", "Tool"]
