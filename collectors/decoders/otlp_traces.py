"""OTLP traces, in protobuf and in JSON: the reference, and its two accelerators.

The reference is `otlp.decode_traces`, row by row. `otlp_columns` gives the same table
touching each protobuf field once; the native decoder (`otlp_native`) walks protobuf wire
bytes in C, handing the spans it does not take to `otlp_columns`.
"""

from __future__ import annotations

from dataclasses import dataclass

from collectors import otlp_native
from collectors.decoders import otlp_messages
from collectors.decoders.base import Output, RunsAnywhere, rows_output
from collectors.normalise import Normaliser
from collectors.otlp import decode_traces
from collectors.otlp_columns import decode_traces_table


@dataclass(frozen=True)
class TracesReference(RunsAnywhere):
    """The specification: each span's rows built by `otlp.decode_traces`."""

    media: str
    signal: str = "traces"
    name: str = "otlp.decode_traces"

    def decode(self, body: bytes, normaliser: Normaliser, source: str) -> Output:
        decoded = decode_traces(otlp_messages.traces(body, self.media), normaliser, source)
        return rows_output(decoded)


@dataclass(frozen=True)
class TracesColumns(RunsAnywhere):
    """`otlp_columns`: a span's shared fields read and normalised once."""

    media: str
    signal: str = "traces"
    name: str = "otlp_columns"

    def decode(self, body: bytes, normaliser: Normaliser, source: str) -> Output:
        request = otlp_messages.traces(body, self.media)
        table, rejected, ignored = decode_traces_table(request, normaliser, source)
        return Output(table, rejected, ignored)


@dataclass(frozen=True)
class TracesNative:
    """The C decoder of protobuf bodies; the protobuf message is parsed only when some
    span needs the Python path."""

    media: str = "protobuf"
    signal: str = "traces"
    name: str = "otlp_native"
    bulk: bool = False

    def available(self) -> bool:
        return otlp_native.available()

    def decode(self, body: bytes, normaliser: Normaliser, source: str) -> Output:
        table, rejected, ignored = otlp_native.decoder_for(normaliser).decode(
            body, lambda: otlp_messages.traces(body, self.media), source
        )
        return Output(table, rejected, ignored)
