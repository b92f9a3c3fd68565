"""OTLP log records, in protobuf and in JSON: `otlp.decode_logs` is the one decoder."""

from __future__ import annotations

from dataclasses import dataclass

from collectors.arrow_batch import rows_to_table
from collectors.decoders import otlp_messages
from collectors.decoders.base import Output
from collectors.normalise import Normaliser
from collectors.otlp import decode_logs


@dataclass(frozen=True)
class LogsReference:
    """Each log record's row: its attributes plus a structured body."""

    media: str
    signal: str = "logs"
    name: str = "otlp.decode_logs"
    bulk: bool = False

    def available(self) -> bool:
        return True

    def decode(self, body: bytes, normaliser: Normaliser, source: str) -> Output:
        decoded = decode_logs(otlp_messages.logs(body, self.media), normaliser, source)
        return Output(rows_to_table(decoded.rows), decoded.rejected, decoded.ignored)
