"""OTLP log records, in protobuf and in JSON: `otlp.decode_logs` is the one decoder."""

from __future__ import annotations

from dataclasses import dataclass

from collectors.decoders import otlp_messages
from collectors.decoders.base import Output, RunsAnywhere, rows_output
from collectors.normalise import Normaliser
from collectors.otlp import decode_logs


@dataclass(frozen=True)
class LogsReference(RunsAnywhere):
    """Each log record's row: its attributes plus a structured body."""

    media: str
    signal: str = "logs"
    name: str = "otlp.decode_logs"

    def decode(self, body: bytes, normaliser: Normaliser, source: str) -> Output:
        decoded = decode_logs(otlp_messages.logs(body, self.media), normaliser, source)
        return rows_output(decoded)
