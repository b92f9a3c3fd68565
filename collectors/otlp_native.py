"""OTLP/protobuf trace requests -> canonical Arrow tables through the native decoder.

`_otlp_native` walks the wire bytes and writes the canonical columns itself, for every
span in the common shape; the spans it names as unusual (and whole requests it hands
back) go through `otlp_columns`, which equals the reference `otlp.decode_traces`.
Unusual are, among others, Celery-instrumented spans: their mapping
(collectors/celery_spans.py) is written once, in Python. The contract's
tables, the field layout among them, are given to it from `store.contract` when a decoder
is built (`native_config`), so they live in one place.

The extension checks what protobuf's own parser checks (wire structure, UTF-8 strings)
and hands back any body it cannot walk, so a body it accepts is one the reference would
accept. It is built at install time; without a C compiler the collector still works, on
the Python path (`available()` says which).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import pyarrow as pa
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collectors import celery_spans
from collectors.jsonlines import Rejected
from collectors.normalise import Normaliser
from collectors.otlp_columns import decode_traces_rows, rows_table
from store import contract
from store.contract import (
    ATTEMPT_KEYS,
    CELERY_RETRIES,
    EVENT_KINDS,
    EXECUTION_STEPS,
    FIELDS,
    INT_FIELDS,
    JOB_ID_KEYS,
    NO_JOB_ID_KINDS,
    OPERATION_EVENTS,
    OPERATION_KEYS,
    PRODUCER_KINDS,
    RESOURCE_WORKER_ID,
    STRING_FIELDS,
)
from store.schema import EVENTS_SCHEMA, RUNS_SCHEMA, as_runs, empty_table, is_runs

try:
    from collectors import _otlp_native
except ImportError:  # built without a C compiler: the Python path serves
    _otlp_native = None

# The extension takes the contract's fields and their types at start-up (`_layout`); its
# flag bits are these (_otlp_native.c).
_KEY_FLAGS = {
    "job.event": 1 << 0, "event": 1 << 1, "host.name": 1 << 2, "process.pid": 1 << 3,
    CELERY_RETRIES: 1 << 5, "ts": 1 << 6, "trace_id": 1 << 7, "span_id": 1 << 8,
    "execution_id": 1 << 9,
}
_JOB_ID_KEY, _ATTEMPT_KEY, _OPERATION_KEY = 1 << 10, 1 << 11, (1 << 12, 1 << 13)
_CELERY_KEY = 1 << 14
_KIND, _STEP, _NO_JOB_ID, _PRODUCER = 1 << 8, 1 << 9, 1 << 10, 1 << 11
# The order of the columns the extension hands over (a struct array), and their types:
# plain, or with the columns a span's rows share run-end encoded.
_NATIVE_ORDER = ("event_uid", "ts", "event", *STRING_FIELDS, *INT_FIELDS, "execution_id",
                 "attrs", "source")
_NATIVE_SCHEMA = pa.schema([EVENTS_SCHEMA.field(name) for name in _NATIVE_ORDER])
_NATIVE_RUNS_SCHEMA = pa.schema([RUNS_SCHEMA.field(name) for name in _NATIVE_ORDER])


def available() -> bool:
    """Whether the native decoder was built (it needs a C compiler at install time)."""
    return _otlp_native is not None


def _aliases(normaliser: Normaliser) -> dict[str, int] | None:
    """Source key -> field * 256 + rank; None when a key feeds two fields (plain path)."""
    table: dict[str, int] = {}
    for field, name in enumerate(FIELDS):
        for rank, key in enumerate(normaliser.sources_of(name)):
            code = field * 256 + rank
            if table.setdefault(key, code) >> 8 != field:
                return None
    return table


def _layout() -> dict[str, tuple[str, ...]]:
    """The canonical fields, numbered as `_aliases` numbers them, and their types."""
    return {"fields": FIELDS, "types": tuple(contract.column(name).type for name in FIELDS)}


def _key_flags() -> dict[str, int]:
    flags = dict(_KEY_FLAGS)
    for key in JOB_ID_KEYS:
        flags[key] = flags.get(key, 0) | _JOB_ID_KEY
    for key in ATTEMPT_KEYS:
        flags[key] = flags.get(key, 0) | _ATTEMPT_KEY
    for key, flag in zip(OPERATION_KEYS, _OPERATION_KEY, strict=True):
        flags[key] = flags.get(key, 0) | flag
    for key in celery_spans.KEYS:
        flags[key] = flags.get(key, 0) | _CELERY_KEY
    return flags


def _kinds() -> dict[str, int]:
    return {
        name: index | _KIND | (_STEP if name in EXECUTION_STEPS else 0)
        | (_NO_JOB_ID if name in NO_JOB_ID_KINDS else 0)
        | (_PRODUCER if name in PRODUCER_KINDS else 0)
        for index, name in enumerate(EVENT_KINDS)
    }


def native_config(normaliser: Normaliser) -> dict[str, Any] | None:
    """What the extension's Decoder is built from: the contract's tables for one mapping,
    the field layout among them. None where the mapping is for the Python path."""
    aliases = _aliases(normaliser)
    # Event renames and keys with two meanings are rare: the Python path has them.
    if aliases is None or normaliser.mapping.events:
        return None
    return {
        "aliases": aliases,
        "keys": _key_flags(),
        "kinds": _kinds(),
        "operations": {op: EVENT_KINDS.index(kind) for op, kind in OPERATION_EVENTS.items()},
        "kind_names": EVENT_KINDS,
        "worker_key": RESOURCE_WORKER_ID,
        **_layout(),
    }


class NativeTraceDecoder:
    """The native decoder for one normaliser's mapping."""

    def __init__(self, normaliser: Normaliser) -> None:
        self.normaliser = normaliser
        config = native_config(normaliser) if available() else None
        self.native = _otlp_native.Decoder(**config) if config is not None else None

    def decode(
        self, body: bytes, parse: Callable[[], ExportTraceServiceRequest], source: str
    ) -> tuple[pa.Table, list[Rejected], int]:
        """Rows, rejected records and ignored spans of a request `body`.

        The rows are in EVENTS_SCHEMA, or in RUNS_SCHEMA where half of them or more come
        from span events (lifecycle steps), which repeat most of their span's row: that
        halves what a hot segment writes, and the extension writes a span's shared values
        once. `store.schema.as_events` gives either as plain columns.

        `parse` gives the protobuf message (or raises for a body that is not one); it is
        called only when some span needs the Python path, since parsing costs as much as
        the native decoding itself.
        """
        result = self.native.decode(body, source) if self.native is not None else None
        if result is None:
            rows, rejected, ignored = decode_traces_rows(parse(), self.normaliser, source)
            return rows_table(rows), rejected, ignored
        count, columns, fallback, ignored, runs = result
        table = _columns_table(count, columns, runs)
        if not fallback:
            return table, [], ignored
        rows, rejected, more = decode_traces_rows(
            parse(), self.normaliser, source, only=frozenset(fallback)
        )
        more_rows = as_runs(rows_table(rows)) if is_runs(table) else rows_table(rows)
        return pa.concat_tables([table, more_rows]), rejected, ignored + more


class _NativeColumns:
    """The extension's columns, offered to pyarrow through the Arrow PyCapsule interface."""

    __slots__ = ("capsule", "schema")

    def __init__(self, capsule: object, schema: pa.Schema) -> None:
        self.capsule, self.schema = capsule, schema

    def __arrow_c_array__(self, requested_schema: object = None) -> tuple[object, object]:
        return self.schema.__arrow_c_schema__(), self.capsule


def _columns_table(rows: int, columns: object, runs: bool) -> pa.Table:
    """The rows the extension wrote, without a copy, as a table in EVENTS_SCHEMA (or
    RUNS_SCHEMA, for `runs`)."""
    if rows == 0:
        return empty_table()
    schema = _NATIVE_RUNS_SCHEMA if runs else _NATIVE_SCHEMA
    batch = pa.record_batch(_NativeColumns(columns, schema))
    return pa.Table.from_batches([batch]).select(EVENTS_SCHEMA.names)


_decoders: weakref.WeakKeyDictionary[Normaliser, NativeTraceDecoder] = (
    weakref.WeakKeyDictionary()
)


def decoder_for(normaliser: Normaliser) -> NativeTraceDecoder:
    """One decoder per normaliser (its tables are built once)."""
    decoder = _decoders.get(normaliser)
    if decoder is None:
        decoder = _decoders[normaliser] = NativeTraceDecoder(normaliser)
    return decoder
