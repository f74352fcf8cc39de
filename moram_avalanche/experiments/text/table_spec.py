"""A language-model table of the paper (:class:`TextTableSpec`): its model, its stream's orders or
blocks, and the stream (:mod:`.streams`) its runs read and its cells are read from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..paper.numbers import PaperRow
from ..paper.spec import PaperTable
from .lm_cl_stream import ORDER_SUMMARIES
from .stream_protocol import TextProtocol, TextRunProtocol, TextStream
from .streams import text_stream


@dataclass(frozen=True, kw_only=True)
class TextTableSpec(PaperTable):
    """One language-model table of the paper and how to regenerate it (the attributes of
    :class:`~moram_avalanche.experiments.paper.spec.PaperTable`, and):

    Attributes:
        model: the Hugging Face name of the paper's model (``--model`` overrides it with a name
            or a local folder).
        architecture: "t5" or "llama": the family of the rehearsal's tiny model.
        dtype: the weights' dtype (``--dtype`` overrides it).
        orders: the stream's orders, one column each on ``lm-cl`` (one run each).
        benchmark: the ``--benchmark`` name of its stream (:data:`~.streams.TEXT_STREAMS`).
        blocks: ``(block, model, architecture)`` per block of a table whose blocks run different
            models (TRACE's, one model each).
        summary: the last column of an ``lm-cl`` table, after its orders (:data:`~.lm_cl_stream.ORDER_SUMMARIES`).
        runs_of: the table whose runs this one reads ("": its own). Its rows are then that
            table's run folders, run with that table's settings (:attr:`run_table`): one run
            serves both tables and either command fills it.
    """

    model: str
    architecture: str
    dtype: str
    orders: Tuple[int, ...]
    benchmark: str = "lm-cl"
    blocks: Tuple[Tuple[str, str, str], ...] = ()
    summary: str = "Average"
    runs_of: str = ""

    def __post_init__(self) -> None:
        if self.summary not in ORDER_SUMMARIES:
            raise ValueError(f"table {self.name}: summary {self.summary!r} is not one of "
                             f"{', '.join(map(repr, ORDER_SUMMARIES))}")

    @property
    def run_table(self) -> str:
        """The table whose runs (folders and settings) this one's rows are (:attr:`runs_of`)."""
        return self.runs_of or self.name

    @property
    def stream(self) -> TextStream:
        """How the table's runs read their stream (:data:`~.streams.TEXT_STREAMS`, by :attr:`benchmark`)."""
        return text_stream(self.benchmark)

    @property
    def columns(self) -> Tuple[str, ...]:
        return self.stream.columns(self)

    @property
    def protocol(self) -> TextProtocol:
        return self.stream.protocol(self)

    def block_model(self, block: str) -> Tuple[str, str]:
        """``(model, architecture)`` of a block (the table's one model outside TRACE)."""
        for name, model, architecture in self.blocks:
            if name == block:
                return model, architecture
        return self.model, self.architecture

    def table_columns(self) -> Tuple[str, ...]:
        return self.columns

    def run_protocols(self, settings, block: Optional[str] = None) -> Tuple[TextRunProtocol, ...]:
        """One per order of the stream (TRACE: its one order), with the block's model (``--model``
        when given) for :attr:`run_table`'s settings."""
        architecture = self.block_model(block)[1] if block else self.architecture
        return tuple(TextRunProtocol(self.stream, self.run_table, settings.model_of(self, block), architecture,
                                     settings.dtype_of(self), order) for order in self.stream.orders(self))

    def row_name(self, block: str, label: str) -> str:
        """Block and label: a block may run its own model (TRACE's)."""
        return f"{block} / {label}"

    def cells(self, block: str, paper_row: Optional[PaperRow], runs: Sequence[Any],
              reports: Optional[Dict[Any, dict]], settings) -> Dict[str, Any]:
        return self.stream.cells(self, paper_row, runs, reports, settings)

    def plan_heading(self, settings) -> str:
        """The model of each block (a rehearsal's tiny one), its dtype, gradient checkpointing."""
        blocks = list(dict.fromkeys(block for block, _ in self.table_rows()))
        models = ", ".join(dict.fromkeys(
            "tiny random-init " + self.block_model(b)[1] if settings.rehearse else settings.model_of(self, b)
            for b in blocks))
        return (f"\n  model: {models} ({settings.dtype_of(self)}"
                f"{', gradient checkpointing' if settings.gradient_checkpointing else ''})")

    def plan_lines(self, settings) -> List[str]:
        """The stream's orders, whose runs these are, how each row runs, and every setting its
        stream and table change with its source (:func:`~.recipes.plan_lines`)."""
        from .recipes import plan_lines

        lines = self.stream.plan_lines(self)
        if self.runs_of:
            lines.append(f"  runs: {self.runs_of}'s (the same folders and settings; `reproduce {self.runs_of}` "
                         "fills them too)")
        labels = list(dict.fromkeys(label for _, label in self.table_rows()))
        for label in labels:
            method = self.method(label)
            lines.append(f"  {label}: " + (method.strategy + "".join(f", {k} {v!r}" for k, v in method.options)
                                           if method.strategy else f"not run: {method.reason}"))
        return lines + plan_lines(self.benchmark, self.run_table, [self.method(label).strategy for label in labels
                                                                   if self.method(label).strategy])


__all__ = ["TextTableSpec"]
