"""The text family's protocols, by ``--benchmark`` name (:data:`TEXT_STREAMS`): how a table's runs
read ``lm-cl``, ``trace``, ``superni`` and ``codealpaca`` (:class:`~.stream_protocol.TextStream`)."""

from __future__ import annotations

from typing import Dict

from ...utils.names import lookup
from .codealpaca_stream import CodeAlpacaStream
from .lm_cl_stream import LmClStream
from .stream_protocol import TextStream
from .superni_stream import SuperNIStream
from .trace_stream import TraceStream

#: ``--benchmark`` name -> how a table's runs read that stream (the text family's protocols)
TEXT_STREAMS: Dict[str, TextStream] = {stream.benchmark: stream for stream in (
    LmClStream(), TraceStream(), SuperNIStream(), CodeAlpacaStream())}


def text_stream(benchmark: str) -> TextStream:
    """The protocol record of text stream ``benchmark`` (:data:`TEXT_STREAMS`)."""
    return lookup(TEXT_STREAMS, benchmark, "text stream")


__all__ = ["TEXT_STREAMS", "text_stream"]
