"""One source record -> one canonical event row (the job-event contract).

Sources (JSON-lines logs, OTLP spans, span events and log records) first flatten their
record into a dict of dotted keys; this module picks the canonical fields out of it through
the aliases and the user's mapping, validates them, and keeps everything else in `attrs`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from collectors.mapping import (
    CELERY_RETRIES,
    DEFAULT_MAPPING,
    OPERATION_EVENTS,
    OPERATION_KEYS,
    FieldMapping,
)
from collectors.timestamps import TimestampError, to_micros
from store.contract import (
    EVENT_KINDS,
    FIELDS,
    INT_FIELDS,
    MICROS_RANGE,
    MIN_DELIVERY_ATTEMPT,
    NO_JOB_ID_KINDS,
    STRING_FIELDS,
    content_uid,
    int_range,
)

__all__ = ["MAX_DEPTH", "Normaliser", "RecordError", "Row", "content_uid", "flatten", "nesting"]

_KINDS = frozenset(EVENT_KINDS)
_NO_JOB_ID = frozenset(NO_JOB_ID_KINDS)
# What the store's integer columns hold.
_INT_RANGES = {name: int_range(name) for name in INT_FIELDS}
#: How deeply objects and arrays may nest in a record (JSON lines).
MAX_DEPTH = 64
Row = dict[str, Any]


class RecordError(ValueError):
    """A record that cannot become a contract event; the message says why."""


def flatten(record: Mapping[str, Any], prefix: str = "", depth: int = 1) -> dict[str, Any]:
    """Nested objects become dotted keys, so `{"job": {"id": 1}}` reads as `job.id`.

    Raises RecordError for objects nested deeper than MAX_DEPTH (a record, not the
    process, pays for a hostile one)."""
    if depth > MAX_DEPTH:
        raise RecordError(f"nested deeper than {MAX_DEPTH} levels")
    flat: dict[str, Any] = {}
    for key, value in record.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(flatten(value, f"{name}.", depth + 1))
        else:
            flat[name] = value
    return flat


def nesting(value: Any) -> int:
    """How deeply objects and arrays nest in a decoded JSON value (a scalar is 0)."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return deepest


class Normaliser:
    """Maps flat records to canonical rows; one instance per mapping."""

    def __init__(self, mapping: FieldMapping = DEFAULT_MAPPING) -> None:
        self.mapping = mapping
        self._sources = {
            name: mapping.sources_for(name) for name in FIELDS
        }
        self._source_sets = {name: frozenset(keys) for name, keys in self._sources.items()}
        self._source_keys = frozenset().union(*self._source_sets.values())
        self._owners: dict[str, set[str]] = {}
        for name, spellings in self._source_sets.items():
            for key in spellings:
                self._owners.setdefault(key, set()).add(name)

    def _take(self, flat: dict[str, Any], canonical: str, present: set[str]) -> Any:
        """The first spelling present wins; the other spellings go too, not lingering in attrs."""
        hits = present & self._source_sets[canonical]
        if not hits:
            return None
        if len(hits) == 1:
            for key in hits:
                return flat.pop(key, None)
        value = None
        for key in self._sources[canonical]:
            if key in hits and key in flat:
                value = flat.pop(key)
                break
        for other in hits:
            flat.pop(other, None)
        return value

    def normalise(self, flat: dict[str, Any], *, uid: str, source: str) -> Row:
        """Build a row from a flattened record (consumed). Raises RecordError."""
        # Only the few source keys a record holds are looked at: a record rarely holds more
        # than a handful of the ~70 spellings the mapping knows.
        present = flat.keys() & self._source_keys
        take = self._take
        ts_value = take(flat, "ts", present)
        if ts_value is None:
            raise RecordError("no timestamp (ts, timestamp, time or @timestamp)")
        try:
            ts = to_micros(ts_value)
        except TimestampError as exc:
            raise RecordError(str(exc)) from exc
        if not MICROS_RANGE[0] <= ts <= MICROS_RANGE[1]:
            raise RecordError(f"timestamp out of range (years 1 to 9999): {ts_value!r}")

        event = self._event(flat, take(flat, "event", present))
        row: Row = {"event_uid": uid, "ts": ts, "event": event, "source": source}
        row.update(self.fields(flat, present))
        return self.finish(row, flat)

    def fields(self, flat: dict[str, Any], present: set[str]) -> Row:
        """The canonical string and integer fields of a record, taken out of it."""
        take = self._take
        row: Row = {}
        if not present:
            return row
        fed = self.fed_by(present)
        for name in STRING_FIELDS:
            if name not in fed:
                continue
            value = take(flat, name, present)
            if value is not None:
                if isinstance(value, dict | list):
                    raise RecordError(f"{name} must be a string, got {type(value).__name__}")
                row[name] = value if type(value) is str else str(value)
        for name in INT_FIELDS:
            if name not in fed:
                continue
            value = take(flat, name, present)
            if value is not None:
                row[name] = _in_range(name, _as_int(name, value))
        return row

    def finish(self, row: Row, rest: dict[str, Any]) -> Row:
        """Checks that need the whole row, then the leftover keys become `attrs`."""
        retries = rest.get(CELERY_RETRIES)
        if row.get("delivery_attempt") is None and retries is not None:
            row["delivery_attempt"] = _as_int(CELERY_RETRIES, retries) + 1
        attempt = row.get("delivery_attempt")
        if attempt is not None and attempt < MIN_DELIVERY_ATTEMPT:
            raise RecordError(
                f"delivery_attempt must be >= {MIN_DELIVERY_ATTEMPT}, got {attempt}"
            )
        _in_range("delivery_attempt", attempt)
        if row["event"] not in _NO_JOB_ID and not row.get("job_id"):
            raise RecordError(f"event {row['event']!r} needs a job_id")
        try:
            row["attrs"] = orjson.dumps(rest, default=str).decode() if rest else None
        except TypeError as exc:  # orjson.JSONEncodeError: nested too deeply, say
            raise RecordError(f"attributes cannot be kept as JSON: {exc}") from exc
        return row

    def sources_of(self, canonical: str) -> tuple[str, ...]:
        """Every spelling of a canonical field, in the order they are tried."""
        return self._sources[canonical]

    def source_keys(self, flat: dict[str, Any]) -> set[str]:
        """The keys of `flat` that spell some canonical field."""
        return flat.keys() & self._source_keys

    def fed_by(self, keys: set[str]) -> set[str]:
        """The canonical fields that these source keys can feed."""
        owners = self._owners
        fed: set[str] = set()
        for key in keys:
            fed |= owners[key]
        return fed

    def event_name(self, value: str) -> str | None:
        """A lifecycle step's name after the mapping's renames, or None if not a kind."""
        name = self.mapping.events.get(value, value)
        return name if name in _KINDS else None

    def _event(self, flat: dict[str, Any], value: Any) -> str:
        if value is None:
            for key in OPERATION_KEYS:
                operation = flat.get(key)
                if operation is not None:
                    value = OPERATION_EVENTS.get(str(operation))
                    break
        if value is None:
            raise RecordError("no event (event or job.event)")
        name = self.mapping.events.get(str(value), str(value))
        if name not in _KINDS:
            raise RecordError(f"unknown event {name!r}")
        return name


def _in_range(name: str, value: int | None) -> int | None:
    """The value, if the store's column for `name` can hold it."""
    low, high = _INT_RANGES[name]
    if value is not None and not low <= value <= high:
        raise RecordError(f"{name} out of range ({low} to {high}), got {value}")
    return value


def _as_int(name: str, value: Any) -> int:
    if isinstance(value, bool):
        raise RecordError(f"{name} must be an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        try:
            return int(value)
        except ValueError:  # digits int() refuses: other scripts', or too many of them
            pass
    raise RecordError(f"{name} must be an integer, got {value!r}")
