"""The job-event contract as data: the one place its fields, kinds and rules are written.

CONTRACT.md describes the contract to people; this module states it to code. Every
decoder reads it (the native one is handed its layout at start-up), the store derives its
Arrow schema (in which DuckDB reads the Parquet segments) and ClickHouse columns from it,
and the normaliser its checks. Adding a
canonical field means adding one `Column` to `COLUMNS` (and using it in the SQL that needs
it); nothing else lists the fields.

It sits in `store/` because both stages read it: collectors build rows in this layout and
the store keeps them in it (dependencies point collectors -> store, never back).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal

# ------------------------------------------------------------------------- column types

ColumnType = Literal["string", "int32", "int64", "timestamp"]

#: The inclusive range each integer type holds: a value outside it is refused, not wrapped.
INT_RANGES: dict[ColumnType, tuple[int, int]] = {
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
}
_CLICKHOUSE_TYPES: dict[ColumnType, str] = {
    "string": "String",
    "int32": "Int32",
    "int64": "Int64",
    "timestamp": "DateTime64(6, 'UTC')",
}


@dataclass(frozen=True)
class Column:
    """One column of the events table.

    `mapped` columns are canonical fields: picked out of a source record through their
    spellings (the name, its `job.` form, then `aliases`). The others the decoders set
    themselves (the uid, the source, what is left in `attrs`, the execution span).
    """

    name: str
    type: ColumnType
    mapped: bool = True
    nullable: bool = True
    aliases: tuple[str, ...] = ()
    #: Few distinct values: ClickHouse keeps them as a dictionary (LowCardinality).
    low_cardinality: bool = False

    @property
    def clickhouse_type(self) -> str:
        text = _CLICKHOUSE_TYPES[self.type]
        if self.nullable:
            text = f"Nullable({text})"
        return f"LowCardinality({text})" if self.low_cardinality else text


# ------------------------------------------------------------------------- aliases

#: Where OTLP decoding puts the host:pid it builds from resource attributes.
RESOURCE_WORKER_ID = "resource.worker_id"
#: Where OTLP decoding puts the attempt a Celery run span implies from `celery.retries`
#: and the transport's `redelivered` flag (collectors/celery_spans.py).
CELERY_ATTEMPT = "celery.delivery_attempt"
#: Celery's retry count: `delivery_attempt` is one more, where nothing names it.
CELERY_RETRIES = "celery.retries"
#: The prefix under which any canonical name may also be spelled (`job.queue`).
FIELD_PREFIX = "job."

#: messaging.operation.type (older messaging.operation) -> event, where no event is named.
OPERATION_EVENTS: dict[str, str] = {
    "create": "enqueue",
    "send": "enqueue",
    "publish": "enqueue",
    "receive": "deliver",
    "process": "deliver",
    "deliver": "deliver",
    "settle": "ack",
}
OPERATION_KEYS: tuple[str, ...] = ("messaging.operation.type", "messaging.operation")

# ------------------------------------------------------------------------- the columns

#: The events table, in column order. From CONTRACT.md, "Canonical fields" and "Aliases
#: that work without a mapping file".
COLUMNS: tuple[Column, ...] = (
    Column("event_uid", "string", mapped=False, nullable=False),
    Column("ts", "timestamp", nullable=False, aliases=("timestamp", "time", "@timestamp")),
    Column("event", "string", nullable=False, low_cardinality=True, aliases=("job.event",)),
    Column("job_id", "string", aliases=("messaging.message.id", "messaging.message_id")),
    Column("job_type", "string", low_cardinality=True, aliases=("celery.task_name",)),
    Column("idempotency_key", "string"),
    Column("resource_key", "string"),
    Column(
        "queue", "string", low_cardinality=True,
        aliases=("messaging.destination.name", "messaging.destination"),
    ),
    # Delivery count has no generic OpenTelemetry attribute.
    Column(
        "delivery_attempt", "int32",
        aliases=(
            "messaging.gcp_pubsub.message.delivery_attempt",
            "messaging.servicebus.message.delivery_count",
            # SQS's receive count, where the consumer records it (docs/queues-sidekiq-sqs.md).
            "aws.sqs.approximate_receive_count",
            "ApproximateReceiveCount",
            CELERY_ATTEMPT,
        ),
    ),
    # host:pid from the resource ranks below a worker_id the span or record names itself,
    # and above the SDK's per-process service.instance.id.
    Column("worker_id", "string", aliases=(RESOURCE_WORKER_ID, "service.instance.id")),
    Column("lock_key", "string"),
    Column("lock_owner", "string"),
    Column("lock_ttl_ms", "int64"),
    Column("visibility_timeout_ms", "int64"),
    # OpenTelemetry's resource convention, so a span needs no job-specific copy of it.
    Column("service_version", "string", aliases=("service.version",)),
    Column("trace_id", "string"),
    Column("span_id", "string"),
    # The execution span a row came from, where the source says so (OTLP): one execution
    # span is one execution. Null for logs, where executions are derived.
    Column("execution_id", "string", mapped=False),
    Column("source", "string", mapped=False),
    Column("attrs", "string", mapped=False),
)

COLUMN_NAMES: tuple[str, ...] = tuple(c.name for c in COLUMNS)
_BY_NAME = {c.name: c for c in COLUMNS}

#: The two fields every row starts with: decoders set them, and refuse a record without.
HEAD_FIELDS: tuple[str, ...] = ("ts", "event")
#: The canonical fields a record's text becomes, by type, in column order.
STRING_FIELDS: tuple[str, ...] = tuple(
    c.name for c in COLUMNS if c.mapped and c.type == "string" and c.name not in HEAD_FIELDS
)
INT_FIELDS: tuple[str, ...] = tuple(
    c.name for c in COLUMNS if c.mapped and c.type in INT_RANGES and c.name not in HEAD_FIELDS
)
#: Every canonical field, as decoders lay them out: the head, the strings, the integers.
FIELDS: tuple[str, ...] = (*HEAD_FIELDS, *STRING_FIELDS, *INT_FIELDS)


def column(name: str) -> Column:
    return _BY_NAME[name]


def spellings(name: str) -> tuple[str, ...]:
    """The spellings of canonical field `name` that work without a mapping file, in the
    order they are tried (the first present wins)."""
    known = _BY_NAME.get(name)
    return (name, FIELD_PREFIX + name, *(known.aliases if known else ()))


def int_range(name: str) -> tuple[int, int]:
    """The values integer field `name` may hold: what its column holds."""
    return INT_RANGES[_BY_NAME[name].type]


#: The least delivery_attempt a row may hold: the queue's count starts at one.
MIN_DELIVERY_ATTEMPT = 1

#: Keys that name a job, and that name its delivery attempt: a span carrying both, with no
#: step of its own, is an execution (collectors/otlp.py).
JOB_ID_KEYS: tuple[str, ...] = spellings("job_id")
ATTEMPT_KEYS: tuple[str, ...] = (
    *(k for k in spellings("delivery_attempt") if k != CELERY_ATTEMPT),
    CELERY_RETRIES,
)

# ------------------------------------------------------------------------- event kinds

#: From CONTRACT.md, "Event kinds", in its order (the native decoder numbers them so).
EVENT_KINDS: tuple[str, ...] = (
    "outbox_write",
    "enqueue",
    "enqueue_deduped",
    "deliver",
    "lock_acquire",
    "lock_contended",
    "lock_renew",
    "lock_release",
    "lock_expired",
    "idempotency_hit",
    "side_effect",
    "occ_conflict",
    "commit",
    "ack",
    "nack",
    "fail",
    "worker_start",
    "worker_stop",
)

#: The steps of an execution between its `deliver` and its end, in contract order: as a
#: child span, a step's parent span is its execution.
EXECUTION_STEPS: tuple[str, ...] = EVENT_KINDS[
    EVENT_KINDS.index("lock_acquire") : EVENT_KINDS.index("fail") + 1
]
#: Kinds that need no job_id: every other kind without one is refused.
NO_JOB_ID_KINDS: tuple[str, ...] = ("enqueue_deduped", "worker_start", "worker_stop")
#: The producer's side: a worker_id of theirs is never the resource's.
PRODUCER_KINDS: tuple[str, ...] = ("outbox_write", "enqueue", "enqueue_deduped")
#: The ends of an execution that settle its message.
SETTLE_KINDS: tuple[str, ...] = ("ack", "nack", "fail")

# ------------------------------------------------------------------------- uids

#: event_uid of a record from its content (OTLP): BLAKE2b of its parts, each followed by
#: this separator, as this many bytes in hex. JSON lines hash the line instead
#: (collectors/uids.py).
UID_DIGEST_SIZE = 16
UID_SEPARATOR = b"\x1f"
#: The part after trace_id and span_id that tells a span's rows apart: a span event's
#: index, or one of these.
SPAN_ROW_INDEX = -1
SETTLE_ROW_INDEX = -2


def content_uid(*parts: object) -> str:
    """A deterministic id from content: the same record arriving twice gets the same id."""
    digest = hashlib.blake2b(digest_size=UID_DIGEST_SIZE)
    for part in parts:
        digest.update(part if isinstance(part, bytes) else str(part).encode())
        digest.update(UID_SEPARATOR)
    return digest.hexdigest()


# ------------------------------------------------------------------------- timestamps

#: Rows hold microseconds since the Unix epoch, UTC.
TS_UNIT = "us"
#: The times a row may hold: years 1 to 9999, which every reader (Python's datetime among
#: them) can show; the store's column itself would hold more.
MICROS_RANGE = (-62_135_596_800_000_000, 253_402_300_799_999_999)
#: Epoch numbers carry no unit; it is decided by magnitude. A value below the first bound
#: is seconds (up to the year 5138), below the second milliseconds, below the third
#: microseconds, else nanoseconds. OTLP's `*_unix_nano` fields are nanoseconds always.
EPOCH_SECONDS_BELOW = 1e11
EPOCH_MILLIS_BELOW = 1e14
EPOCH_MICROS_BELOW = 1e17
