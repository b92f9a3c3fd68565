"""The Decoder protocol, and the registry of sources by signal and media type.

A source is a signal (`traces`, `logs`, `lines`, `celery-log`) in a media type
(`protobuf`, `json`, `ndjson`, `text`). Its reference decoder is the specification: the
plainest code that turns a body into the contract's rows. An accelerator gives the same
rows faster, and registers against the reference it must equal; one parametrised suite
(tests/test_decoder_equivalence.py) holds every accelerator to its reference over that
source's corpus. The receivers ask the registry which decoder serves a body.

Body decoders and stream sources. A source is registered here when a body can be decoded
on its own: an OTLP request (traces, logs; the HTTP and gRPC receivers), a block of JSON
lines (`dupescope ingest`, a tailed file), a Celery worker log (`celery-log` in `text`).
Its rows depend on the body and the mapping only, which is what lets an accelerator be
held to its reference body by body and a body be decoded in any worker process. Celery's
event stream (collectors/celery_events.py, consumed live by
collectors/service/celery_source.py) is a stream source, not a body decoder: an event is
a message on a broker, and its row depends on what earlier events said (which worker holds
which task, which delivery a success ends, which tasks a worker that went away held), so
it is mapped in order by one stateful consumer per broker and is not registered here. A
Celery log read in pieces shares that need, which is why its decoder also gives the
stateful reader that `ingest` and the tail read pieces with.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import pyarrow as pa

from collectors.arrow_batch import rows_to_table
from collectors.jsonlines import Decoded, Rejected
from collectors.normalise import Normaliser

SIGNALS = (
    "traces", "logs", "lines", "celery-log", "sidekiq-log", "rq-log", "arq-log", "dramatiq-log"
)
MEDIA = ("protobuf", "json", "ndjson", "text")


class Refused(ValueError):
    """A body refused whole: it is not a request of this source at all (a 400)."""


@dataclass
class Output:
    """What one body gave: rows (EVENTS_SCHEMA, RUNS_SCHEMA from the native decoder, or
    VIEW_SCHEMA from a bulk decoder giving views), the records refused with where and why,
    the records that are no job events, and the lines read where the body is lines (file
    ingest reports them, and counting them again would cost a pass over the block)."""

    table: pa.Table
    rejected: list[Rejected] = field(default_factory=list)
    ignored: int = 0
    lines: int = 0


def rows_output(decoded: Decoded, lines: int = 0) -> Output:
    """What a decoder that builds rows one by one gave, with its rows made a table."""
    return Output(rows_to_table(decoded.rows), decoded.rejected, decoded.ignored, lines)


class RunsAnywhere:
    """What a decoder written in Python says of itself: it serves request bodies, not
    only blocks of many MB, and runs wherever Python does."""

    bulk = False

    def available(self) -> bool:
        return True


class Decoder(Protocol):
    """Turns the bodies of one source into canonical rows.

    `bulk` marks a decoder made for blocks of many MB (file ingest), which request bodies
    are not served by. `available()` is false where the decoder cannot run here (a native
    one built without a C compiler).
    """

    @property
    def signal(self) -> str: ...

    @property
    def media(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def bulk(self) -> bool: ...

    def available(self) -> bool: ...

    def decode(self, body: bytes, normaliser: Normaliser, source: str) -> Output:
        """The rows of `body` under `normaliser`'s mapping; Refused for a body that is
        not one of this source's."""
        ...


@runtime_checkable
class GivesViews(Protocol):
    """A bulk decoder that can give its rows' text as views into the body (VIEW_SCHEMA),
    for a store that writes them as they are (the embedded store's segments): no copy."""

    def with_views(self) -> Decoder: ...


class UnknownSource(LookupError):
    """No decoder is registered for this signal and media type."""


class Registry:
    """Reference decoders by (signal, media), and the accelerators of each."""

    def __init__(self) -> None:
        self._references: dict[tuple[str, str], Decoder] = {}
        self._accelerators: dict[tuple[str, str], list[Decoder]] = {}

    def register(self, decoder: Decoder, *, accelerates: Decoder | None = None) -> Decoder:
        """Add a reference decoder, or (`accelerates`) an accelerator of a registered one."""
        key = (decoder.signal, decoder.media)
        if decoder.signal not in SIGNALS or decoder.media not in MEDIA:
            raise ValueError(f"unknown signal or media type: {key}")
        if accelerates is None:
            if key in self._references:
                raise ValueError(f"a reference decoder is registered for {key} already")
            self._references[key] = decoder
        else:
            if self._references.get(key) is not accelerates:
                raise ValueError(f"{decoder.name} accelerates no registered reference")
            self._accelerators.setdefault(key, []).append(decoder)
        return decoder

    def sources(self) -> list[tuple[str, str]]:
        return list(self._references)

    def reference(self, signal: str, media: str) -> Decoder:
        try:
            return self._references[(signal, media)]
        except KeyError:
            raise UnknownSource(f"no decoder for {signal} in {media}") from None

    def accelerators(self, signal: str, media: str) -> list[Decoder]:
        return list(self._accelerators.get((signal, media), ()))

    def serving(self, signal: str, media: str, *, bulk: bool = False) -> Decoder:
        """The decoder for a body: the last registered accelerator that can run here (and
        suits the body's size), else the reference."""
        for decoder in reversed(self.accelerators(signal, media)):
            if decoder.available() and (bulk or not decoder.bulk):
                return decoder
        return self.reference(signal, media)
